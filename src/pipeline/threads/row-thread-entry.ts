/**
 * Worker thread entry of the row threads (row-threads.ts): parses record-aligned CSV pieces, prepares their
 * identifier cells, keeps the piece until its answers come back, and encodes the output rows. Loaded by file
 * URL from dist/; it must not import anything that starts work on load.
 */
import { workerData } from 'node:worker_threads';
import { emptyHashCounts, hashRows } from '../hash/hash-rows.js';
import { RowPreparer } from '../map/prepare-rows.js';
import { defaultLayout, outputRows, outputRowsV2, type SentHashes } from '../map/result-columns.js';
import { csvPieceBytes } from '../map/result-csv.js';
import { encodeCsvRow, rowEncoder } from '../io/output/row-encoders.js';
import { encodeTsvRow } from '../io/output/tsv-encoder.js';
import type { RowThreadAnswer, RowThreadConfig, RowThreadTask } from './row-threads.js';
import { unpackAnswers } from './slot-answers.js';
import { unpackReasons } from '../map/row-chunk.js';
import { parseCsvPiece, readCsvRecords, recordsAtMost } from '../io/csv/csv-records.js';
import { fitRow } from '../io/csv/fit-row.js';
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
/**
 * A buffer given back by the main thread (RowThreads.encode) that this thread has not written into yet: an
 * encode task that brings a longer one leaves the shorter one to be collected.
 */
let spare: ArrayBuffer | undefined;
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
 * CSV in and out, both comma-separated, or TSV in and out, both tab-separated; UTF-8: a plain input line is, as it
 * is, the output text of the row's input cells, and its bytes (or those of its --keep cells) are copied
 * (map/result-csv.ts). Undefined: rows of strings are encoded.
 */
const lineDelimiter: ',' | '\t' | undefined =
  config.csv.encoding !== 'utf8'
    ? undefined
    : config.format.format === 'csv' && config.csv.delimiter === ','
      ? ','
      : config.format.format === 'tsv' && config.csv.delimiter === '\t'
        ? '\t'
        : undefined;
const encodeLine = lineDelimiter === '\t' ? encodeTsvRow : encodeCsvRow;

/** A line of another width than the header's, fitted as parsing fits it, as output text without its '\n'. */
function fitLine(line: string): string {
  return encodeLine(
    fitRow(0, line.split(lineDelimiter ?? ','), config.width, { shortRows: 0, longRows: 0, extraKeys: 0 }).cells,
  ).slice(0, -1);
}

serveTasks<RowThreadTask, RowThreadAnswer>((task) => {
  switch (task.task) {
    case 'prepare': {
      // each record prepared as it is read, fitted as parseCsvPiece fits it: no row waits for the piece's last
      const problems: SourceProblemCounts = { shortRows: 0, longRows: 0, extraKeys: 0 };
      const preparer = new RowPreparer(config.columns, recordsAtMost(task.bytes));
      readCsvRecords(task, config.csv, config.name, (line, cells) =>
        preparer.add(fitRow(line, cells, config.width, problems)),
      );
      const prepared = preparer.finish();
      // the status, phone and hash arrays are handed over to the main thread below: what is kept is a copy
      const sent = keepSent
        ? { status: prepared.status.slice(), phone: prepared.phone.slice(), hashes: prepared.hashes.slice() }
        : undefined;
      held.set(task.piece, { bytes: task.bytes, startLine: task.startLine, ...(sent !== undefined ? { sent } : {}) });
      return answer({ task: 'prepare', prepared, problems }, [prepared.status, prepared.phone, prepared.hashes]);
    }
    case 'encode': {
      const piece = held.get(task.piece);
      if (piece === undefined) throw new Error(`piece ${task.piece} is not held by this thread`);
      held.delete(task.piece);
      if (task.into !== undefined && (spare === undefined || task.into.byteLength > spare.byteLength))
        spare = task.into;
      if (lineDelimiter !== undefined) {
        const into = spare;
        const written = csvPieceBytes(task.answers, {
          piece: piece.bytes,
          inputWidth: config.width,
          width: config.columns.length,
          v2: config.v2,
          layout: config.layout ?? defaultLayout(config.columns),
          sent: piece.sent,
          rejects: task.rejects,
          fitLine,
          into,
          delimiter: lineDelimiter,
        });
        if (written !== undefined) {
          // handed over with the bytes: the main thread gives it back once they are written
          if (written.bytes.buffer === into) spare = undefined;
          return answer({ task: 'encode', ...written, reusable: true }, [written.bytes, written.rejectBytes]);
        }
      }
      const { status } = task.answers;
      const reason = unpackReasons(task.answers);
      const mapped = unpackAnswers(task.answers);
      const toOutput = config.v2 ? outputRowsV2 : outputRows;
      const { rows } = parse(piece.bytes, piece.startLine);
      const rejects: string[][] | null = task.rejects ? [] : null;
      const out = toOutput(
        { rows, width: config.columns.length, status, mapped, reason, sent: piece.sent },
        rejects,
        config.layout,
      );
      const bytes = utf8.encode(encode(out));
      const rejectBytes = rejects !== null && rejects.length > 0 ? utf8.encode(encode(rejects)) : null;
      return answer({ task: 'encode', bytes, rejectBytes, reusable: false }, [bytes, rejectBytes]);
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
