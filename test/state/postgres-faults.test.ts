import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeError } from '../../src/cli/main.js';
import { openStateBackend } from '../../src/state/open-backend.js';
import { StateConnectionError } from '../../src/state/postgres/errors.js';
import { openPostgresState } from '../../src/state/postgres/open.js';
import { entryKeyOf, rawUidText } from '../../src/state/postgres/stored-bytes.js';
import { TYPE_CODE } from '../../src/state/schema.js';
import { metaSumOf } from '../../src/state/meta-values.js';
import type { EntryUpdate } from '../../src/state/types.js';
import { usePostgres } from '../helpers/postgres.js';

const ENV = 'http://127.0.0.1:1/|uid2';
const pg = usePostgres();
let admin: postgres.Sql;
beforeAll(() => {
  admin = postgres(pg.server().url, { max: 2, onnotice: () => {} });
});
afterAll(async () => {
  await admin?.end({ timeout: 1 });
});

/** The key column of an email's entry. */
const emailKey = (hash: string): Buffer => entryKeyOf(TYPE_CODE.email, hash);

/** The error `promise` rejects with (fails the test when it resolves). */
async function failure(promise: Promise<unknown>): Promise<Error & { exitCode?: number; name: string }> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof Error)) throw new Error('expected a failure');
  return err as Error & { exitCode?: number };
}

const mapped = (hash: string, u: string): EntryUpdate => ({
  type: 'email',
  hash,
  outcome: { kind: 'mapped', u, p: null, r: 100 },
});

