/** Opens a state kept in a PostgreSQL schema (placeholder until the PostgreSQL store is built). */
import type { StateBackend } from '../backend.js';
import type { OpenStateOptions } from '../types.js';

export async function openPostgresState(_url: string, _options: OpenStateOptions): Promise<StateBackend> {
  throw new Error('a PostgreSQL state is not built yet');
}
