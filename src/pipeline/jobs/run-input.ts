/** A run's input, settled once (parts listed, format, delimiter, encoding, header, shard window), opened as settled. */
import { stat } from 'node:fs/promises';
import { parseDelimiter } from '../io/csv/delimiter.js';
import { InputPartsError } from '../io/input-parts.js';
import { openParts, type InputPart } from '../io/parts-source.js';
import { isS3Url } from '../io/s3/s3-url.js';
import type { BadRecord, OpenSourceOptions, PartReading } from '../io/table.js';
import { shardWindow, type ShardWindow } from '../shard/shard-range.js';
import { shardRows } from '../shard/shard-rows.js';
import { partsShare, type Shard } from '../shard/shard-spec.js';
import { openTableInput, type TableInput } from '../threads/table-input.js';
import { readAsHeaderless } from './headerless-input.js';

/** Rows per chunk when none is asked for. */
const DEFAULT_CHUNK_ROWS = 2000;

/** How the input was asked to be read, as the flags say it (absent: the defaults; 'auto': the format by name). */
export interface InputReading {
  format?: PartReading['format'] | 'auto' | undefined;
  delimiter?: string | undefined;
  header?: boolean | undefined;
  encoding?: PartReading['encoding'] | undefined;
  chunkRows?: number | undefined;
}

/** The input of a run, settled before anything is opened: every reader takes it as it is. */
export interface InputSpec {
  /** The parts in reading order ('-' reads stdin), s3:// patterns listed, each with its format. */
  readonly parts: readonly InputPart[];
  /** The first part's format: as asked, else by its name (with several parts, each part's name tells its own). */
  readonly format: PartReading['format'];
  /** How every part is read besides its format: the delimiter checked, the defaults filled in. */
  readonly reading: Omit<PartReading, 'format'>;
  /** --shard K/N: several parts are shared out whole; one file is read by `window`. */
  readonly shard?: Shard | undefined;
  readonly window?: ShardWindow | undefined;
}

/**
 * Settles the input: lists s3:// patterns (the S3 client is loaded only when one is given), resolves each part's
 * format, checks the delimiter of a CSV input, fills in the defaults, and under --shard with one file finds this
 * runner's byte range of it. A reader opened on its own (a test, a bench script) is given what this settles too.
 */
export async function settleInput(paths: readonly string[], asked: InputReading, shard?: Shard): Promise<InputSpec> {
  const listed = paths.some(isS3Url) ? await (await import('../io/s3/s3-read.js')).expandS3Inputs(paths) : paths;
  const askedFormat = asked.format === 'auto' ? undefined : asked.format;
  const parts = listed.map((path) => ({ path, format: askedFormat ?? formatByName(path) }));
  const csvPart = parts.find((part) => part.format === 'csv')?.path;
  const reading = {
    // said with the name the reader gives the input, as the reader would say it
    delimiter: csvPart === undefined ? (asked.delimiter ?? ',') : parseDelimiter(asked.delimiter, nameOf(csvPart)),
    encoding: asked.encoding ?? 'utf8',
    header: asked.header ?? true,
    chunkRows: Math.max(1, asked.chunkRows ?? DEFAULT_CHUNK_ROWS),
  };
  const spec: InputSpec = { parts, format: parts[0]?.format ?? 'csv', reading, shard };
  if (shard === undefined || parts.length > 1) return spec;
  const path = listed[0];
  if (spec.format === 'parquet')
    throw new InputPartsError(
      `--shard cannot split the Parquet file '${path}' by bytes: give the table as several Parquet files, ` +
        'so each runner takes whole parts',
    );
  return { ...spec, window: await shardWindow(path, shard, { ...reading, format: spec.format }) };
}

/**
 * The input's bytes when every part is a plain local file (stat'ed now), else undefined: stdin, S3 and compressed
 * parts have no size worth planning by. Only the planner of threads reads it (run-plan.ts): it never decides output.
 */