describe('PostgreSQL state: bad input and faults, one line each without the password', () => {
  it('refuses another environment as the file does, naming the URL without its password', async () => {
    const url = pg.schemaUrl();
    await (await openPostgresState(url, { envFingerprint: ENV })).close();
    const err = await failure(openPostgresState(url, { envFingerprint: 'http://other/|uid2' }));
    expect(err.name).toBe('StateEnvMismatchError');
    expect(err.message).toBe(
      `state file ${url.replace(`:${pg.server().password}@`, '@')} was made for environment ${ENV}, but this run is for http://other/|uid2; ` +
        'a state file never mixes environments: use another --state file for http://other/|uid2',
    );
    expect(err.message).not.toContain(pg.server().password);
  });

  it('is opened through --state by its URL, and its faults reach the CLI as one line with their exit code', async () => {
    const s = await openStateBackend(pg.schemaUrl(), { envFingerprint: ENV });
    expect(s.kind).toBe('postgres');
    await s.close();
    const { url, password } = pg.server();
    const wrong = await failure(openStateBackend(url.replace(password, 'nope'), { envFingerprint: ENV }));
    expect(describeError(wrong)).toEqual({ line: wrong.message, exitCode: 2 });
    const lost = new StateConnectionError('postgres://u@h/db', 'the connection ... was lost', 1);
    expect(describeError(lost)).toEqual({ line: lost.message, exitCode: 1 });
  });

  it('refuses a newer schema and one made by an earlier build', async () => {
    const newer = pg.schemaUrl('newer');
    await (await openPostgresState(newer, { envFingerprint: ENV })).close();
    await admin.unsafe('UPDATE newer.meta SET value = $1, sum = $2 WHERE key = $3', [
      '6',
      metaSumOf('schema_version', '6'),
      'schema_version',
    ]);
    const err = await failure(openPostgresState(newer, { envFingerprint: ENV }));
    expect(err.name).toBe('StateFormatError');
    expect(err.message).toMatch(/schema version 6, newer than this uid2-batch reads \(5\); upgrade uid2-batch$/);

    // a schema of the first layout (text hashes and raw UIDs), one of the second (an index on r that this build
    // neither keeps up nor reads), and one of the third (keys kept distinct by a B-tree, which ON CONFLICT here does
    // not name), and one of the fourth (raw UIDs of 32 bytes kept as their text, where a text of 31 UTF-8 bytes
    // ended in the bytes of such a raw UID) are refused, not misread
    for (const [schema, version] of [
      ['first', '1'],
      ['second', '2'],
      ['third', '3'],
      ['fourth', '4'],
    ]) {
      const url = pg.schemaUrl(schema);
      await (await openPostgresState(url, { envFingerprint: ENV })).close();
      await admin.unsafe(`UPDATE ${schema}.meta SET value = $1, sum = $2 WHERE key = $3`, [
        version,
        metaSumOf('schema_version', version),
        'schema_version',
      ]);
      expect((await failure(openPostgresState(url, { envFingerprint: ENV }))).message).toMatch(
        new RegExp(
          `schema version ${version}, made by an earlier build; map again into another schema \\(\\?schema=NAME\\)$`,
        ),
      );
    }

    const earlier = pg.schemaUrl('earlier');
    await (await openPostgresState(earlier, { envFingerprint: ENV })).close();
    await admin.unsafe('ALTER TABLE earlier.meta DROP COLUMN sum');
    expect((await failure(openPostgresState(earlier, { envFingerprint: ENV }))).message).toMatch(/earlier build/);
  });

  it('refuses a schema with no state when it may not create one', async () => {
    const err = await failure(openPostgresState(pg.schemaUrl(), { envFingerprint: ENV, create: false }));
    expect(err.name).toBe('StateNotFoundError');
  });

  it('says so in one line for a wrong password, a missing database and an unreachable port', async () => {
    const { url, password, port } = pg.server();
    const wrong = await failure(openPostgresState(url.replace(password, 'not-the-password'), { envFingerprint: ENV }));
    expect(wrong).toBeInstanceOf(StateConnectionError);
    expect(wrong.exitCode).toBe(2);
    expect(wrong.message).toMatch(/refused the user name or password/);
    expect(wrong.message).not.toMatch(/not-the-password|\n/);

    const noDb = await failure(openPostgresState(url.replace(/\/postgres$/, '/nowhere'), { envFingerprint: ENV }));
    expect(noDb.message).toMatch(/database does not exist/);
    expect(noDb.message).not.toContain(password);

    // the server's port with the server gone is not known to be free; a port nothing listens on is
    const closed = url.replace(`:${port}/`, ':1/');
    const unreachable = await failure(openPostgresState(closed, { envFingerprint: ENV }));
    expect(unreachable).toBeInstanceOf(StateConnectionError);
    expect(unreachable.exitCode).toBe(2);
    expect(unreachable.message).toMatch(
      /^cannot reach PostgreSQL at postgres:\/\/postgres@127\.0\.0\.1:1\/postgres \(ECONNREFUSED\)/,
    );
    expect(unreachable.message).not.toContain(password);
  });

  it('takes the password from PGPASSWORD when the URL has none, and refuses a schema name it cannot use', async () => {
    const { url, password } = pg.server();
    const bare = `${url.replace(`:${password}@`, '@')}?schema=from_env`;
    const saved = process.env.PGPASSWORD;
    process.env.PGPASSWORD = password;
    try {
      await (await openPostgresState(bare, { envFingerprint: ENV })).close();
    } finally {
      if (saved === undefined) delete process.env.PGPASSWORD;
      else process.env.PGPASSWORD = saved;
    }
    const bad = await failure(openPostgresState(`${url}?schema=Bad-Name`, { envFingerprint: ENV }));
    expect(bad.name).toBe('StateSettingError');
    expect(bad.message).toMatch(/schema 'Bad-Name' is not a plain name/);
    expect(bad.message).not.toContain(password);
  });

  it('finds a damaged row: a lookup fails, an export skips and counts it', async () => {
    const url = pg.schemaUrl('damaged');
    const s = await openPostgresState(url, { envFingerprint: ENV });
    try {
      await s.commitBatch([mapped('a', 'ua'), mapped('b', 'ub')], 5);
      await admin.unsafe(`UPDATE damaged.entries SET u = 'forged' WHERE key = $1`, [emailKey('a')]);
      const err = await failure(s.lookupStored('email', ['a']));
      expect(err.name).toBe('StateDamagedError');
      expect(err.message).toMatch(/is damaged \(entry 1 fails its checksum\)/);
      const seen = [];
      for await (const e of s.entries()) seen.push(e.hash);
      expect(seen).toEqual(['b']);
      expect(s.damaged()).toBe(1);
      // a status code no build writes is damage too
      await admin.unsafe(`UPDATE damaged.entries SET status = 9 WHERE key = $1`, [emailKey('b')]);
      expect((await failure(s.lookupStored('email', ['b']))).name).toBe('StateDamagedError');
    } finally {
      await s.close();
    }
  });

  it('answers a lookup while a commit of the same run waits on a lock', async () => {
    const s = await openPostgresState(pg.schemaUrl('beside'), { envFingerprint: ENV });
    const holder = await admin.reserve();
    try {
      await s.commitBatch([mapped('a', 'ua')], 5);
      // another session holds a new key of the batch, so the commit waits until it lets go
      await holder.unsafe('BEGIN');
      await holder.unsafe(`INSERT INTO beside.entries (key, status, due, sum) VALUES ($1, 3, false, 0)`, [
        emailKey('n'),
      ]);
      let committed = false;
      const commit = s.commitBatch([mapped('n', 'un')], 6).then(() => {
        committed = true;
      });
      const got = await Promise.race([
        s.lookupStored('email', ['a', 'n']),
        new Promise<null>((resolve) => setTimeout(() => resolve(null), 5_000)),
      ]);
      expect(got === null ? 'waited behind the commit' : [...got.u]).toEqual(['ua']);
      expect(committed).toBe(false);
      await holder.unsafe('ROLLBACK');
      await commit;
      expect([...(await s.lookupStored('email', ['n'])).u]).toEqual(['un']);
    } finally {
      holder.release();
      await s.close();
    }
  });

  it('says in one line that the server has no room for the sessions a lookup opens', async () => {
    const { url, password } = pg.server();
    await admin.unsafe(`CREATE ROLE one_session LOGIN PASSWORD '${password}' CONNECTION LIMIT 1`);
    await admin.unsafe('GRANT CREATE ON DATABASE postgres TO one_session');
    const s = await openPostgresState(`${url.replace('//postgres:', '//one_session:')}?schema=one_session`, {
      envFingerprint: ENV,
    });
    try {
      const err = await failure(s.lookupStored('email', ['a']));
      expect(err).toBeInstanceOf(StateConnectionError);
      expect(err.exitCode).toBe(2);
      expect(err.message).toMatch(/has no room for another session \(53300\); a run holds up to six/);
      expect(err.message).not.toMatch(new RegExp(`${password}|\n`));
    } finally {
      await s.close();
    }
  });

  it('rolls a batch back when its connection is lost mid-commit; a re-run commits it', async () => {
    const url = pg.schemaUrl('lost');
    const s = await openPostgresState(url, { envFingerprint: ENV });
    try {
      await s.commitBatch([mapped('a', 'old')], 5);
      // another session holds a new key of the batch, so the commit waits after updating 'a'
      const holder = await admin.reserve();
      await holder.unsafe('BEGIN');
      await holder.unsafe(`INSERT INTO lost.entries (key, status, due, sum) VALUES ($1, 3, false, 0)`, [emailKey('n')]);
      const commit = failure(s.commitBatch([mapped('a', 'new'), mapped('n', 'un')], 6));
      for (let i = 0; i < 100; i++) {
        const [row] = await admin.unsafe(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'uid2-batch' AND wait_event_type = 'Lock'`,
        );
        if (row.n > 0) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      await admin.unsafe(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'uid2-batch' AND wait_event_type = 'Lock'`,
      );
      const err = await commit;
      await holder.unsafe('ROLLBACK');
      holder.release();
      expect(err).toBeInstanceOf(StateConnectionError);
      expect(err.exitCode).toBe(1);
      expect(err.message).toMatch(/was lost .*run the command again to resume/);
      expect(err.message).not.toContain(pg.server().password);
      const [row] = await admin.unsafe(`SELECT u FROM lost.entries WHERE key = $1`, [emailKey('a')]);
      expect(rawUidText(row.u)).toBe('old');
      // the run stops: every later call says so
      expect((await failure(s.lookupStored('email', ['a']))).message).toBe(err.message);
    } finally {
      await s.close();
    }
    // a re-run commits the batch
    const again = await openPostgresState(url, { envFingerprint: ENV });
    try {
      await again.commitBatch([mapped('a', 'new'), mapped('n', 'un')], 6);
      const got = await again.lookupStored('email', ['a', 'n']);
      expect([...got.u].sort()).toEqual(['new', 'un']);
    } finally {
      await again.close();
    }
  });
});
