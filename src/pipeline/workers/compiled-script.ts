/** Whether a worker thread's script is there to start: compiled beside its module in dist/. */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const found = new Map<string, boolean>();

/**
 * Run from the TypeScript sources (vitest) there is no compiled script: the work it would do stays on the calling
 * thread, which gives the same bytes. Looked up once per script.
 */
export function compiledScriptPresent(script: URL): boolean {
  let present = found.get(script.href);
  if (present === undefined) {
    present = existsSync(fileURLToPath(script));
    found.set(script.href, present);
  }
  return present;
}
