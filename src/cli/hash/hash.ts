import type { Command } from 'commander';
import {
  ColumnError,
  resolveIdentifierColumns,
  resultHeader,
  type ColumnFlags,
  type ColumnKind,
  type IdentifierColumn,
} from '../../pipeline/map/identifier-columns.js';
import {
  addHashCounts,
  emptyHashCounts,
  HASH_FIELDS,
  hashRows,
  type HashCounts,
} from '../../pipeline/hash/hash-rows.js';
import { commitTogether } from '../../pipeline/io/output/commit-together.js';
import { rowFormatOf, type RowFormat } from '../../pipeline/io/output/row-encoders.js';
import { RowThreads } from '../../pipeline/threads/row-threads.js';
import { defaultHashThreads, planThreads, type ThreadPlan } from '../../pipeline/run/run-plan.js';
import { isPieceSource, type TableInput } from '../../pipeline/threads/table-input.js';
import { openInput, plainInputBytes, settleInput, type InputSpec } from '../../pipeline/jobs/run-input.js';
import { openSink } from '../../pipeline/io/output/sink.js';
import { defaultLayout } from '../../pipeline/map/result-columns.js';
import { keptColumns } from '../../pipeline/map/result-layout.js';
import { headerlessColumns, mayBeHeaderless } from '../../pipeline/jobs/headerless-input.js';
import type { HashEncoding } from '../../pipeline/io/output/hash-cells.js';
import type { ColumnType } from '../../pipeline/io/typed-cells.js';
import { requireTextColumns } from '../../pipeline/io/parquet/parquet-columns.js';
import { InputError, OutputError, type TableInfo, type TableSink } from '../../pipeline/io/table.js';
import { BadRowsOutput, type BadRowFlags } from '../../pipeline/run/bad-rows-output.js';
import { addBadRowOptions, badRowFlags } from '../shared/bad-rows.js';
import { EXIT, UserError, onInterrupt } from '../shared/exit-codes.js';
import {
  addHashEncodingOption,
  addOutputOptions,
  outputFlags,
  sinkCompression,
  type OutputCompression,
  type OutputFormat,
} from '../shared/options.js';
import {
  addTableInputOptions,
  expandInputArgs,
  inputArgs,
  resolveInputArg,
  sourceOptionsOf,
  tableInputFlags,
  type InputFlags,
} from '../shared/input-options.js';
import { addThreadsOption, threadsFlag } from '../shared/threads-option.js';
import { createProgress, loadSpinner } from '../shared/progress.js';
import { addOutputDirOption, outputDirOf, partOutputPaths, partSinksFor } from '../shared/output-dir.js';
import { refuseOverlappingPaths, standardOutputs } from '../shared/output-paths.js';
import { collectRepeated } from '../shared/repeated-flags.js';
import { addPhoneRegionOption, phoneRegionColumnFlagOf, phoneRegionFlagOf } from '../shared/phone-region-option.js';
import { phoneRegionColumnIndex, withNullMarkers, withPhoneRegion } from '../../pipeline/map/column-options.js';
import { phoneRegionHint, readsRegion } from '../../pipeline/map/phone-region-hint.js';
import { addNullValueOption, nullValuesOf } from '../shared/null-value-option.js';
import type { PhoneRegion } from '../../identity/index.js';
import { writeLine } from '../../pipeline/run/log-lines.js';
import { addS3EndpointOption } from '../shared/s3-endpoint-option.js';
import { isS3Url } from '../../pipeline/io/s3/s3-url.js';
import { formatCount, formatDuration, formatRate, writeSummaryJson } from '../../pipeline/run/summary.js';

export { HASH_FIELDS };

export interface HashFlags extends InputFlags, ColumnFlags, Partial<BadRowFlags> {
  /** Several inputs, directories or patterns, read as one run (see pipeline/io/input-parts.ts); `input` is the first. */
  inputs?: string[];
  /** One output per input in this directory, named as the input (instead of -o). */
  outputDir?: string;
  /** -o FILE; stdout when absent or '-'. */
  output?: string;
  format: OutputFormat;
  /** --compress; absent: by the -o name. */
  compress?: OutputCompression;
  bom?: boolean;
  summaryJson?: string;
  quiet?: boolean;
  /** --threads: worker threads that parse, hash and encode CSV rows ('auto': the machine's default; absent or 0: the main thread; see pipeline/run/run-plan.ts). */
  threads?: number | 'auto';
  /** --keep: the input columns to write (comma-separated lists); the others are dropped. */
  keep?: string[];
  /** --drop-input-columns: write no input column but those of --keep. */
  dropInputColumns?: boolean;
  /** --phone-region: national phone numbers are read as this country's. */
  phoneRegion?: PhoneRegion;
  /** --hash-encoding: how the hash column is written (default base64). */
  hashEncoding?: HashEncoding;
  /** --phone-region-col: each row's phones are read in the country this column names. */
  phoneRegionColumn?: string;
  /** --null-value: identifier cells so written are missing (besides empty cells and \N). */
  nullValues?: string[];
}

