/** The output layout a user asked for (--keep, --drop-input-columns, --result-prefix, --emit-hash, --hash-encoding, --time-format), checked against the input. */
import { ColumnError, findColumn, resultPrefix, type IdentifierColumn } from './identifier-columns.js';
import type { HashEncoding } from '../io/output/hash-cells.js';
import type { TimeFormat } from '../io/typed-cells.js';
import { defaultLayout, type ResultLayout } from './result-columns.js';

export interface LayoutRequest {
  /** --keep: the input columns to write (comma-separated lists, in the order given); the others are dropped. */
  keep?: readonly string[] | undefined;
  /** --drop-input-columns: write no input column but those of --keep. */
  dropInputColumns?: boolean | undefined;
  /** --result-prefix values: `P` (one identifier column) or `COLUMN=P` (any of several). */
  resultPrefixes?: readonly string[] | undefined;
  emitHash?: boolean | undefined;
  /** --hash-encoding: how the hashes of emitHash are written (default base64). */
  hashEncoding?: HashEncoding | undefined;
  timeFormat?: TimeFormat | undefined;
}

/**
 * The layout of the output of `columns` read from an input with `header`. A --keep or --result-prefix naming a
 * column the input does not have, or a bare prefix with several identifier columns, is a ColumnError that says
 * what to write instead.
 */
export function resolveResultLayout(
  header: readonly string[],
  columns: readonly IdentifierColumn[],
  request: LayoutRequest,
  source = 'the input',
): ResultLayout {
  const layout = defaultLayout(columns);
  return {
    keep: keptColumns(header, request, source),
    prefixes: prefixesOf(header, columns, request.resultPrefixes ?? [], layout.prefixes, source),
    emitHash: request.emitHash === true,
    ...(request.hashEncoding !== undefined ? { hashEncoding: request.hashEncoding } : {}),
    timeFormat: request.timeFormat ?? layout.timeFormat,
  };
}

/** The input columns --keep and --drop-input-columns leave (by index, in --keep's order); null: every one. */
export function keptColumns(
  header: readonly string[],
  request: Pick<LayoutRequest, 'keep' | 'dropInputColumns'>,
  source = 'the input',
): number[] | null {
  const names = (request.keep ?? []).flatMap((list) => list.split(',')).filter((name) => name !== '');
  if (names.length === 0) return request.dropInputColumns === true ? [] : null;
  const kept: number[] = [];
  for (const name of names) {
    const index = findColumn(header, name, '--keep', source);
    if (!kept.includes(index)) kept.push(index);
  }
  return kept;
}

function prefixesOf(
  header: readonly string[],
  columns: readonly IdentifierColumn[],
  given: readonly string[],
  defaults: readonly string[],
  source: string,
): string[] {
  const prefixes = [...defaults];
  for (const value of given) {
    const eq = value.lastIndexOf('=');
    if (eq === -1) {
      if (columns.length !== 1) {
        const example = columns
          .map((c) => `--result-prefix '${c.name}=${c.kind === 'auto' ? 'id' : c.kind}'`)
          .join(' ');
        throw new ColumnError(
          `--result-prefix '${value}' is for one identifier column, and there are ${columns.length}: name each, e.g. ${example}`,
          header,
        );
      }
      prefixes[0] = resultPrefix(value, 0);
      continue;
    }
    const name = value.slice(0, eq);
    const index = findColumn(header, name, '--result-prefix', source);
    const position = columns.findIndex((c) => c.index === index);
    if (position === -1) {
      throw new ColumnError(
        `--result-prefix '${value}': '${header[index]}' is not an identifier column of this run (those are ${columns.map((c) => `'${c.name}'`).join(', ')})`,
        header,
      );
    }
    prefixes[position] = resultPrefix(value.slice(eq + 1), position);
  }
  return prefixes;
}
