/** Errors thrown in a worker thread, turned back into the main thread's own error types. */
import { InputError } from '../io/table.js';
import type { ThrownInWorker } from '../workers/worker-pool.js';

/**
 * An input a thread cannot read or parse is the user's input problem: it becomes the InputError it would have been
 * without the thread (file, line, what, how to fix), so it is reported in one line.
 */
export function reviveInputError(thrown: ThrownInWorker): Error | undefined {
  if (thrown.name !== 'InputError') return undefined;
  const f = thrown.fields;
  return new InputError(
    String(f.file),
    typeof f.line === 'number' ? f.line : undefined,
    String(f.problem),
    typeof f.hint === 'string' ? f.hint : undefined,
  );
}