export interface HashIo {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  now(): number;
  /** Registers a Ctrl-C handler; returns its removal. */
  onInterrupt(handler: () => void): () => void;
}

export interface HashSummary {
  command: 'hash';
  rows: number;
  /** Counts identifiers: a row with two identifier columns counts twice. */
  /** `missing`: empty identifier cells, nothing to hash (as `map` reports them). */
  status: { ok: number; invalid: number; missing: number };
  columns: Record<string, { kind: ColumnKind; ok: number; invalid: number }>;
  invalid_reasons: Record<string, number>;
  row_problems: { short_rows: number; long_rows: number; extra_keys: number };
  /** Records that could not be read and were skipped (--on-bad-row skip); absent without it. */
  bad_rows?: number;
  duration_s: number;
  rows_per_s: number;
}

/**
 * The offline half of `map`: normalize, hash and validate every identifier cell exactly as the service
 * would, and write the input rows with `hash`, `hash_type`, `status` (ok | invalid | missing) and `reason`.
 * Invalid cells are data, not failures: the run succeeds whatever their number.
 */
export async function runHash(flags: HashFlags, io: HashIo): Promise<HashSummary> {
  const startedMs = io.now();
  const toFile = (flags.output !== undefined && flags.output !== '-') || flags.outputDir !== undefined;
  const inputPaths = expandInputArgs(flags.inputs ?? [flags.input], true);
  const s3Input = inputPaths.find(isS3Url);
  if (flags.outputDir !== undefined && s3Input !== undefined)
    throw new UserError(
      `--output-dir names its outputs after local inputs: '${s3Input}' is in S3; use -o s3://BUCKET/KEY or -o FILE instead`,
      EXIT.usage,
    );
  const partOutputs =
    flags.outputDir !== undefined ? partOutputPaths(flags.outputDir, inputPaths, flags.output !== undefined) : [];
  refuseOverlappingPaths(
    inputPaths.map((path) => ({ flag: 'the input', path })),
    [
      ...standardOutputs(flags),
      ...partOutputs.map((path) => ({ flag: '--output-dir', path })),
      { flag: '--bad-rows', path: flags.badRows },
    ],
    true,
  );
  const badRows = await BadRowsOutput.open(
    { onBadRow: flags.onBadRow ?? 'fail', ...(flags.badRows !== undefined ? { badRows: flags.badRows } : {}) },
    (line) => {
      if (!flags.quiet) io.stderr.write(`uid2-batch: ${line}\n`);
    },
  );
  let interrupted = false;
  // listened to from the opening on: a read that waits (a pipe nobody writes to) is given up on an interrupt
  const stopReading = new AbortController();
  const removeInterrupt = io.onInterrupt(() => {
    interrupted = true;
    stopReading.abort();
  });
  const interruptedError = (): UserError =>
    new UserError(
      `interrupted: ${toFile ? 'no output file was written' : 'the rows on stdout are incomplete'}`,
      EXIT.interrupted,
    );
  let plan: ThreadPlan;
  let source: TableInput;
  try {
    // settled once, as map's is: s3:// patterns listed, the format resolved, the reading's defaults filled in
    const input = await settleInput(inputPaths, sourceOptionsOf(flags));
    plan = planThreads({
      command: 'hash',
      threads: flags.threads,
      inputBytes: flags.threads === 'auto' ? await plainInputBytes(input) : undefined,
      outputDir: flags.outputDir !== undefined,
      outputFormat: flags.format,
    });
    source = await openHashInput(input, flags, plan.rowThreads, io, badRows, stopReading.signal);
  } catch (err) {
    removeInterrupt();
    await badRows?.abort();
    throw interrupted ? interruptedError() : err;
  }
  await loadSpinner(io.stderr);
  const progress = createProgress({ label: 'hash', quiet: flags.quiet, stream: io.stderr, dataOnStdout: !toFile });
  let sink: TableSink | undefined;
  let threads: RowThreads | undefined;
  try {
    for (const n of source.notes) progress.note(n);
    let columns: IdentifierColumn[] = [];
    const headerless = headerlessColumns(source);
    if (headerless !== undefined) {
      columns = headerless;
    } else if (source.header.length > 0) {
      const resolved = resolveIdentifierColumns(
        source.header,
        flags,
        source.name === '<stdin>' ? 'stdin' : source.name,
      );
      columns = resolved.columns;
      if (resolved.note !== undefined) progress.note(resolved.note);
    } else {
      progress.note(`${source.name} is empty: writing an empty output`);
    }
    const regionIndex =
      flags.phoneRegionColumn === undefined || columns.length === 0
        ? undefined
        : phoneRegionColumnIndex(source.header, flags.phoneRegionColumn, columns, source.name);
    columns = withNullMarkers(withPhoneRegion(columns, flags.phoneRegion, regionIndex), flags.nullValues);
    // a Parquet column of numbers or nested values holds no identifier as the service reads one
    requireTextColumns(
      source,
      columns.map((c) => c.name),
    );
    const keep = source.header.length > 0 ? keptColumns(source.header, flags, source.name) : null;
    const kept = keep === null ? source.header : keep.map((i) => source.header[i]);
    const header = columns.length > 0 ? resultHeader(kept, columns, HASH_FIELDS) : [];
    // JSONL: input cells as read, the tool's own cells null when empty
    const types: ColumnType[] = header.map((_, i) => (i < kept.length ? 'input' : 'string'));
    sink =
      flags.outputDir !== undefined
        ? partSinksFor(flags.outputDir, source, header, types)
        : await openSink({
            path: flags.output,
            format: flags.format,
            ...sinkCompression(flags),
            header,
            types,
            ...(flags.bom ? { bom: true } : {}),
            ...(toFile ? {} : { stream: io.stdout }),
            ...(plan.encoderThreads(isPieceSource(source)) !== undefined
              ? { threads: plan.encoderThreads(isPieceSource(source)) }
              : {}),
          });

    const tally = new Tally(columns);
    const counts = tally.counts;
    const checkInterrupt = (): void => {
      if (interrupted) throw interruptedError();
    };
    if (isPieceSource(source)) {
      // openInput reads the input as rows for a Parquet output: the row threads write text
      if (flags.format === 'parquet') throw new Error('Parquet output from row threads');
      const format: RowFormat = rowFormatOf(flags.format, header, types);
      const layout = {
        ...defaultLayout(columns),
        keep,
        ...(flags.hashEncoding !== undefined ? { hashEncoding: flags.hashEncoding } : {}),
      };
      threads = new RowThreads(
        { name: source.name, csv: source.settings, width: source.width, columns, format, v2: false, layout },
        plan.engineThreads(true),
        plan.rowThreadYoungGenerationMb,
      );
      for await (const piece of threads.hashed(source)) {
        addHashCounts(counts, piece.counts);
        await sink.writeEncoded(piece.bytes);
        progress.update({ done: counts.rows, ...estimateTotal(source, counts.rows) });
        checkInterrupt();
      }
    } else {
      for await (const chunk of source.rows()) {
        await sink.writeRows(hashRows(chunk, columns, counts, keep, flags.hashEncoding));
        progress.update({ done: counts.rows, ...estimateTotal(source, counts.rows) });
        checkInterrupt();
      }
    }
    await commitTogether([sink, badRows]);
    progress.stop();
    const problems = source.problems();
    const summary = tally.summary(startedMs, io.now(), problems);
    if (problems.badRows !== undefined) summary.bad_rows = problems.badRows;
    if (!flags.quiet) writeLine(io.stderr, formatHashSummary(summary), { counts: summary });
    const hint = phoneRegionHint(readsRegion(columns), counts);
    if (hint !== undefined && !flags.quiet) io.stderr.write(`uid2-batch: ${hint}\n`);
    if (!flags.quiet) for (const line of badRows?.closingLines() ?? []) io.stderr.write(`uid2-batch: ${line}\n`);
    if (flags.summaryJson !== undefined) await writeJsonAtomically(flags.summaryJson, summary);
    return summary;
  } catch (err) {
    progress.stop();
    // a run that ends early lets go of the input's file now: left to the collector, Node warns after the error
    source.close?.();
    await sink?.abort();
    await badRows?.abort();
    throw interrupted ? interruptedError() : asUserError(err);
  } finally {
    removeInterrupt();
    await threads?.close();
  }
}

