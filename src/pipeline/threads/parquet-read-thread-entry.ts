/**
 * Worker thread entry of the Parquet reading thread (parquet-read-thread.ts): decodes the file's rows, prepares
 * their identifier cells when given the columns, and hands them over packed, a chunk per task, in file order; given
 * an output, it keeps each chunk's rows instead and encodes them with their answers. Loaded by file URL from
 * dist/; it must not import anything that starts work on load.
 */
import { workerData } from 'node:worker_threads';
import { prepareColumns, prepareRows } from '../map/prepare-rows.js';
import { resultByteColumns } from '../map/result-bytes.js';
import { outputRows, outputRowsV2, type SentHashes } from '../map/result-columns.js';
import { openParquetSource, type ParquetFileSource, type Utf8Chunk } from '../io/parquet/parquet-source.js';
import { utf8ColumnsRowBlock, utf8RowBlock } from '../io/row-blocks.js';
import { packRows, rowEncoder } from '../io/output/row-encoders.js';
import type { InputRow } from '../io/table.js';
import { columnCells, type Utf8Column } from '../io/utf8-columns.js';
import { serveTasks, type TaskResult } from '../workers/worker-pool.js';
import type { ParquetReadAnswer, ParquetReadConfig, ParquetReadTask } from './parquet-read-thread.js';
import { unpackAnswers } from './slot-answers.js';
import { unpackReasons } from '../map/row-chunk.js';

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
 * The encoder of a Parquet output that the thread encodes itself (format.file), loaded only then: its
 * WebAssembly costs memory that other runs need not pay. Its calls are made in the order the tasks came (then()
 * on one promise), so the file's bytes come out in order.
 */
const fileEncoder = (() => {
  const format = output?.format;
  if (format === undefined || format.format !== 'parquet' || format.file === undefined) return undefined;
  const layout = format.file;
  return import('../io/parquet/parquet-encoder.js').then(({ ParquetEncoder }) => new ParquetEncoder(layout));
})();
fileEncoder?.catch(() => undefined);

/** A thread that encodes the output file holds its row group as well: it reads the input in slices only. */
const READING = fileEncoder !== undefined ? { wholeGroupBytes: 0 } : {};

/** A piece's block of rows as the file's bytes, when the thread encodes the file; else the block as it is. */
function fileBytes(block: Uint8Array): Promise<Uint8Array> | Uint8Array {
  return fileEncoder === undefined ? block : fileEncoder.then((encoder) => encoder.addBlock(block));
}

/**
 * The chunks kept for their answers (with an output), and the hashes they sent (--emit-hash). A chunk is kept as
 * its columns' UTF-8 bytes, as it was read, not as rows: rows kept across the wait for the service outlive the
 * young generation and become old garbage that grows the heap; bytes live outside it (as the CSV row threads keep
 * their pieces' bytes).
 */
const held = new Map<number, { columns: Utf8Column[]; firstLine: number; sent?: SentHashes }>();
let nextPiece = 0;
/**
 * The input's columns that identifier cells (and their rows' countries, --phone-region-col) are read from: only
 * these are made into strings to be prepared.
 */
const identifierIndexes = [
  ...new Set(
    (config.columns ?? []).flatMap((c) =>
      c.phoneRegionIndex === undefined ? [c.index] : [c.index, c.phoneRegionIndex],
    ),
  ),
];
let opened: Promise<{ source: ParquetFileSource; chunks: AsyncIterator<InputRow[] | Utf8Chunk> }> | undefined;

async function nextChunk(): Promise<TaskResult<ParquetReadAnswer>> {
  opened ??= openParquetSource({ path: config.path, chunkRows: config.chunkRows }, READING).then((source) => ({
    source,
    // kept for an output: read as columns of bytes, which is how they are kept
    chunks: (output !== undefined ? source.utf8Chunks() : source.rows())[Symbol.asyncIterator](),
  }));
  const { source, chunks } = await opened;
  const next = await chunks.next();
  if (next.done === true) return { output: { task: 'next', done: true, bytesRead: source.bytesRead() } };
  const bytesRead = source.bytesRead();
  if (output !== undefined && config.columns !== undefined) {
    const chunk = next.value as Utf8Chunk;
    // only the identifier columns' cells are made into strings, and no row is made of them
    const cells: (string[] | undefined)[] = [];
    for (const c of identifierIndexes) cells[c] = columnCells(chunk.columns[c]);
    const prepared = prepareColumns(chunk.rows, cells, config.columns);
    // the status, phone and hash arrays are handed over below: what is kept is a copy
    const transfer = [
      prepared.status.buffer as ArrayBuffer,
      prepared.phone.buffer as ArrayBuffer,
      prepared.hashes.buffer as ArrayBuffer,
    ];
    const piece = nextPiece++;
    const sent =
      output.layout.emitHash === true
        ? { status: prepared.status.slice(), phone: prepared.phone.slice(), hashes: prepared.hashes.slice() }
        : undefined;
    const kept = { columns: chunk.columns, firstLine: chunk.firstLine };
    held.set(piece, sent === undefined ? kept : { ...kept, sent });
    const answer = { task: 'next', done: false, firstLine: chunk.firstLine, rowCount: chunk.rows, bytesRead } as const;
    return { output: { ...answer, piece, prepared }, transfer };
  }
  const rows = next.value as InputRow[];
  const firstLine = rows[0]?.line ?? 0;
  const prepared = config.columns === undefined ? undefined : prepareRows(rows, config.columns);
  const transfer: ArrayBuffer[] =
    prepared === undefined
      ? []
      : [
          prepared.status.buffer as ArrayBuffer,
          prepared.phone.buffer as ArrayBuffer,
          prepared.hashes.buffer as ArrayBuffer,
        ];
  const packed = packRows(rows.map((r) => r.cells));
  transfer.push(packed.cellLengths.buffer as ArrayBuffer, packed.rowWidths.buffer as ArrayBuffer);
  const answer = { task: 'next', done: false, firstLine, rowCount: rows.length, bytesRead } as const;
  return { output: { ...answer, rows: packed, ...(prepared !== undefined ? { prepared } : {}) }, transfer };
}

