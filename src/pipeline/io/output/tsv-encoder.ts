/** Output rows as tab-separated text, quoted as CSV is quoted, so this tool and warehouse loaders read it back. */

/**
 * A field is quoted (`"`, inner quotes doubled) exactly when it holds a tab, a quote or a line break, the CSV rule
 * with the tab as the delimiter: what csv-stringify writes with `delimiter: '\t'` and what `--delimiter tab`
 * (and loaders told the field delimiter is a tab and the quote is `"`) read back. Everything else is written as
 * it is: a TSV without tabs or line breaks in its values has no quotes at all.
 */
const NEEDS_QUOTING = /[\t"\n\r]/;
const QUOTE = /"/g;

function field(cell: string | undefined): string {
  const text = cell ?? '';
  return NEEDS_QUOTING.test(text) ? `"${text.replace(QUOTE, '""')}"` : text;
}

/** One TSV record with its '\n'. An absent cell is written as an empty one. */
export function encodeTsvRow(cells: readonly (string | undefined)[]): string {
  let line = '';
  for (let i = 0; i < cells.length; i++) line += i === 0 ? field(cells[i]) : `\t${field(cells[i])}`;
  return `${line}\n`;
}

export function encodeTsvRows(rows: readonly (readonly (string | undefined)[])[]): string {
  let out = '';
  for (let r = 0; r < rows.length; r++) out += encodeTsvRow(rows[r]);
  return out;
}