/** Opens the settled input as the run's threads read it; a one-column file of emails or phones without a header line is read as such (a note says so). */
async function openHashInput(
  input: InputSpec,
  flags: HashFlags,
  rowThreads: number,
  io: HashIo,
  badRows: BadRowsOutput | undefined,
  signal: AbortSignal,
): Promise<TableInput> {
  try {
    return await openInput(input, {
      stdin: io.stdin,
      onBadRecord: badRows?.record,
      signal,
      rowThreads,
      findHeaderless: mayBeHeaderless(flags, { format: input.format, header: input.reading.header }),
    });
  } catch (err) {
    throw asUserError(err);
  }
}

/** Rows expected in total, from the share of the file read so far; nothing for stdin. */
function estimateTotal(source: TableInfo, rows: number): { total?: number; totalIsEstimate?: boolean } {
  const read = source.bytesRead();
  if (source.totalBytes === undefined || read === 0) return {};
  return {
    total: Math.max(rows, Math.round((rows * source.totalBytes) / read)),
    totalIsEstimate: read < source.totalBytes,
  };
}

class Tally {
  readonly counts: HashCounts;

  constructor(private readonly columns: readonly IdentifierColumn[]) {
    this.counts = emptyHashCounts(columns.length);
  }

  summary(
    startedMs: number,
    endedMs: number,
    problems: { shortRows: number; longRows: number; extraKeys: number },
  ): HashSummary {
    const duration = Math.max(0, endedMs - startedMs) / 1000;
    const { ok, invalid, missing, rows, reasons } = this.counts;
    const columns: HashSummary['columns'] = {};
    this.columns.forEach((c, i) => {
      columns[c.name] = { kind: c.kind, ok: ok[i], invalid: invalid[i] };
    });
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    return {
      command: 'hash',
      rows,
      status: { ok: sum(ok), invalid: sum(invalid), missing },
      columns,
      invalid_reasons: Object.fromEntries(Object.entries(reasons).sort((a, b) => b[1] - a[1])),
      row_problems: { short_rows: problems.shortRows, long_rows: problems.longRows, extra_keys: problems.extraKeys },
      duration_s: Math.round(duration * 1000) / 1000,
      rows_per_s: duration > 0 ? Math.round(rows / duration) : 0,
    };
  }
}

