/**
 * The table I/O contract between the source/sink (source.ts, sink.ts) and the mapping engine.
 * Everything here is a string: cells are never cast, so a phone `+1...` or a hash keeps its exact text.
 */

import type { ParquetLayout } from './parquet/parquet-encoder.js';
import type { ColumnType } from './typed-cells.js';

/**
 * Why a row did not fit the header. Padding and dropping keep every output row as wide as the header, so the
 * output stays a rectangle; the problem travels with the row so the engine can report it instead of guessing.
 */
export type RowProblem =
  /** Fewer cells than the header: padded with ''. The row is still processed (trailing empty cells are common). */
  | { kind: 'short_row'; cells: number; expected: number }
  /**
   * More cells than the header (usually an unquoted delimiter inside a value, so the columns are shifted):
   * the extra cells are dropped and the row's identifiers should be reported `invalid`, not sent.
   */
  | { kind: 'long_row'; cells: number; expected: number }
  /** JSONL: the object had keys that are not in the header (first seen after the header was fixed); dropped. */
  | { kind: 'extra_keys'; keys: number };

export interface InputRow {
  /** 1-based physical line where the record starts in the file (after a multi-line quoted cell, lines jump). */
  line: number;
  /** The part (file) the row was read from, when a run reads several (see parts-source.ts). */
  file?: string;
  /** Exactly `header.length` cells (see RowProblem for how ragged rows are made to fit). */
  cells: string[];
  problem?: RowProblem;
}

/** Counts of ragged rows seen so far, for the summary. */
export interface SourceProblemCounts {
  shortRows: number;
  longRows: number;
  extraKeys: number;
  /** Records that could not be read and were skipped (with `onBadRecord`); absent when none could be. */
  badRows?: number;
}

export interface TableSource {
  /**
   * Final once openSource() resolves (the header record is read while opening). For JSONL: the keys of the
   * objects in the first chunk in first-seen order (first object's keys first); a key first seen later is a
   * row problem `extra_keys`. For a headerless CSV: col1..colN after the first record. [] for an empty input.
   */
  header: string[];
  /** Notes for stderr found while opening (e.g. duplicate header names made unique). Never contain cell values. */
  notes: string[];
  /** Chunks of up to `chunkRows` rows, read on demand: nothing is read ahead beyond the chunk being built. */
  rows(): AsyncIterable<InputRow[]>;
  /** Bytes consumed from the input so far, for progress and ETA. */
  bytesRead(): number;
  /** Size of the input file; undefined for stdin or a pipe. */
  totalBytes: number | undefined;
  /** The file path, or '<stdin>', for messages. */
  name: string;
  problems(): SourceProblemCounts;
  /** Lets go of the input without reading its rows (after the header was looked at). */
  close?(): void;
}

/** What is known of an input besides its rows: enough for progress and the summary. */
export type TableInfo = Omit<TableSource, 'rows'>;

/**
 * How an input part is read, settled once before any reader opens it (jobs/run-input.ts): the readers take each
 * field as it is, and neither default nor check it again.
 */
export interface PartReading {
  /**
   * As asked, else by the part's name. A gzip-compressed CSV or JSONL input is recognised by its first bytes
   * whatever the format, also on stdin.
   */
  format: 'csv' | 'jsonl' | 'parquet';
  /** CSV only; the one character, checked (csv/delimiter.ts: `tab` is '\t'). */
  delimiter: string;
  /** CSV only; false names the columns col1..colN. */
  header: boolean;
  /** Invalid UTF-8 in a 'utf8' input is an InputError suggesting latin1. */
  encoding: 'utf8' | 'latin1';
  /** Rows per chunk, at least 1. */
  chunkRows: number;
}

export interface OpenSourceOptions extends PartReading {
  /** '-' reads stdin. */
  path: string;
  /** For tests: read from this stream instead of opening `path` (path is still used as the name). */
  stream?: NodeJS.ReadableStream;
  /**
   * CSV and JSONL: a record that cannot be read (invalid UTF-8, a NUL, a quote never closed, a record over the
   * size limit, a JSONL line that is not an object) is skipped and handed here instead of ending the run with an
   * InputError. The header record is never skipped. Absent: the first such record is an InputError.
   */
  onBadRecord?: (bad: BadRecord) => void;
  /**
   * Parquet only: decode the rows on a worker thread when a compiled one exists (see
   * threads/parquet-read-thread.ts; opened by threads/table-input.ts), not on this thread.
   */
  readThread?: boolean;
  /**
   * The run's interrupt: aborting it gives up a read that waits for data (a named pipe nobody writes to), which
   * then fails with an AbortError. Without it such a read waits as long as the pipe does.
   */
  signal?: AbortSignal | undefined;
}

/** A record skipped because it cannot be read: where it is and why. Never its content (it may be an email). */
export interface BadRecord {
  file: string;
  line: number;
  reason: string;
}

/** An output written whole and closed beside its target, waiting to be renamed into place. */
export interface PreparedOutput {
  /**
   * Renames the temp file into place (through a symlink to its target). `sealed`, when given, is called with the
   * finished file just before the rename: a caller that must know later whether the rename happened records it
   * there. When it throws, nothing is renamed.
   */
  publish(sealed?: (file: SealedOutput) => void | Promise<void>): Promise<void>;
  /** Removes the temp file; the target is left as it was. */
  discard(): Promise<void>;
}

