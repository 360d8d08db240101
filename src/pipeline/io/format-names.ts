/** Which output format a run writes: the --format flag, else the extension of the -o path, else CSV. */

/** The formats a table output can be written in. */
export type OutputFormatName = 'csv' | 'tsv' | 'jsonl' | 'parquet';

/** What --format accepts: the format names and their aliases. */
export const OUTPUT_FORMAT_CHOICES = ['csv', 'tsv', 'jsonl', 'ndjson', 'parquet'] as const;

/**
 * Output formats by the file extension of -o, in lower case and without the dot. A compression suffix (`.gz`) is
 * looked through by stripCompressionSuffix below, so `out.jsonl.gz` is JSONL (gzipped: see the sink's compression).
 */
const FORMAT_BY_EXTENSION: ReadonlyMap<string, OutputFormatName> = new Map([
  ['csv', 'csv'],
  ['tsv', 'tsv'],
  ['tab', 'tsv'],
  ['jsonl', 'jsonl'],
  ['ndjson', 'jsonl'],
  ['parquet', 'parquet'],
]);

/** Compression suffixes that do not say the format of what they compress. */
const COMPRESSION_SUFFIXES: readonly string[] = ['.gz'];

/** `out.jsonl.gz` -> `out.jsonl`: the part of a path whose extension names the format. */
export function stripCompressionSuffix(path: string): string {
  const lower = path.toLowerCase();
  for (const suffix of COMPRESSION_SUFFIXES) if (lower.endsWith(suffix)) return path.slice(0, -suffix.length);
  return path;
}

/** The format an extension names (`.TSV`, `.ndjson`...), or undefined for an extension that names none. */
export function formatOfExtension(path: string): OutputFormatName | undefined {
  const name = stripCompressionSuffix(path);
  const slash = Math.max(name.lastIndexOf('/'), name.lastIndexOf('\\'));
  const dot = name.lastIndexOf('.');
  if (dot <= slash + 1) return undefined;
  return FORMAT_BY_EXTENSION.get(name.slice(dot + 1).toLowerCase());
}

/** A --format value in its canonical name (`ndjson` is JSONL); undefined when it is not one. */
export function formatOfFlag(flag: string): OutputFormatName | undefined {
  const name = flag.trim().toLowerCase();
  if (name === 'ndjson') return 'jsonl';
  return name === 'csv' || name === 'tsv' || name === 'jsonl' || name === 'parquet' ? name : undefined;
}

/**
 * The format of an output: `flag` (--format) when given, else the extension of `path` (-o), else CSV, which is
 * also what stdout and an extension that names no format (`.txt`, none) get. An unknown flag value is the caller's
 * to reject before this (commander's choices); here it falls back like an absent one.
 */
export function outputFormatOf(path: string | undefined, flag: string | undefined): OutputFormatName {
  const byFlag = flag === undefined ? undefined : formatOfFlag(flag);
  if (byFlag !== undefined) return byFlag;
  if (path === undefined || path === '-') return 'csv';
  return formatOfExtension(path) ?? 'csv';
}