/** `hash: 3,000 rows in 0.2 s (15,000 rows/s): 2,850 ok, 150 invalid (90 invalid email, 60 empty)` */
export function formatHashSummary(s: HashSummary): string {
  let line = `hash: ${formatCount(s.rows)} rows in ${formatDuration(s.duration_s)} (${formatRate(s.rows_per_s)} rows/s): ${formatCount(s.status.ok)} ok, ${formatCount(s.status.invalid)} invalid`;
  const reasons = Object.entries(s.invalid_reasons);
  if (reasons.length > 0) {
    // the reason's head ("invalid phone") is enough on one line; the full text is in the output rows
    line += ` (${reasons.map(([r, n]) => `${formatCount(n)} ${r.split(':')[0]}`).join(', ')})`;
  }
  if (s.status.missing > 0) line += `, ${formatCount(s.status.missing)} missing`;
  const names = Object.keys(s.columns);
  if (names.length > 1) {
    line += `; ${names.map((n) => `${n}: ${formatCount(s.columns[n].ok)} ok, ${formatCount(s.columns[n].invalid)} invalid`).join('; ')}`;
  }
  const p = s.row_problems;
  if (p.short_rows > 0) line += `; ${rows(p.short_rows)} had fewer cells than the header (padded with empty cells)`;
  if (p.extra_keys > 0)
    line += `; ${rows(p.extra_keys)} had keys not in the header (those values are not in the output)`;
  return line;
}

function rows(n: number): string {
  return `${formatCount(n)} ${n === 1 ? 'row' : 'rows'}`;
}

function asUserError(err: unknown): unknown {
  if (err instanceof UserError) return err;
  if (err instanceof ColumnError) return new UserError(err.message, EXIT.usage);
  if (err instanceof InputError || err instanceof OutputError) return new UserError(err.message, EXIT.failed);
  return err;
}

