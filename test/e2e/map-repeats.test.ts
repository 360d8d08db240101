import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli, serveConnection, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';

// Repeats further apart than a run remembers identifiers: with --state each is sent once (the state answers the
// repeats of what it has committed, and an identifier still on its way is waited for); without it they are sent
// again, and the summary counts them. Counted by the service itself, for every --threads setting.
const MAP_PATH = '/v3/identity/map';
/** Well past the 50,000 identifiers a run remembers, so every repeat comes after its first one was forgotten. */
const DISTINCT = 60_000;
let serve: ServeProcess;
const dir = tempDir('repeats');
let input: string;

async function itemsSent(): Promise<number> {
  return (await serve.stats()).items[MAP_PATH] ?? 0;
}

beforeAll(async () => {
  ensureBuilt();
  // answers slower than the file is read: the first identifiers are still on their way when they are forgotten
  serve = await startServe(['--latency-ms', '400']);
  const lines = ['id,email'];
  for (let pass = 0; pass < 2; pass++)
    for (let i = 0; i < DISTINCT; i++) lines.push(`${pass}-${i},far.${i}@example.com`);
  input = dir.file('input.csv', `${lines.join('\n')}\n`);
}, 60_000);

afterAll(async () => {
  await serve?.stop();
  dir.remove();
});

describe('repeats far apart', () => {
  for (const threads of [0, 1, 2]) {
    it(`with --state: each identifier is sent once (--threads ${threads})`, async () => {
      const c = serveConnection(serve);
      const summary = dir.file(`state-${threads}.json`);
      const before = await itemsSent();
      const res = await runCli(
        [
          'map',
          input,
          '--state',
          dir.file(`state-${threads}.db`),
          '-o',
          dir.file(`state-${threads}.csv`),
          '--threads',
          String(threads),
          '--summary-json',
          summary,
          '-q',
          ...c.args,
        ],
        { env: c.env },
      );
      expect(res.code, res.stderr).toBe(0);
      expect((await itemsSent()) - before).toBe(DISTINCT);
      const s = JSON.parse(readFileSync(summary, 'utf8')) as Record<string, unknown>;
      expect(s.repeats_sent).toBe(0);
      expect(s.status).toMatchObject({ mapped: 2 * DISTINCT });
    }, 120_000);

    it(`without --state: the repeats sent again are counted (--threads ${threads})`, async () => {
      const c = serveConnection(serve);
      const summary = dir.file(`plain-${threads}.json`);
      const before = await itemsSent();
      const res = await runCli(
        [
          'map',
          input,
          '-o',
          dir.file(`plain-${threads}.csv`),
          '--threads',
          String(threads),
          '--summary-json',
          summary,
          ...c.args,
        ],
        { env: c.env },
      );
      expect(res.code, res.stderr).toBe(0);
      const sent = (await itemsSent()) - before;
      const s = JSON.parse(readFileSync(summary, 'utf8')) as Record<string, unknown>;
      expect(typeof s.repeats_sent).toBe('number');
      // the count of distinct identifiers is an estimate (within about 1%) once some were forgotten
      expect(Math.abs((s.repeats_sent as number) - (sent - DISTINCT))).toBeLessThanOrEqual(DISTINCT * 0.02);
      expect(s.repeats_sent_estimated).toBe(true);
      expect(res.stderr).toMatch(/sent again.*--state/);
    }, 120_000);
  }
});
