/** Runner K of N's share of one plain file or S3 object under --shard: a record-aligned byte range. */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { countLineBreaks, CsvPieceCutter, cutPieces, type CsvPiece } from '../io/csv/piece-cutter.js';
import { InputPartsError } from '../io/input-parts.js';
import type { RangedObject } from '../io/s3/s3-read.js';
import { isS3Url } from '../io/s3/s3-url.js';
import { openFailure, type PartReading } from '../io/table.js';
import type { Shard } from './shard-spec.js';

/** What a runner reads of the file, and which of the rows read are its own. */
export interface ShardWindow {
  /**
   * Read in place of the file: the file's first records (what the header is made of), then one empty line for
   * each line between them and the range, then the range. The empty lines keep every line number the file's.
   */
  stream: NodeJS.ReadableStream;
  /** Lines of those first records: read by every runner for the header; their rows are the first runner's alone. */
  prefixLines: number;
  /** The runner's rows are those starting on a line in [firstLine, endLine). */
  firstLine: number;
  endLine: number;
}

/** How the file is read, as settled; JSON Lines: `chunkRows` objects of the first chunk make the header. */
export type ShardReading = Pick<PartReading, 'delimiter' | 'encoding' | 'chunkRows'> & { format: 'csv' | 'jsonl' };

/** A record boundary: its offset in the file and the line that starts there (Infinity at the end of the file). */
interface Cut {
  offset: number;
  line: number;
}

const SCAN_BYTES = 1024 * 1024;

/**
 * Finds runner K's range: the file's bytes after its first record (JSON Lines: from the start) are split at
 * K·size/N, each split moved forward to the next record start, found as the reader finds them (CSV: by the piece
 * cutter, so a line break inside a quoted value never splits; JSON Lines: after each LF). Every runner finds the
 * same splits, so the ranges are disjoint and cover the file. Runner K scans up to the end of its range only.
 */
export async function shardWindow(path: string, shard: Shard, reading: ShardReading): Promise<ShardWindow> {
  // an S3 object is read by ranged GETs, as a file by ranges of its bytes; the S3 client is loaded only for one
  const file = isS3Url(path) ? await (await import('../io/s3/s3-read.js')).openS3Ranges(path) : await plainFile(path);
  await refuseGzip(path, file);
  const size = file.size;
  const scan = scanner(file);
  try {
    const { prefix, cuts } =
      reading.format === 'csv'
        ? await csvCuts(scan, size, shard, reading)
        : await jsonlCuts(scan, size, shard, reading);
    const start = cuts[shard.index - 1];
    const end = shard.index === shard.count ? { offset: size, line: Number.POSITIVE_INFINITY } : cuts[shard.index];
    const stream = Readable.from(windowBytes(file, prefix, start, end));
    const empty = start.offset >= end.offset;
    return {
      stream,
      prefixLines: prefix.line - 1,
      firstLine: shard.index === 1 ? 1 : empty ? Number.POSITIVE_INFINITY : start.line,
      endLine: empty && shard.index > 1 ? Number.POSITIVE_INFINITY : end.line,
    };
  } finally {
    await scan.return(undefined);
  }
}

/** A plain file that can be split, as ranges of its bytes; one line saying why not for stdin or a pipe. */
async function plainFile(path: string): Promise<RangedObject> {
  if (path === '-')
    throw new InputPartsError(
      '--shard reads a share of a file by its bytes: stdin cannot be shared out; give the file, or its parts',
    );
  let st: Awaited<ReturnType<typeof stat>>;
  try {
    st = await stat(path);
  } catch (err) {
    throw openFailure(path, err);
  }
  if (!st.isFile())
    throw new InputPartsError(`--shard reads a share of a file by its bytes: '${path}' is not a plain file`);
  return { size: st.size, read: (from, to) => fileBytes(path, from, to) };
}

/** A gzip file or object can only be read from its start: one line that says to unload in parts. */
async function refuseGzip(path: string, file: RangedObject): Promise<void> {
  const head: Buffer[] = [];
  for await (const buf of file.read(0, Math.min(2, file.size))) head.push(buf);
  const [a, b] = Buffer.concat(head);
  if (a === 0x1f && b === 0x8b)
    throw new InputPartsError(
      `--shard cannot split '${path}': a gzip file can only be read from its start; ` +
        'unload the table in parts (several files) and give them all, so each runner takes whole parts',
    );
}

/** The file's bytes from the start on, read after read. */
async function* scanner(file: RangedObject): AsyncGenerator<Buffer, void, undefined> {
  yield* file.read(0, file.size);
}

/**
 * Adds to `cuts` (cuts[0] is where the data starts) the cuts that `boundary`, the next record start in file
 * order, settles: cut k is the first record start at or after dataStart + k·(size - dataStart)/N. True once the
 * cuts up to runner K's end are known.
 */
function cutsAt(dataStart: Cut, size: number, shard: Shard, boundary: Cut, cuts: Cut[]): boolean {
  const wanted = Math.min(shard.index, shard.count - 1);
  const goal = (k: number) => dataStart.offset + Math.floor((k * (size - dataStart.offset)) / shard.count);
  while (cuts.length <= wanted && goal(cuts.length) <= boundary.offset) cuts.push(boundary);
  return cuts.length > wanted;
}

