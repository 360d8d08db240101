// How an error line quotes a value the user gave (a path, a column name, a flag value): short and printable.

/** Characters of a user value an error line shows at most; a longer value is cut and its length said. */
export const MAX_QUOTED_CHARS = 80;

/** Control characters (C0, DEL, C1) and the line and paragraph separators: they would break or hide the line. */
// eslint-disable-next-line no-control-regex
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds, to escape them
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

function escapeChar(char: string): string {
  switch (char) {
    case '\n':
      return '\\n';
    case '\r':
      return '\\r';
    case '\t':
      return '\\t';
    default:
      return `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`;
  }
}

/**
 * A user value made fit for one error line: control characters escaped, and cut to MAX_QUOTED_CHARS characters
 * with `…` (a 20 KB binary "column name" is not echoed whole).
 */
export function clipUserValue(value: string, max = MAX_QUOTED_CHARS): string {
  const chars = Array.from(value);
  const shown = chars.length > max ? `${chars.slice(0, max).join('')}…` : value;
  return shown.replace(UNPRINTABLE, escapeChar);
}

/** `'value'`, clipped, and its length when it was cut: the form every error line uses to quote what the user gave. */
export function quoted(value: string, max = MAX_QUOTED_CHARS): string {
  const length = Array.from(value).length;
  return `'${clipUserValue(value, max)}'${length > max ? ` (${length.toLocaleString('en-US')} characters)` : ''}`;
}

/** An error line longer than this is cut: it is one line on a terminal or in cron mail, not a dump. */
export const MAX_ERROR_LINE_CHARS = 1000;

/**
 * The last guard before an error line is printed or put in a summary: every quoted value in it is clipped as
 * `quoted` does, control characters are escaped (a binary "column name" cannot break the line or the terminal),
 * and the whole line is cut if it is still too long.
 */
export function clipErrorLine(line: string): string {
  const clipped = line.replace(/'([^'\n]*)'/g, (whole, inner: string) =>
    Array.from(inner).length > MAX_QUOTED_CHARS ? quoted(inner) : whole,
  );
  return printableErrorLine(clipped);
}

/** A line whose user values are already quoted: control characters escaped, and cut if it is still too long. */
export function printableErrorLine(line: string): string {
  const printable = line.replace(UNPRINTABLE, escapeChar);
  const chars = Array.from(printable);
  return chars.length > MAX_ERROR_LINE_CHARS
    ? `${chars.slice(0, MAX_ERROR_LINE_CHARS).join('')}… (line cut)`
    : printable;
}
