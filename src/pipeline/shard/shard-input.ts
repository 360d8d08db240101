/** Opens the inputs of a map run for runner K of N under --shard: its whole parts, or its range of one file. */
import { parseDelimiter } from '../io/csv/delimiter.js';
import { InputPartsError } from '../io/input-parts.js';
import { DEFAULT_CHUNK_ROWS, resolveFormat } from '../io/source.js';
import type { OpenSourceOptions } from '../io/table.js';
import { openTableInputs, type TableInput } from '../threads/table-input.js';
import { shardWindow } from './shard-range.js';
import { shardRows } from './shard-rows.js';
import { partsShare, type Shard } from './shard-spec.js';

/**
 * The opened input, and for one file read by range, what keeps this runner's rows of it (shard-rows.ts), to be
 * applied once the input is read as it will be (after a headerless file's first line became a row).
 */
export interface ShardInput {
  opened: TableInput;
  ownRows?: ((input: TableInput) => TableInput) | undefined;
}

/** As openTableInputs opens them; with a shard, several parts are shared out whole, one file by byte range. */
export async function openShardInputs(
  paths: readonly string[],
  options: Omit<OpenSourceOptions, 'path'>,
  threads: number,
  shard: Shard | undefined,
): Promise<ShardInput> {
  if (shard === undefined) return { opened: await openTableInputs(paths, options, threads) };
  if (paths.length > 1)
    return { opened: await openTableInputs(paths, options, threads, partsShare(paths.length, shard)) };
  const path = paths[0];
  const format = resolveFormat({ ...options, path });
  if (format === 'parquet')
    throw new InputPartsError(
      `--shard cannot split the Parquet file '${path}' by bytes: give the table as several Parquet files, ` +
        'so each runner takes whole parts',
    );
  const window = await shardWindow(path, shard, {
    format,
    delimiter: parseDelimiter(options.delimiter, path),
    encoding: options.encoding ?? 'utf8',
    chunkRows: Math.max(1, options.chunkRows ?? DEFAULT_CHUNK_ROWS),
  });
  // records skipped among the first ones, which every runner reads for the header, are said by their own runner
  const ownLine = (line: number) => line >= window.firstLine && line < window.endLine;
  const tell = options.onBadRecord;
  let othersSkipped = 0;
  const reading: Omit<OpenSourceOptions, 'path'> = {
    ...options,
    stream: window.stream,
    ...(tell !== undefined
      ? {
          onBadRecord: (bad) => {
            if (ownLine(bad.line)) tell(bad);
            else othersSkipped++;
          },
        }
      : {}),
  };
  return {
    opened: await openTableInputs([path], reading, threads),
    ownRows: (input) => shardRows(input, window, () => othersSkipped),
  };
}
