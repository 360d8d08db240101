// map --dry-run on a PostgreSQL state: it reads the state to count what would be sent, and writes nothing there.
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli, type ServeProcess, serveConnection, startServe } from '../helpers/map-e2e-processes.js';
import { usePostgres } from '../helpers/postgres.js';

const pg = usePostgres();
const dir = tempDir('postgres-dry-run');
const MAP_PATH = '/v3/identity/map';
let serve: ServeProcess;

/** Rows 0..n-1 of distinct addresses. */
function rows(n: number): string {
  return `email\n${Array.from({ length: n }, (_, i) => `dry.${i}@example.com\n`).join('')}`;
}

beforeAll(async () => {
  ensureBuilt();
  serve = await startServe();
}, 120_000);

afterAll(async () => {
  await serve?.stop();
  dir.remove();
});

function map(args: string[]) {
  const { args: connection, env } = serveConnection(serve);
  return runCli(['map', ...args, ...connection], { env });
}

/** What a run could have written in the schema: its entries, runs and pending changes, read straight from it. */
async function contents(schema: string): Promise<{ entries: string; runs: string; pending: string }> {
  const sql = postgres(pg.server().url, { max: 1, onnotice: () => {} });
  try {
    const read = async (table: string) =>
      JSON.stringify(await sql.unsafe(`SELECT * FROM ${schema}.${table} ORDER BY 1`));
    return { entries: await read('entries'), runs: await read('runs'), pending: await read('pending_changes') };
  } finally {
    await sql.end();
  }
}

describe('map --dry-run on a PostgreSQL state', { timeout: 120_000 }, () => {
  it('counts what the state answers and what would be sent, sends nothing and writes nothing', async () => {
    const schema = 'dry_run';
    const url = pg.schemaUrl(schema);
    const mapped = await map([dir.file('first.csv', rows(120)), '--state', url, '-o', dir.file('first-out.csv')]);
    expect(mapped.code, mapped.stderr).toBe(0);
    const before = await contents(schema);
    expect(JSON.parse(before.entries)).toHaveLength(120);
    expect(JSON.parse(before.runs)).toHaveLength(1);
    const sentBefore = (await serve.stats()).items[MAP_PATH];

    const dry = await map([dir.file('all.csv', rows(300)), '--state', url, '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toBe('');
    expect(dry.stderr).toMatch(/^ {2}120 answered from the state file$/m);
    expect(dry.stderr).toMatch(/^ {2}1 request\(s\) would be sent \(180 identifiers, /m);
    expect(dry.stderr).not.toContain(pg.server().password);
    expect((await serve.stats()).items[MAP_PATH]).toBe(sentBefore);
    expect(await contents(schema)).toEqual(before);
  });

  it('on a schema with no state yet, counts as on a missing file, and creates nothing', async () => {
    const input = dir.file('fresh.csv', rows(40));
    const url = pg.schemaUrl('not_yet');
    const dry = await map([input, '--state', url, '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    const shown = url.replace(`:${pg.server().password}@`, '@');
    expect(dry.stderr).toContain(`uid2-batch: --state ${shown} has no state yet: nothing would be answered from it\n`);
    expect(dry.stderr).toMatch(/^ {2}1 request\(s\) would be sent \(40 identifiers, /m);
    expect(dry.stderr).not.toContain(pg.server().password);
    const sql = postgres(pg.server().url, { max: 1, onnotice: () => {} });
    try {
      const [row] = await sql`SELECT count(*)::int AS n FROM information_schema.schemata WHERE schema_name = 'not_yet'`;
      expect(row.n).toBe(0);
    } finally {
      await sql.end();
    }
  });
});