export async function plainInputBytes(input: InputSpec): Promise<number | undefined> {
  if (input.parts.some((part) => part.path === '-' || isS3Url(part.path) || /\.(gz|zst)$/i.test(part.path)))
    return undefined;
  let total = 0;
  for (const part of input.parts) {
    const size = await stat(part.path).then(
      (s) => (s.isFile() ? s.size : undefined),
      () => undefined,
    );
    // a part that cannot be stat'ed is reported by its reader, with the reader's message
    if (size === undefined) return undefined;
    total += size;
  }
  return total;
}

/** A part's format by its name (`.csv.gz`, `.jsonl.gz`: the name under the compression), when none is asked. */
function formatByName(path: string): PartReading['format'] {
  if (/\.parquet$/i.test(path)) return 'parquet';
  return /\.(jsonl|ndjson)(\.gz)?$/i.test(path) ? 'jsonl' : 'csv';
}

/** The name readers give an input in their messages. */
function nameOf(path: string): string {
  return path === '-' ? '<stdin>' : path;
}

/** What opening the input takes besides its spec: where it is read, and what is done along the way. */
export interface InputOpening {
  /** stdin, for the part '-'. */
  stdin?: NodeJS.ReadableStream | undefined;
  /** Records that cannot be read are skipped and handed here (--on-bad-row skip). */
  onBadRecord?: ((bad: BadRecord) => void) | undefined;
  signal?: AbortSignal | undefined;
  /** A Parquet input decoded on a thread of its own (the run's plan). */
  readThread?: boolean | undefined;
  /** Row threads that parse a CSV input cut into pieces (the run's plan); 0: parsed on this thread. */
  rowThreads: number;
  /** One CSV part, no identifier column named (headerless-input.ts): a first line that is an email or a phone is a row. */
  findHeaderless: boolean;
}

/**
 * Opens the settled input: one part as the row threads or this thread read it; several as one table read part
 * after part (under --shard, only this runner's parts); one file under --shard as its window, keeping this
 * runner's rows of what is read once a headerless file's first line became a row.
 */
export async function openInput(spec: InputSpec, how: InputOpening): Promise<TableInput> {
  const reading: Omit<OpenSourceOptions, 'path' | 'format'> = {
    ...spec.reading,
    ...(spec.parts[0]?.path === '-' && how.stdin !== undefined ? { stream: how.stdin } : {}),
    ...(how.onBadRecord !== undefined ? { onBadRecord: how.onBadRecord } : {}),
    ...(how.signal !== undefined ? { signal: how.signal } : {}),
    ...(how.readThread === true ? { readThread: true } : {}),
  };
  if (spec.parts.length !== 1)
    return openParts(
      spec.parts,
      reading,
      spec.shard !== undefined ? partsShare(spec.parts.length, spec.shard) : undefined,
    );
  const part = spec.parts[0];
  const window = spec.window;
  if (window === undefined) return headerless(await openTableInput({ ...reading, ...part }, how.rowThreads), spec, how);
  // records skipped among the first ones, which every runner reads for the header, are said by their own runner
  const ownLine = (line: number) => line >= window.firstLine && line < window.endLine;
  const tell = how.onBadRecord;
  let othersSkipped = 0;
  const opened = await openTableInput(
    {
      ...reading,
      ...part,
      stream: window.stream,
      ...(tell !== undefined
        ? {
            onBadRecord: (bad) => {
              if (ownLine(bad.line)) tell(bad);
              else othersSkipped++;
            },
          }
        : {}),
    },
    how.rowThreads,
  );
  return shardRows(headerless(opened, spec, how), window, () => othersSkipped);
}

function headerless(opened: TableInput, spec: InputSpec, how: InputOpening): TableInput {
  return how.findHeaderless && spec.parts.length === 1 ? readAsHeaderless(opened) : opened;
}
