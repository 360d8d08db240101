/** csv-parse, the reference the CSV tokenizer is held to: its records with the line each starts on, or its error. */
import { parse } from 'csv-parse/sync';

/** The csv-parse options that read CSV as the tokenizer does (see src/pipeline/io/csv/tokenizer.ts). */
export function csvParseOptions(delimiter: string, encoding: 'utf8' | 'latin1' = 'utf8') {
  return {
    delimiter,
    encoding,
    bom: false,
    record_delimiter: ['\r\n', '\n', '\r'],
    relax_column_count: true,
    relax_quotes: true,
    skip_empty_lines: true,
    max_record_size: 16 * 1024 * 1024,
  };
}

export type OracleOutcome =
  | { ok: true; records: { line: number; cells: string[] }[] }
  | { ok: false; code: string; line: number; quoting: boolean };

/**
 * What csv-parse reads from `bytes`. Its own line counter counts a CRLF inside a quoted value twice, so lines are
 * counted here from the bytes: a record starts on the line after the previous one's end and the empty lines
 * csv-parse skipped since.
 */
export function oracleRecords(bytes: Buffer, delimiter: string, encoding: 'utf8' | 'latin1' = 'utf8'): OracleOutcome {
  const lineStarts: number[] = [];
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] === 10 || (bytes[i] === 13 && bytes[i + 1] !== 10)) lineStarts.push(i + 1);
  }
  const lineAt = (offset: number): number => {
    let lo = 0;
    let hi = lineStarts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (lineStarts[mid] <= offset) lo = mid + 1;
      else hi = mid;
    }
    return lo + 1;
  };
  const records: { line: number; cells: string[] }[] = [];
  let nextLine = 1;
  let emptySeen = 0;
  try {
    parse(bytes, {
      ...csvParseOptions(delimiter, encoding),
      on_record: (cells: string[], info: { bytes: number; empty_lines: number }) => {
        records.push({ line: nextLine + (info.empty_lines - emptySeen), cells });
        emptySeen = info.empty_lines;
        nextLine = lineAt(info.bytes);
        return cells;
      },
    });
  } catch (err) {
    const e = err as { code?: string; empty_lines?: number; quoting?: boolean };
    return {
      ok: false,
      code: String(e.code),
      line: nextLine + ((e.empty_lines ?? emptySeen) - emptySeen),
      quoting: e.quoting === true,
    };
  }
  return { ok: true, records };
}
