/**
 * Worker thread entry of the Parquet reading thread (parquet-read-thread.ts): decodes the file's rows, prepares
 * their identifier cells when given the columns, and hands them over packed, a chunk per task, in file order; given
 * an output, it keeps each chunk's rows instead and encodes them with their answers. Loaded by file URL from
 * dist/; it must not import anything that starts work on load.
 */
import { workerData } from 'node:worker_threads';
import { prepareRows } from '../map/prepare-rows.js';
import { outputRows, outputRowsV2, type SentHashes } from '../map/result-columns.js';
import { cellsOfBlock, utf8RowBlock } from '../table/row-blocks.js';
import { openParquetSource } from '../table/parquet-source.js';
import { packRows, rowEncoder } from '../table/row-encoders.js';
import type { InputRow, TableSource } from '../table/table.js';
import { serveTasks, type TaskResult } from '../workers/worker-pool.js';
import type { ParquetReadAnswer, ParquetReadConfig, ParquetReadTask } from './parquet-read-thread.js';
import { unpackAnswers } from './row-threads.js';

const config = workerData as ParquetReadConfig;
const output = config.columns !== undefined ? config.output : undefined;
const utf8 = new TextEncoder();
/** Output rows to the bytes the output's sink takes (writeEncoded): text, or a block of rows for Parquet. */
const encode = ((): ((rows: string[][]) => Uint8Array) | undefined => {
  const format = output?.format;
  if (format === undefined) return undefined;
  if (format.format === 'parquet') return (rows) => utf8RowBlock(rows, format.width);
  const text = rowEncoder(format);
  return (rows) => utf8.encode(text(rows));
})();
/**
 * The chunks kept for their answers (with an output), and the hashes they sent (--emit-hash). A chunk is kept as
 * a block of its cells' UTF-8 bytes, not as rows: rows kept across the wait for the service outlive the young
 * generation and become old garbage that grows the heap; bytes live outside it (as the CSV row threads keep
 * their pieces' bytes).
 */
const held = new Map<number, { block: Uint8Array; firstLine: number; sent?: SentHashes }>();
let nextPiece = 0;
/** Cells per input row: the file's top-level columns. */
let width = 0;
let opened: Promise<{ source: TableSource; chunks: AsyncIterator<InputRow[]> }> | undefined;

async function nextChunk(): Promise<TaskResult<ParquetReadAnswer>> {
  opened ??= openParquetSource({ path: config.path, chunkRows: config.chunkRows }).then((source) => ({
    source,
    chunks: source.rows()[Symbol.asyncIterator](),
  }));
  const { source, chunks } = await opened;
  width = source.header.length;
  const next = await chunks.next();
  if (next.done === true) return { output: { task: 'next', done: true, bytesRead: source.bytesRead() } };
  const rows = next.value;
  const bytesRead = source.bytesRead();
  const firstLine = rows[0]?.line ?? 0;
  const prepared = config.columns === undefined ? undefined : prepareRows(rows, config.columns);
  // the status and phone arrays are handed over below: what is kept is a copy
  const transfer: ArrayBuffer[] =
    prepared === undefined ? [] : [prepared.status.buffer as ArrayBuffer, prepared.phone.buffer as ArrayBuffer];
  const base = { task: 'next', done: false, firstLine, rowCount: rows.length, bytesRead } as const;
  if (output !== undefined && prepared !== undefined) {
    const piece = nextPiece++;
    const sent =
      output.layout.emitHash === true
        ? { status: prepared.status.slice(), phone: prepared.phone.slice(), hashes: prepared.hashes }
        : undefined;
    const block = utf8RowBlock(
      rows.map((r) => r.cells),
      width,
    );
    held.set(piece, sent === undefined ? { block, firstLine } : { block, firstLine, sent });
    return { output: { ...base, piece, prepared }, transfer };
  }
  const packed = packRows(rows.map((r) => r.cells));
  transfer.push(packed.cellLengths.buffer as ArrayBuffer, packed.rowWidths.buffer as ArrayBuffer);
  return { output: { ...base, rows: packed, ...(prepared !== undefined ? { prepared } : {}) }, transfer };
}

function encodePiece(task: Extract<ParquetReadTask, { task: 'encode' }>): TaskResult<ParquetReadAnswer> {
  const piece = held.get(task.piece);
  if (piece === undefined || output === undefined || encode === undefined || config.columns === undefined)
    throw new Error(`piece ${task.piece} is not kept by the reading thread`);
  held.delete(task.piece);
  const { status, reason } = task.answers;
  const toOutput = output.v2 ? outputRowsV2 : outputRows;
  const rejects: string[][] | null = task.rejects ? [] : null;
  const cells = cellsOfBlock(piece.block);
  const rows: InputRow[] = new Array(cells.length);
  for (let r = 0; r < cells.length; r++) rows[r] = { line: piece.firstLine + r, cells: cells[r] };
  const out = toOutput(
    {
      rows,
      width: config.columns.length,
      status,
      mapped: unpackAnswers(task.answers),
      reason,
      sent: piece.sent,
    },
    rejects,
    output.layout,
  );
  const bytes = encode(out);
  const rejectBytes = rejects !== null && rejects.length > 0 ? encode(rejects) : null;
  const transfer = [bytes.buffer as ArrayBuffer];
  if (rejectBytes !== null) transfer.push(rejectBytes.buffer as ArrayBuffer);
  return { output: { task: 'encode', encoded: { bytes, rejectBytes } }, transfer };
}

// reads are answered in the order they were asked: the async generator takes its next() calls in turn
serveTasks<ParquetReadTask, ParquetReadAnswer>((task) => (task.task === 'next' ? nextChunk() : encodePiece(task)));