/** A reader of --summary-json (a cron wrapper) never sees half a file. */
async function writeJsonAtomically(path: string, value: unknown): Promise<void> {
  try {
    await writeSummaryJson(path, value as Record<string, unknown>);
  } catch (err) {
    throw new UserError(
      `cannot write --summary-json ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      EXIT.failed,
    );
  }
}

export function processHashIo(): HashIo {
  return {
    stdin: process.stdin,
    stdout: process.stdout,
    stderr: process.stderr,
    now: () => Date.now(),
    onInterrupt: (handler) => onInterrupt(handler, process, 'interrupted: stopping; no output file is written'),
  };
}

export function registerHash(program: Command, io: () => HashIo = processHashIo): void {
  const cmd = program
    .command('hash')
    .description(
      'normalize, hash and validate the identifiers of CSV, JSONL or Parquet files offline (nothing is sent): writes hash, hash_type, status and reason per identifier column',
    )
    .addHelpText(
      'after',
      '\nOutput: CSV, TSV, JSONL or Parquet, by the name of -o or --format.\n' +
        'Exit codes: 0 done (invalid identifiers are data); 1 failed (a bad input file); 2 usage; 9 records that could\n' +
        'not be read were skipped (--on-bad-row skip; see --bad-rows); 130 interrupted.',
    )
    .argument(
      '[input...]',
      "CSV, JSONL or Parquet files (gzip too), directories of parts, or quoted patterns such as 'part-*.csv.gz', read as one run; '-' or nothing reads stdin",
    )
    .option('--bom', 'start a CSV output with a UTF-8 BOM (for Excel)')
    .option(
      '--keep <columns>',
      'write only these input columns (comma-separated; repeatable), e.g. --keep customer_id: raw emails and phones are not copied',
      collectRepeated,
    )
    .option('--drop-input-columns', 'write no input column (but those of --keep): only the result columns');
  addTableInputOptions(cmd);
  addPhoneRegionOption(cmd, false);
  addNullValueOption(cmd);
  addBadRowOptions(cmd);
  addOutputOptions(cmd);
  addOutputDirOption(cmd);
  addHashEncodingOption(cmd, 'the hash column');
  addThreadsOption(cmd, defaultHashThreads(), 'one per core, at most 4');
  addS3EndpointOption(cmd, 's3:// inputs, -o and --bad-rows');
  cmd.action(async (input: string[] | undefined, opts: Record<string, unknown>) => {
    const hashIo = io();
    const output = typeof opts.output === 'string' ? opts.output : undefined;
    const flags: HashFlags = {
      ...tableInputFlags(resolveInputArg(inputArgs(input)[0], hashIo.stdin), opts),
      ...(inputArgs(input).length > 1 ? { inputs: inputArgs(input) } : {}),
      format: outputFlags(opts).format,
      ...sinkCompression(outputFlags(opts)),
      ...(output !== undefined ? { output } : {}),
      ...(opts.bom === true ? { bom: true } : {}),
      ...(typeof opts.summaryJson === 'string' ? { summaryJson: opts.summaryJson } : {}),
      quiet: opts.quiet === true,
      threads: threadsFlag(opts),
      ...badRowFlags(opts),
      ...(outputDirOf(opts) !== undefined ? { outputDir: outputDirOf(opts) } : {}),
      ...(Array.isArray(opts.keep) ? { keep: opts.keep as string[] } : {}),
      ...(opts.dropInputColumns === true ? { dropInputColumns: true } : {}),
      ...(phoneRegionFlagOf(opts) !== undefined ? { phoneRegion: phoneRegionFlagOf(opts) } : {}),
      ...(outputFlags(opts).hashEncoding !== undefined ? { hashEncoding: outputFlags(opts).hashEncoding } : {}),
      ...(phoneRegionColumnFlagOf(opts) !== undefined ? { phoneRegionColumn: phoneRegionColumnFlagOf(opts) } : {}),
      ...(nullValuesOf(opts) !== undefined ? { nullValues: nullValuesOf(opts) } : {}),
    };
    const summary = await runHash(flags, hashIo);
    // records skipped (--on-bad-row skip): the run completed, and its exit code says that rows are missing
    if ((summary.bad_rows ?? 0) > 0) process.exitCode = EXIT.skipped;
  });
}
