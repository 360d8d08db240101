/** Fits a record to the header's width. */
import type { InputRow, SourceProblemCounts } from '../table.js';

/** Fits a record to the header width, noting how it did not fit. */
export function fitRow(line: number, cells: string[], width: number, counts: SourceProblemCounts): InputRow {
  const n = cells.length;
  if (n === width) return { line, cells };
  if (n < width) {
    counts.shortRows++;
    for (let i = n; i < width; i++) cells.push('');
    return { line, cells, problem: { kind: 'short_row', cells: n, expected: width } };
  }
  // a trailing delimiter (`a,b,`) adds empty cells only: nothing is shifted, so it is not a problem
  let extraEmpty = true;
  for (let i = width; i < n; i++) {
    if (cells[i] !== '') {
      extraEmpty = false;
      break;
    }
  }
  cells.length = width;
  if (extraEmpty) return { line, cells };
  counts.longRows++;
  return { line, cells, problem: { kind: 'long_row', cells: n, expected: width } };
}
