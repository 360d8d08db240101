/** Keeps, of what a runner under --shard reads, the rows of its own share (see shard-range.ts). */
import type { CsvPiece } from '../io/csv/piece-cutter.js';
import type { InputRow, SourceProblemCounts, TableSource } from '../io/table.js';
import { isPieceSource, type TableInput } from '../threads/table-input.js';
import type { ShardWindow } from './shard-range.js';

/**
 * The input with only the rows starting on the window's lines. Every runner reads the file's first records, for
 * the header: as rows (a file without a header line, a JSON Lines chunk) they are kept by the runner whose range
 * holds them. CSV pieces never cross the end of those records (the cutter takes the first record on its own), so
 * a piece that starts among them is one that only they are in.
 */
export function shardRows(input: TableInput, window: ShardWindow, othersSkipped: () => number): TableInput {
  const { firstLine, endLine, prefixLines } = window;
  if (isPieceSource(input)) {
    if (firstLine === 1) return input;
    const pieces = input.pieces.bind(input);
    return {
      ...input,
      header: input.header,
      notes: input.notes,
      name: input.name,
      settings: input.settings,
      width: input.width,
      totalBytes: input.totalBytes,
      bytesRead: () => input.bytesRead(),
      problems: () => ownProblems(input.problems(), othersSkipped()),
      addProblems: (more) => input.addProblems(more),
      ...(input.close !== undefined ? { close: () => input.close?.() } : {}),
      async *pieces(): AsyncGenerator<CsvPiece> {
        for await (const piece of pieces()) if (piece.startLine > prefixLines) yield piece;
      },
    };
  }
  const source: TableSource = input;
  const rows = source.rows.bind(source);
  return {
    ...source,
    header: source.header,
    notes: source.notes,
    name: source.name,
    totalBytes: source.totalBytes,
    bytesRead: () => source.bytesRead(),
    problems: () => ownProblems(source.problems(), othersSkipped()),
    ...(source.close !== undefined ? { close: () => source.close?.() } : {}),
    async *rows(): AsyncGenerator<InputRow[]> {
      for await (const chunk of rows()) {
        const kept = chunk.filter((row) => row.line >= firstLine && row.line < endLine);
        if (kept.length > 0) yield kept;
      }
    },
  };
}

/** The input's problem counts less the records skipped that were another runner's to say. */
function ownProblems(counts: SourceProblemCounts, othersSkipped: number): SourceProblemCounts {
  if (counts.badRows === undefined || othersSkipped === 0) return counts;
  return { ...counts, badRows: counts.badRows - othersSkipped };
}
