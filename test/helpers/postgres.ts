/** One PostgreSQL server per test file (bench/postgres-server.mjs), and a fresh schema's URL per test. */
import { afterAll, beforeAll } from 'vitest';
import { type StartedPostgres, startPostgres } from '../../bench/postgres-server.mjs';

export type PostgresServer = StartedPostgres;

/**
 * Starts a server before the file's tests and stops it (by PID) after them. Without PostgreSQL's binaries the
 * tests fail, saying to install the `postgresql` package: they are never skipped.
 */
export function usePostgres(): { server: () => PostgresServer; schemaUrl: (schema?: string) => string } {
  let server: PostgresServer | undefined;
  let n = 0;
  beforeAll(async () => {
    // fsync off: a test's server is thrown away, and the machine is shared
    server = await startPostgres({ fsync: 'off', synchronous_commit: 'off' });
  }, 90_000);
  afterAll(async () => {
    await server?.stop();
  });
  const current = (): PostgresServer => {
    if (server === undefined) throw new Error('the PostgreSQL server of this test file did not start');
    return server;
  };
  return {
    server: current,
    schemaUrl: (schema = `t${++n}_${process.pid}`) => `${current().url}?schema=${schema}`,
  };
}
