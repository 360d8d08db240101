// The numeric options and the data folders the bench scripts share.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './processes.mjs';

const argv = process.argv.slice(2);

/** The number after `name` on the command line (`--rows 1000000`), or `fallback` when it is not given. */
export function numberOption(name, fallback) {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
}

/** Generated inputs (kept between runs) and the scratch folder of outputs, both git-ignored. */
export const DATA = join(ROOT, 'bench', 'data');
export const WORK = join(DATA, 'work');
mkdirSync(WORK, { recursive: true });
