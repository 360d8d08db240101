/**
 * Worker thread entry of the row threads (row-threads.ts): parses record-aligned CSV pieces, prepares their
 * identifier cells, keeps the piece until its answers come back, and encodes the output rows. Loaded by file
 * URL from dist/; it must not import anything that starts work on load.
 */
import { workerData } from 'node:worker_threads';
import { emptyHashCounts, hashRows } from '../hash/hash-rows.js';
import { prepareRows } from '../map/prepare-rows.js';
import { outputRows, outputRowsV2, type AnsweredRows, type SentHashes } from '../map/result-columns.js';
import { encodeCsvRow, rowEncoder } from '../io/output/row-encoders.js';
import {
  unpackAnswers,
  unpackReasons,
  type RowThreadAnswer,
  type RowThreadConfig,
  type RowThreadTask,
} from './row-threads.js';
import { parseCsvPiece } from '../io/csv/csv-records.js';
import { fitRow } from '../io/csv/fit-row.js';
import { quoteFreeRecordLines } from '../io/csv/tokenizer.js';
import type { InputRow, SourceProblemCounts } from '../io/table.js';
import { serveTasks } from '../workers/worker-pool.js';

const config = workerData as RowThreadConfig;
const encode = rowEncoder(config.format);
const utf8 = new TextEncoder();
/**
 * The pieces this thread prepared, until their answers come back: their bytes, not their rows, which are
 * parsed again to be encoded. Rows kept across the wait for the service outlive the young generation and are
 * copied into the old one, whose garbage then grows the heap by tens of MB; bytes live outside the heap, and
 * parsing a piece again costs less than that GC.
 */
const held = new Map<number, { bytes: Uint8Array; startLine: number; sent?: SentHashes }>();
/** --emit-hash: a piece's prepared hashes are kept with it, to be written as they were sent. */
const keepSent = config.layout?.emitHash === true;

function parse(bytes: Uint8Array, startLine: number): { rows: InputRow[]; problems: SourceProblemCounts } {
  const problems: SourceProblemCounts = { shortRows: 0, longRows: 0, extraKeys: 0 };
  const rows = parseCsvPiece({ bytes, startLine }, config.csv, config.width, config.name, problems);
  return { rows, problems };
}

function answer(
  output: RowThreadAnswer,
  buffers: (Uint8Array | null)[],
): { output: RowThreadAnswer; transfer: ArrayBuffer[] } {
  const transfer: ArrayBuffer[] = [];
  for (const b of buffers) if (b !== null) transfer.push(b.buffer as ArrayBuffer);
  return { output, transfer };
}

/**
 * CSV in and out, both comma-separated, and every input column written: a plain input line is, as it is, the CSV
 * text of the row's input cells.
 */
const linesAreCsv =
  config.format.format === 'csv' && config.csv.delimiter === ',' && (config.layout?.keep ?? null) === null;

/**
 * The output text of a plain piece's rows (and of its --rejects rows) from its lines: each line as it is when it
 * has the header's width (its cells need no quoting: no quote, comma or line break can be in them), then the
 * result cells, encoded on their own (a field's quoting never depends on its neighbours, so the bytes are those
 * of encoding the whole row). A line of another width is fitted and encoded cell by cell, as parsing would.
 * This skips splitting and re-joining the input cells of nearly every row.
 */
function encodeOnLines(
  lines: string[],
  toOutput: typeof outputRows,
  answers: Omit<AnsweredRows, 'rows'>,
  withRejects: boolean,
): { text: string; rejected: string } {
  const bare: InputRow[] = new Array(lines.length);
  for (let r = 0; r < lines.length; r++) bare[r] = { line: 0, cells: [] };
  const rejects: string[][] | null = withRejects ? [] : null;
  const results = toOutput({ ...answers, rows: bare }, rejects, config.layout);
  const rejectedRows = rejects === null ? null : new Set(rejects);
  const width = config.width;
  let text = '';
  let rejected = '';
  for (let r = 0; r < lines.length; r++) {
    const line = lines[r];
    const input =
      commasIn(line) === width - 1
        ? line
        : encodeCsvRow(fitRow(0, line.split(','), width, { shortRows: 0, longRows: 0, extraKeys: 0 }).cells).slice(
            0,
            -1,
          );
    const row = `${input},${encodeCsvRow(results[r])}`;
    text += row;
    if (rejectedRows?.has(results[r])) rejected += row;
  }
  return { text, rejected };
}

function pieceText(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString(config.csv.encoding);
}

function commasIn(line: string): number {
  let n = 0;
  for (let i = line.indexOf(','); i !== -1; i = line.indexOf(',', i + 1)) n++;
  return n;
}

serveTasks<RowThreadTask, RowThreadAnswer>((task) => {
  switch (task.task) {
    case 'prepare': {
      const { rows, problems } = parse(task.bytes, task.startLine);
      const prepared = prepareRows(rows, config.columns);
      // the status and phone arrays are handed over to the main thread below: what is kept is a copy
      const sent = keepSent
        ? { status: prepared.status.slice(), phone: prepared.phone.slice(), hashes: prepared.hashes }
        : undefined;
      held.set(task.piece, { bytes: task.bytes, startLine: task.startLine, ...(sent !== undefined ? { sent } : {}) });
      return answer({ task: 'prepare', prepared, problems }, [prepared.status, prepared.phone]);
    }
    case 'encode': {
      const piece = held.get(task.piece);
      if (piece === undefined) throw new Error(`piece ${task.piece} is not held by this thread`);
      held.delete(task.piece);
      const { status } = task.answers;
      const reason = unpackReasons(task.answers);
      const mapped = unpackAnswers(task.answers);
      const toOutput = config.v2 ? outputRowsV2 : outputRows;
      const lines = linesAreCsv ? quoteFreeRecordLines(pieceText(piece.bytes)) : undefined;
      if (lines !== undefined) {
        const { text, rejected } = encodeOnLines(
          lines,
          toOutput,
          { width: config.columns.length, status, mapped, reason, sent: piece.sent },
          task.rejects,
        );
        const bytes = utf8.encode(text);
        const rejectBytes = rejected !== '' ? utf8.encode(rejected) : null;
        return answer({ task: 'encode', bytes, rejectBytes }, [bytes, rejectBytes]);
      }
      const { rows } = parse(piece.bytes, piece.startLine);
      const rejects: string[][] | null = task.rejects ? [] : null;
      const out = toOutput(
        { rows, width: config.columns.length, status, mapped, reason, sent: piece.sent },
        rejects,
        config.layout,
      );
      const bytes = utf8.encode(encode(out));
      const rejectBytes = rejects !== null && rejects.length > 0 ? utf8.encode(encode(rejects)) : null;
      return answer({ task: 'encode', bytes, rejectBytes }, [bytes, rejectBytes]);
    }
    case 'hash': {
      const { rows, problems } = parse(task.bytes, task.startLine);
      const counts = emptyHashCounts(config.columns.length);
      const bytes = utf8.encode(
        encode(hashRows(rows, config.columns, counts, config.layout?.keep ?? null, config.layout?.hashEncoding)),
      );
      return answer({ task: 'hash', bytes, counts, problems }, [bytes]);
    }
  }
});
