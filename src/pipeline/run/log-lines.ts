/** A line for stderr with its figures: a JSON log keeps them as fields of the line, a plain stream gets the line alone. */

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** What goes with a line besides its text: its level (info unless said) and any figures (`counts`, `exit_code`). */
export interface LineFields {
  level?: LogLevel;
  [field: string]: unknown;
}

/** A stream that takes a line with its fields: stderr under `--log-format json`. */
export interface FieldsWriter {
  writeFields(line: string, fields: LineFields): unknown;
}

/** Writes `line` to `stream`; a stream that takes fields (the JSON log) gets `fields` with it. */
export function writeLine(stream: { write(chunk: string): unknown }, line: string, fields: LineFields): void {
  const writeFields = (stream as Partial<FieldsWriter>).writeFields;
  if (typeof writeFields === 'function') writeFields.call(stream, line, fields);
  else stream.write(`${line}\n`);
}
