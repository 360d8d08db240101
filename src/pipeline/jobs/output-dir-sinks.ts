/** `--output-dir`: one output per input part, named as the part, each in its name's format. */
import { PartSinks } from '../io/output/part-sinks.js';
import { isPartsSource } from '../io/parts-source.js';
import type { TableInfo } from '../io/table.js';
import type { ColumnType } from '../io/typed-cells.js';

/** The format of an output named as its input: by the name's extension (under .gz), as inputs are read. */
export function formatOfName(path: string): 'csv' | 'jsonl' | 'parquet' {
  if (/\.parquet$/i.test(path)) return 'parquet';
  return /\.(jsonl|ndjson)(\.gz)?$/i.test(path) ? 'jsonl' : 'csv';
}

/** The sink of a run with --output-dir: each part's rows to its output (`paths`, one per part, in order). */
export function partSinks(
  paths: readonly string[],
  source: TableInfo,
  header: string[],
  types: readonly ColumnType[],
  /** Under --shard: whether a part is this runner's to write (the others are written by their runners). */
  owned?: (index: number) => boolean,
): PartSinks {
  const outputs = paths.map((path) => ({ path, format: formatOfName(path), header, types }));
  return new PartSinks(outputs, isPartsSource(source) ? () => source.partEnds() : () => [], owned);
}
