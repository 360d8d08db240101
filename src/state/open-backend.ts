/** Opens a state by what `--state` names: a `postgres://` URL is a PostgreSQL schema, anything else a file. */
import type { StateBackend } from './backend.js';
import { withoutPassword } from './postgres/url.js';
import type { OpenStateOptions } from './types.js';

/** True when `--state` names a PostgreSQL database rather than a file. */
export function isPostgresState(spec: string): boolean {
  return /^postgres(ql)?:\/\//i.test(spec);
}

/**
 * The state `spec` names, opened for a run. The PostgreSQL driver is loaded only for a database URL, so a run on a
 * file starts as fast as before.
 */
export async function openStateBackend(spec: string, options: OpenStateOptions): Promise<StateBackend> {
  if (isPostgresState(spec)) {
    const { openPostgresState } = await import('./postgres/open.js');
    return openPostgresState(spec, options);
  }
  const { openFileState } = await import('./file-backend.js');
  return openFileState(spec, options);
}

/**
 * How messages show the state `spec` names: a file's path as given; a database URL without its password (in the
 * user part or a `password` parameter), so that no message, summary or log line carries it.
 */
export function describeState(spec: string): string {
  return isPostgresState(spec) ? withoutPassword(spec) : spec;
}
