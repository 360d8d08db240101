/** A state file behind the StateBackend interface (placeholder until the jobs move onto it). */
import type { StateBackend } from './backend.js';
import type { OpenStateOptions } from './types.js';

export async function openFileState(_path: string, _options: OpenStateOptions): Promise<StateBackend> {
  throw new Error('the state file is not behind StateBackend yet');
}