export interface TableSink {
  /** Resolves once the data is handed to the stream and it has room again (backpressure). */
  writeRows(rows: string[][]): Promise<void>;
  /**
   * Rows already encoded in this sink's format (by a worker thread), after everything given before. `written`,
   * when given, is called once the bytes are written and their buffer may be written into again; a sink that
   * keeps them, or cannot tell, never calls it.
   */
  writeEncoded(bytes: Uint8Array, written?: () => void): Promise<void>;
  /**
   * Parquet only: lets the worker thread that holds the rows encode this file itself (one thread fewer). Returns
   * the layout to encode by; from then on writeEncoded() takes the file's own bytes in order, and the file's last
   * bytes (the footer) come through endFile() before commit(). Undefined when rows were already given here.
   */
  encodeElsewhere?(): ParquetLayout | undefined;
  /** After encodeElsewhere(): the file's last bytes, written by commit(). */
  endFile?(tail: Uint8Array): void;
  /**
   * File: flush, fsync, rename the temp file into place (prepareCommit, then publish); `sealed`, when given, is
   * called with the finished file just before the rename. stdout: end, without calling `sealed`.
   */
  commit(sealed?: (file: SealedOutput) => void | Promise<void>): Promise<void>;
  /**
   * File: everything commit() does but the rename (flush, fsync, close), so that several outputs of one run can be
   * renamed into place together once all are complete (commit-together.ts). After a failure nothing is left behind.
   */
  prepareCommit?(): Promise<PreparedOutput>;
  /** File: close and remove the temp file; the target is left untouched. Safe to call after a failure. */
  abort(): Promise<void>;
}

/**
 * A file output complete on disk, before its rename: where it goes and what it is. The rename keeps the file, so
 * the target holds this very file (device, inode, size and modification time) exactly when the rename happened.
 */
export interface SealedOutput {
  /** The path the rename goes to (a symlink's target), absolute. */
  target: string;
  dev: number;
  ino: number;
  size: number;
  mtimeMs: number;
}

export interface OpenSinkOptions {
  /** '-' or undefined writes to stdout. */
  path?: string;
  /** Parquet needs a file path (its footer is written last); stdout is refused. */
  format: 'csv' | 'tsv' | 'jsonl' | 'parquet';
  /**
   * CSV, TSV and JSONL: gzip the output as it is written. Default: gzip when `path` ends in `.gz`, else none.
   * Parquet compresses its own pages and refuses 'gzip'.
   */
  compress?: 'gzip' | 'none';
  /** CSV and TSV: written as the first row. JSONL: the keys of each object. */
  header: string[];
  /**
   * JSONL and Parquet: what each column holds, by position in `header` (typed-cells.ts); absent: every cell an
   * input cell, the string it is. CSV and TSV write every cell as its text whatever its type.
   */
  types?: readonly ColumnType[];
  /**
   * CSV and TSV: false writes no header row (the output of a runner after the first under --shard, which is
   * appended to the first runner's). Default true.
   */
  headerLine?: boolean;
  /** CSV and TSV only: start with a UTF-8 BOM (helps Excel open UTF-8 files). */
  bom?: boolean;
  /** File only: permissions of the new file (e.g. 0o600 when rows carry secrets); default 0o666 minus umask. */
  mode?: number;
  /** For tests: write here instead of stdout when path is '-' or undefined. */
  stream?: NodeJS.WritableStream;
  /** Worker threads that encode the rows (0 or absent: on the main thread). The bytes are the same. */
  threads?: number;
}

/**
 * A problem with the input file as a whole (the run cannot go on): unbalanced quotes, invalid UTF-8, a NUL
 * byte, a JSONL line that is not an object... The message names the file, the line, the problem and a fix,
 * and never contains a cell's content (it may be an email or a phone).
 */
export class InputError extends Error {
  constructor(
    readonly file: string,
    readonly line: number | undefined,
    readonly problem: string,
    readonly hint?: string,
  ) {
    super(`${file}${line === undefined ? '' : `: line ${line}`}: ${problem}${hint ? `; ${hint}` : ''}`);
    this.name = 'InputError';
  }
}

/** A read given up because the run was interrupted (OpenSourceOptions.signal): reported as the interrupt it is. */
export function readInterrupted(): Error {
  const err = new Error('interrupted while reading the input');
  err.name = 'AbortError';
  return err;
}

/** A file that could not be opened or read, as the InputError that names it and why. */
export function openFailure(name: string, err: unknown): InputError {
  if (err instanceof InputError) return err;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOENT') return new InputError(name, undefined, 'no such file');
  if (code === 'EACCES' || code === 'EPERM') return new InputError(name, undefined, 'permission denied');
  if (code === 'EISDIR') return new InputError(name, undefined, 'a directory, not a file');
  return new InputError(name, undefined, `cannot be read (${code ?? 'unknown error'})`);
}

/** The output cannot be written (missing directory, permission, disk full). Names the path and a fix. */
export class OutputError extends Error {
  constructor(
    readonly file: string,
    readonly problem: string,
    readonly hint?: string,
  ) {
    super(`${file}: ${problem}${hint ? `; ${hint}` : ''}`);
    this.name = 'OutputError';
  }
}

/** The per-row reason text for a row problem: goes into the `reason` column, so no cell values here. */
export function rowProblemReason(problem: RowProblem): string {
  switch (problem.kind) {
    case 'short_row':
      return `row has ${problem.cells} cells, header has ${problem.expected}`;
    case 'long_row':
      return `row has ${problem.cells} cells, header has ${problem.expected} (unquoted delimiter in a value?)`;
    case 'extra_keys':
      return `object has ${problem.keys} key(s) not in the header`;
  }
}

/** Whether the row's identifiers can be trusted: a long row's columns are likely shifted. */
export function rowProblemInvalidates(problem: RowProblem): boolean {
  return problem.kind === 'long_row';
}