/** The rows of a kept chunk, as strings again. */
function rowsOf(columns: readonly Utf8Column[], firstLine: number): InputRow[] {
  const cells = columns.map(columnCells);
  const count = columns[0]?.lengths.length ?? 0;
  const rows: InputRow[] = new Array(count);
  for (let r = 0; r < count; r++) {
    const row = new Array<string>(columns.length);
    for (let c = 0; c < columns.length; c++) row[c] = cells[c][r];
    rows[r] = { line: firstLine + r, cells: row };
  }
  return rows;
}

function encodePiece(
  task: Extract<ParquetReadTask, { task: 'encode' }>,
): TaskResult<ParquetReadAnswer> | Promise<TaskResult<ParquetReadAnswer>> {
  const piece = held.get(task.piece);
  if (piece === undefined || output === undefined || encode === undefined || config.columns === undefined)
    throw new Error(`piece ${task.piece} is not kept by the reading thread`);
  held.delete(task.piece);
  const { status } = task.answers;
  const toOutput = output.v2 ? outputRowsV2 : outputRows;
  const format = output.format;
  if (format.format === 'parquet' && !task.rejects) {
    // the kept input columns go into the block as the bytes they are kept as; only the result cells are strings
    const count = piece.columns[0]?.lengths.length ?? 0;
    const keep = output.layout.keep;
    const kept = keep === null ? piece.columns : keep.map((i) => piece.columns[i] ?? null);
    const width = config.columns.length;
    // the result cells too, straight from the answers as bytes: no string per cell, no array per row
    const results = resultByteColumns(task.answers, {
      rowCount: count,
      width,
      v2: output.v2,
      layout: output.layout,
      sent: piece.sent,
    });
    if (results !== undefined)
      return answerEncode(fileBytes(utf8ColumnsRowBlock(count, [...kept, ...results], [], 0)), null);
    const noCells: string[] = [];
    const rows: InputRow[] = new Array(count);
    for (let r = 0; r < count; r++) rows[r] = { line: piece.firstLine + r, cells: noCells };
    const reason = unpackReasons(task.answers);
    const answered = { rows, width, status, mapped: unpackAnswers(task.answers), reason };
    const strings = toOutput({ ...answered, sent: piece.sent }, null, { ...output.layout, keep: [] });
    return answerEncode(fileBytes(utf8ColumnsRowBlock(count, kept, strings, format.width - kept.length)), null);
  }
  const rejects: string[][] | null = task.rejects ? [] : null;
  const rows = rowsOf(piece.columns, piece.firstLine);
  const out = toOutput(
    {
      rows,
      width: config.columns.length,
      status,
      mapped: unpackAnswers(task.answers),
      reason: unpackReasons(task.answers),
      sent: piece.sent,
    },
    rejects,
    output.layout,
  );
  // the --rejects rows go to their own output as a block (or text), whoever encodes this one
  const rejectBytes = rejects !== null && rejects.length > 0 ? encode(rejects) : null;
  return answerEncode(fileBytes(encode(out)), rejectBytes);
}

function answerEncode(
  bytes: Promise<Uint8Array> | Uint8Array,
  rejectBytes: Uint8Array | null,
): TaskResult<ParquetReadAnswer> | Promise<TaskResult<ParquetReadAnswer>> {
  const answer = (bytes: Uint8Array): TaskResult<ParquetReadAnswer> => {
    const transfer = [bytes.buffer as ArrayBuffer];
    if (rejectBytes !== null) transfer.push(rejectBytes.buffer as ArrayBuffer);
    return { output: { task: 'encode', encoded: { bytes, rejectBytes } }, transfer };
  };
  return bytes instanceof Uint8Array ? answer(bytes) : bytes.then(answer);
}

/** The last bytes of the file the thread encodes. */
async function finishFile(): Promise<TaskResult<ParquetReadAnswer>> {
  if (fileEncoder === undefined) throw new Error('the reading thread encodes no Parquet file');
  const bytes = await fileEncoder.then((encoder) => encoder.finish());
  return { output: { task: 'finish', bytes }, transfer: [bytes.buffer as ArrayBuffer] };
}

// reads are answered in the order they were asked: the async generator takes its next() calls in turn
serveTasks<ParquetReadTask, ParquetReadAnswer>((task) =>
  task.task === 'next' ? nextChunk() : task.task === 'finish' ? finishFile() : encodePiece(task),
);
