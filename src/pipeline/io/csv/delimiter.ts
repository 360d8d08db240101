/** The `--delimiter` option, checked. */
import { InputError } from '../table.js';

/** `--delimiter`: one character; `\t` and `tab` both mean a tab, because a literal tab is hard to type. */
export function parseDelimiter(value: string | undefined, file: string): string {
  if (value === undefined || value === '') return ',';
  if (value === '\\t' || value.toLowerCase() === 'tab') return '\t';
  if ([...value].length !== 1 || value === '"' || value === '\n' || value === '\r') {
    throw new InputError(
      file,
      undefined,
      `--delimiter must be one character other than a quote or a line break`,
      'e.g. --delimiter ";" or --delimiter tab',
    );
  }
  return value;
}