function atEnd(cut: Cut, size: number): Cut {
  return cut.offset >= size ? { offset: size, line: Number.POSITIVE_INFINITY } : cut;
}

async function csvCuts(
  scan: AsyncGenerator<Buffer, void, undefined>,
  size: number,
  shard: Shard,
  reading: ShardReading,
): Promise<{ prefix: Cut; cuts: Cut[] }> {
  const first = await scan.next();
  const head = first.done === true ? Buffer.alloc(0) : first.value;
  const bom = reading.encoding === 'utf8' && head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf ? 3 : 0;
  // small pieces for a small file, so its few records are still spread over the runners
  const target = Math.max(1, Math.min(256 * 1024, Math.floor(size / (8 * shard.count))));
  const cutter = new CsvPieceCutter(reading.delimiter, target, reading.encoding, { line: 1, offset: bom });
  cutter.push(head.subarray(bom));
  let ended = first.done === true;
  const read = async (): Promise<Buffer | undefined> => {
    if (ended) return undefined;
    const next = await scan.next();
    if (next.done === true) ended = true;
    return next.value ?? undefined;
  };
  // the first record alone: the header, or with --no-header the row that sets the width
  let oneRecord = true;
  const pieces = cutPieces(cutter, read, () => oneRecord);
  const headCut = await pieces.next();
  if (headCut.done === true) {
    const whole = { offset: size, line: Number.POSITIVE_INFINITY };
    return { prefix: whole, cuts: Array.from({ length: shard.count }, () => whole) };
  }
  oneRecord = false;
  const headPiece = headCut.value;
  const after = (piece: CsvPiece): Cut =>
    atEnd(
      { offset: piece.startOffset + piece.bytes.length, line: piece.startLine + countLineBreaks(piece.bytes) },
      size,
    );
  const prefix = after(headPiece);
  const cuts: Cut[] = [prefix];
  let done = cutsAt(prefix, size, shard, prefix, cuts);
  while (!done) {
    const cut = await pieces.next();
    if (cut.done === true) {
      cutsAt(prefix, size, shard, { offset: size, line: Number.POSITIVE_INFINITY }, cuts);
      break;
    }
    done = cutsAt(prefix, size, shard, after(cut.value), cuts);
  }
  return { prefix: { offset: prefix.offset, line: headPiece.startLine + countLineBreaks(headPiece.bytes) }, cuts };
}

async function jsonlCuts(
  scan: AsyncGenerator<Buffer, void, undefined>,
  size: number,
  shard: Shard,
  reading: ShardReading,
): Promise<{ prefix: Cut; cuts: Cut[] }> {
  const start: Cut = { offset: 0, line: 1 };
  const cuts: Cut[] = [start];
  let done = cutsAt(start, size, shard, start, cuts);
  let prefix: Cut | undefined;
  let objects = 0;
  let offset = 0;
  let line = 1;
  let partial: Buffer[] = [];
  for (;;) {
    const next = await scan.next();
    if (next.done === true) break;
    const buf = next.value;
    let from = 0;
    for (let lf = buf.indexOf(10); lf !== -1; lf = buf.indexOf(10, from)) {
      if (prefix === undefined) {
        partial.push(buf.subarray(from, lf));
        if (isObjectLine(Buffer.concat(partial), reading.encoding)) objects++;
        partial = [];
        if (objects >= reading.chunkRows) prefix = { offset: offset + lf + 1, line: line + 1 };
      }
      from = lf + 1;
      line++;
      if (!done) done = cutsAt(start, size, shard, atEnd({ offset: offset + from, line }, size), cuts);
    }
    if (prefix === undefined) partial.push(buf.subarray(from));
    offset += buf.length;
    if (done && prefix !== undefined) break;
  }
  if (!done) cutsAt(start, size, shard, { offset: size, line: Number.POSITIVE_INFINITY }, cuts);
  // fewer objects than a chunk: the whole file is what the header is made of
  return { prefix: prefix ?? { offset: size, line: line + 1 }, cuts };
}

/** Whether a line holds one JSON object: the records whose keys make the header (as the JSON Lines reader counts). */
function isObjectLine(bytes: Buffer, encoding: 'utf8' | 'latin1'): boolean {
  const text = bytes.toString(encoding);
  if (text.trim() === '') return false;
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value);
  } catch {
    return false;
  }
}

/** The prefix, the empty lines that stand for the lines skipped, and the range. */
async function* windowBytes(file: RangedObject, prefix: Cut, start: Cut, end: Cut): AsyncGenerator<Buffer> {
  yield* file.read(0, prefix.offset);
  if (start.offset >= end.offset) return;
  if (start.offset > prefix.offset) {
    let blank = start.line - prefix.line;
    while (blank > 0) {
      const n = Math.min(blank, SCAN_BYTES);
      yield Buffer.alloc(n, 10);
      blank -= n;
    }
    yield* file.read(start.offset, end.offset);
  } else if (end.offset > prefix.offset) {
    yield* file.read(prefix.offset, end.offset);
  }
}

async function* fileBytes(path: string, from: number, to: number): AsyncGenerator<Buffer> {
  if (to <= from) return;
  for await (const buf of createReadStream(path, { start: from, end: to - 1, highWaterMark: SCAN_BYTES }))
    yield buf as Buffer;
}
