/** A run's input, settled once (parts listed, format, delimiter, encoding, header, shard window), opened as settled. */
import { parseDelimiter } from '../io/csv/delimiter.js';
import { InputPartsError } from '../io/input-parts.js';
import { openParts } from '../io/parts-source.js';
import { isS3Url } from '../io/s3/s3-url.js';
import { DEFAULT_CHUNK_ROWS, resolveFormat } from '../io/source.js';
import type { BadRecord, OpenSourceOptions } from '../io/table.js';
import { shardWindow, type ShardWindow } from '../shard/shard-range.js';
import { shardRows } from '../shard/shard-rows.js';
import { partsShare, type Shard } from '../shard/shard-spec.js';
import { openTableInput, type TableInput } from '../threads/table-input.js';
import { readAsHeaderless } from './headerless-input.js';

/** How the input was asked to be read, as the flags say it (absent: the defaults). */
export type InputReading = Pick<OpenSourceOptions, 'format' | 'header' | 'delimiter' | 'encoding' | 'chunkRows'>;

/** The input of a run, settled before anything is opened: every reader takes it as it is. */
export interface InputSpec {
  /** The parts in reading order ('-' reads stdin), s3:// patterns listed. */
  readonly paths: readonly string[];
  /** The first part's format: as asked, else by its name (with several parts, each part's name tells its own). */
  readonly format: 'csv' | 'jsonl' | 'parquet';
  /** How every part is read: the format as asked, the delimiter checked, the defaults filled in. */
  readonly reading: Required<Omit<InputReading, 'format'>> & Pick<InputReading, 'format'>;
  /** --shard K/N: several parts are shared out whole; one file is read by `window`. */
  readonly shard?: Shard | undefined;
  readonly window?: ShardWindow | undefined;
}

/**
 * Settles the input: lists s3:// patterns (the S3 client is loaded only when one is given), resolves the format,
 * checks the delimiter of a CSV input, and under --shard with one file finds this runner's byte range of it.
 */
export async function settleInput(paths: readonly string[], asked: InputReading, shard?: Shard): Promise<InputSpec> {
  const listed = paths.some(isS3Url) ? await (await import('../io/s3/s3-read.js')).expandS3Inputs(paths) : paths;
  const formats = listed.map((path) => resolveFormat({ ...asked, path }));
  const csvPart = listed.find((_, i) => formats[i] === 'csv');
  const reading = {
    ...(asked.format !== undefined ? { format: asked.format } : {}),
    // said with the name the reader gives the input, as the reader would say it
    delimiter: csvPart === undefined ? (asked.delimiter ?? ',') : parseDelimiter(asked.delimiter, nameOf(csvPart)),
    encoding: asked.encoding ?? 'utf8',
    header: asked.header ?? true,
    chunkRows: Math.max(1, asked.chunkRows ?? DEFAULT_CHUNK_ROWS),
  } as const;
  const spec: InputSpec = { paths: listed, format: formats[0] ?? 'csv', reading, shard };
  if (shard === undefined || listed.length > 1) return spec;
  const path = listed[0];
  if (spec.format === 'parquet')
    throw new InputPartsError(
      `--shard cannot split the Parquet file '${path}' by bytes: give the table as several Parquet files, ` +
        'so each runner takes whole parts',
    );
  return { ...spec, window: await shardWindow(path, shard, { ...reading, format: spec.format }) };
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
  const reading: Omit<OpenSourceOptions, 'path'> = {
    ...spec.reading,
    ...(spec.paths[0] === '-' && how.stdin !== undefined ? { stream: how.stdin } : {}),
    ...(how.onBadRecord !== undefined ? { onBadRecord: how.onBadRecord } : {}),
    ...(how.signal !== undefined ? { signal: how.signal } : {}),
    ...(how.readThread === true ? { readThread: true } : {}),
  };
  if (spec.paths.length > 1)
    return openParts(
      spec.paths,
      reading,
      spec.shard !== undefined ? partsShare(spec.paths.length, spec.shard) : undefined,
    );
  const path = spec.paths[0];
  const window = spec.window;
  if (window === undefined) return headerless(await openTableInput({ ...reading, path }, how.rowThreads), spec, how);
  // records skipped among the first ones, which every runner reads for the header, are said by their own runner
  const ownLine = (line: number) => line >= window.firstLine && line < window.endLine;
  const tell = how.onBadRecord;
  let othersSkipped = 0;
  const opened = await openTableInput(
    {
      ...reading,
      path,
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
  return how.findHeaderless && spec.paths.length === 1 ? readAsHeaderless(opened) : opened;
}
