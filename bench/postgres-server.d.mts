// The types of postgres-server.mjs, for the tests that start a server through it.
export interface StartedPostgres {
  /** The URL of its `postgres` database, password included. */
  url: string;
  password: string;
  port: number;
  pid: number | undefined;
  /** Stops the server by its PID and removes its folder. */
  stop(): Promise<void>;
}

export function postgresBinDir(root?: string, pgConfig?: string): string;
export function startPostgres(settings?: Record<string, string | number>): Promise<StartedPostgres>;
