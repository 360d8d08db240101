import type { Command } from 'commander';
import type { ServiceClient } from '../../client/index.js';
import { envFingerprint, type ConnectionFlags, type ResolvedConfig } from '../../config/index.js';
import {
  checkRawUidRows,
  pickRawUidColumn,
  type CheckedRow,
  type RawUidVerdict,
  VERDICT_COLUMNS,
  verdictCells,
  verdictTypes,
  type OptoutCounts,
  type OptoutResult,
  type OptoutStatusFn,
  replaySweepOptouts,
  sweepStateOptouts,
  type SweptRawUid,
} from '../../pipeline/optout/optout-sweep.js';
import { openParts } from '../../pipeline/io/parts-source.js';
import type { InputRow, TableSink, TableSource } from '../../pipeline/io/table.js';
import { closeOnFailure } from '../../pipeline/io/close-on-failure.js';
import { resultHeader } from '../../pipeline/map/identifier-columns.js';
import { openState } from '../../state/index.js';
import {
  connect as connectService,
  resolveFor,
  runInProcess,
  sayTo,
  type InputCommandDeps,
  type Say,
} from '../shared/command-context.js';
import { addBadRowOptions, badRowFlags, BadRowsOutput, type BadRowFlags } from '../shared/bad-rows.js';
import { EXIT, UserError } from '../shared/exit-codes.js';
import { collectRepeated } from '../shared/repeated-flags.js';
import { refuseOverlappingPaths, standardOutputs } from '../shared/output-paths.js';
import type { ColumnType, TimeFormat, TypedHeader } from '../../pipeline/io/typed-cells.js';
import { hashCell, type HashEncoding } from '../../pipeline/io/output/hash-cells.js';
import { requireTextColumns } from '../../pipeline/io/parquet/parquet-columns.js';
import {
  addConnectionOptions,
  addOutputOptions,
  addHashEncodingOption,
  addLockWaitOption,
  addTimeFormatOption,
  connectionFlags,
  decimalNumber,
  optionReaders,
  outputFlags,
  wholeNumber,
  type OutputFlags,
} from '../shared/options.js';
import {
  addInputFormatOptions,
  expandInputArgs,
  inputArgs,
  inputFormatFlags,
  sourceOptionsOf,
  type InputFlags,
} from '../shared/input-options.js';
import {
  exitCodeOf,
  replayedLine,
  reportRun,
  requestCounters,
  withRunOutput,
  type ChangeDelivery,
} from '../shared/run-report.js';
import { formatCount, formatDuration, makeSummary, type RunSummary } from '../shared/summary.js';

export interface OptoutCheckFlags extends Partial<BadRowFlags> {
  /** File, '-' for stdin, or undefined (stdin when it is not a terminal, unless --state). */
  input?: string;
  /** Several inputs, directories or patterns, read as one run (see pipeline/io/input-parts.ts); `input` is the first. */
  inputs?: string[];
  /** --col, repeatable: every column named is checked. */
  cols?: string[];
  /** How the file is read: format, delimiter, encoding, header (as for map and hash). */
  reading: Omit<InputFlags, 'input'>;
  onlyOptedOut: boolean;
  state?: string;
  sweepFraction?: number;
  privateOperator: boolean;
  concurrency?: number;
  /** --wait with --state: seconds to wait for another run's lock on the state file (absent: fail at once). */
  wait?: number;
  connection: ConnectionFlags;
  output: OutputFlags;
}

/** What optout-check touches besides its files: injected, so tests run the command without a process. */
export type OptoutCheckDeps = InputCommandDeps;

const parseConcurrency = wholeNumber('--concurrency', 1, 100);
const parseFraction = decimalNumber('--sweep-fraction', 0, 1);

export function registerOptoutCheck(program: Command): void {
  const cmd = program
    .command('optout-check')
    .summary('which raw UIDs have opted out (POST /v2/optout/status), from a file or the state file')
    .description(
      [
        'Asks the service which raw UIDs have opted out. Input: a CSV, JSONL or Parquet column of raw UIDs (--col, or the one column named like raw_uid, advertising_id, uid or raw_uid2), or --state FILE to check the raw UIDs and previous raw UIDs stored there; opted-out entries are then tombstoned and each check time is recorded.',
        "Requests go one at a time on one connection, the service's rule for this endpoint, unless --private-operator.",
        'Re-mapping alone sees an opt-out only when the entry comes due, up to a year later. A nightly `optout-check --state s.db --sweep-fraction 0.05` checks 5% of the entries, going on from where the last night stopped, so every entry is checked every 20 days.',
        'Output: CSV, TSV, JSONL or Parquet, by the name of -o or --format.',
        'Exit codes: 0 done (opted-out raw UIDs are data); 1 failed (the service, the network, a bad input file); 2 usage, or another run is using the state file; 3 some raw UIDs could not be checked (run again); 4 credentials refused; 9 records that could not be read were skipped (--on-bad-row skip; see --bad-rows); 130 interrupted.',
      ].join('\n\n'),
    )
    .argument(
      '[input...]',
      "CSV, JSONL or Parquet files with a column of raw UIDs, directories of parts, or quoted patterns such as 'part-*.csv.gz', read as one run; - reads stdin",
    )
    .option(
      '--col <name>',
      'a column of raw UIDs (repeatable: every column named is checked; default: the one named like raw_uid, advertising_id, uid, raw_uid2)',
      collectRepeated,
    )
    .option('--only-opted-out', 'write only the opted-out rows')
    .option(
      '--state <file>',
      'check the raw UIDs stored in this state file instead of an input file; tombstone the opted-out entries',
    )
    .option(
      '--sweep-fraction <f>',
      'with --state: check only this fraction of the entries, from where the last sweep stopped (e.g. 0.05)',
      parseFraction,
    )
    .option('--private-operator', 'the service is a private operator: batches may be sent in parallel')
    .option('--concurrency <n>', 'with --private-operator: requests in flight at most (default 4)', parseConcurrency);
  addLockWaitOption(cmd, 'the --state file (a remap-due, a map --state)');
  addInputFormatOptions(cmd);
  addBadRowOptions(cmd);
  addConnectionOptions(cmd);
  addOutputOptions(cmd);
  addTimeFormatOption(cmd);
  addHashEncodingOption(cmd, 'the hashes of --state rows');
  cmd.action((input: string[] | undefined, opts: Record<string, unknown>) =>
    runInProcess((deps) => runOptoutCheck(optoutCheckFlags(input, opts), deps)),
  );
}

export function optoutCheckFlags(
  input: string | readonly string[] | undefined,
  opts: Record<string, unknown>,
): OptoutCheckFlags {
  const { str, num } = optionReaders(opts);
  const inputs = inputArgs(input);
  return {
    ...(inputs.length > 0 ? { input: inputs[0] } : {}),
    ...(inputs.length > 1 ? { inputs } : {}),
    ...(Array.isArray(opts.col) && opts.col.length > 0 ? { cols: opts.col as string[] } : {}),
    reading: inputFormatFlags(opts),
    ...badRowFlags(opts),
    onlyOptedOut: opts.onlyOptedOut === true,
    ...(str('state') !== undefined ? { state: str('state') } : {}),
    ...(num('sweepFraction') !== undefined ? { sweepFraction: num('sweepFraction') } : {}),
    privateOperator: opts.privateOperator === true,
    ...(num('concurrency') !== undefined ? { concurrency: num('concurrency') } : {}),
    ...(num('wait') !== undefined ? { wait: num('wait') } : {}),
    connection: connectionFlags(opts),
    output: outputFlags(opts),
  };
}

const DEFAULT_PRIVATE_CONCURRENCY = 4;

/** Checks the flags that only make sense together, before anything is opened. */
function checkCombinations(flags: OptoutCheckFlags): void {
  if (flags.state !== undefined && flags.input !== undefined) {
    throw new UserError(
      `give either an input file or --state FILE, not both (got '${flags.input}' and --state ${flags.state})`,
    );
  }
  if (flags.sweepFraction !== undefined && flags.state === undefined) {
    throw new UserError('--sweep-fraction works on a state file: add --state FILE');
  }
  if (flags.output.hashEncoding !== undefined && flags.state === undefined) {
    throw new UserError(
      `--hash-encoding ${flags.output.hashEncoding} applies to the hashes of --state rows (a file of raw UIDs has none): add --state FILE, or drop it`,
    );
  }
  if (flags.wait !== undefined && flags.state === undefined)
    throw new UserError('--wait is for the lock of a state file: add --state FILE, or drop --wait');
  if (flags.sweepFraction === 0)
    throw new UserError('--sweep-fraction must be above 0 (e.g. 0.05 checks 5% of the entries per run)');
  if (flags.concurrency !== undefined && flags.concurrency > 1 && !flags.privateOperator) {
    throw new UserError(
      '--concurrency needs --private-operator: the public service takes opt-out checks one request at a time on one connection',
    );
  }
}

/** The client and its run-time parts, shared by the file and the state mode. */
export interface OptoutConnection {
  client: ServiceClient;
  check: OptoutStatusFn;
  concurrency: number;
  close(): Promise<void>;
}

async function connect(flags: OptoutCheckFlags, resolved: ResolvedConfig): Promise<OptoutConnection> {
  const concurrency = flags.privateOperator ? (flags.concurrency ?? DEFAULT_PRIVATE_CONCURRENCY) : 1;
  // one socket: the public service's rule is one connection, one request at a time
  const { client, close } = await connectService(resolved, { connections: concurrency });
  return { client, check: (ids, signal) => client.optoutStatus(ids, { signal }), concurrency, close };
}

/** `uid2-batch optout-check`: returns the exit code (0, 3 some batches failed, 130 interrupted); throws for the rest. */
export async function runOptoutCheck(flags: OptoutCheckFlags, deps: OptoutCheckDeps): Promise<number> {
  checkCombinations(flags);
  const inputPaths =
    flags.state === undefined ? expandInputArgs(flags.inputs ?? [chooseInput(flags.input, deps.stdin)]) : [];
  refuseOverlappingPaths(
    [...inputPaths.map((path) => ({ flag: 'the input', path })), { flag: '--state', path: flags.state }],
    [...standardOutputs(flags.output), { flag: '--bad-rows', path: flags.badRows }],
  );
  const startedMs = deps.now();
  const say = sayTo(flags.output, deps);
  // configuration first: a missing key should be said before a large file is opened
  const config = resolveFor(flags.connection, deps, { apiKey: true, clientSecret: true });
  if (flags.state !== undefined) return runStateSweep(flags.state, config, flags, deps, say, startedMs);
  const badRows = await BadRowsOutput.open(
    { onBadRow: flags.onBadRow ?? 'fail', ...(flags.badRows !== undefined ? { badRows: flags.badRows } : {}) },
    say,
  );
  let code: number;
  try {
    code = await checkFile(inputPaths, flags, deps, config, badRows, startedMs);
  } catch (err) {
    await badRows?.abort();
    throw err;
  }
  if (badRows === undefined) return code;
  if (code === EXIT.ok || code === EXIT.partial) await badRows.commit();
  else await badRows.abort();
  for (const line of badRows.closingLines()) say(line);
  return badRows.exitCode(code);
}

/** optout-check of input files: the verdict of every raw UID of the given column(s). */
async function checkFile(
  inputPaths: string[],
  flags: OptoutCheckFlags,
  deps: OptoutCheckDeps,
  config: ResolvedConfig,
  badRows: BadRowsOutput | undefined,
  startedMs: number,
): Promise<number> {
  const source = await openParts(inputPaths, {
    ...sourceOptionsOf(flags.reading),
    ...(inputPaths[0] === '-' ? { stream: deps.stdin } : {}),
    ...(badRows !== undefined ? { onBadRecord: badRows.record } : {}),
    ...(deps.signal !== undefined ? { signal: deps.signal } : {}),
  });
  return closeOnFailure(source, () => checkSource(source, flags, deps, config, startedMs, badRows));
}

async function checkSource(
  source: TableSource,
  flags: OptoutCheckFlags,
  deps: OptoutCheckDeps,
  config: ResolvedConfig,
  startedMs: number,
  badRows: BadRowsOutput | undefined,
): Promise<number> {
  const say = sayTo(flags.output, deps);
  for (const line of source.notes) say(line);
  const columns = rawUidColumns(source.header, flags.cols, source.name);
  requireTextColumns(
    source,
    columns.map((c) => source.header[c]),
  );

  const connection = await connect(flags, config);
  const timeFormat = flags.output.timeFormat ?? 'unix';
  const layout =
    columns.length === 1
      ? verdictLayout(source.header, timeFormat)
      : verdictLayoutPerColumn(
          source.header,
          columns.map((c) => source.header[c]),
          timeFormat,
        );
  const perRow = perRowVerdicts(columns);
  try {
    return await withRunOutput(layout, 'optout-check', true, flags.output, deps, async (sink, progress) => {
      const client = connection.client;
      let done = 0;
      const checked = await checkRawUidRows(perRow.cellsOf(source.rows()), {
        column: perRow.column,
        check: connection.check,
        concurrency: connection.concurrency,
        ...(deps.signal !== undefined ? { signal: deps.signal } : {}),
        onRows: async (rows) => {
          const cells: string[][] = [];
          for (const { row, verdicts } of perRow.rowsOf(rows)) {
            if (flags.onlyOptedOut && !verdicts.some((v) => v.kind === 'opted_out')) continue;
            cells.push(
              layout.place(
                row.cells,
                verdicts.flatMap((v) => verdictCells(v, timeFormat)),
              ),
            );
          }
          await sink.writeRows(cells);
          done += rows.length / columns.length;
          progress.update({ done, retries: client.stats.retries, http429: client.stats.http429 });
        },
      });
      progress.stop();
      // the counts are of raw UIDs (one per column of each row); rows are the input's
      const result = {
        ...checked,
        counts: { ...checked.counts, rows: Math.floor(checked.counts.rows / columns.length) },
      };
      const summary = optoutSummary('optout-check', result, client, startedMs, deps.now(), {
        ...(columns.length > 1 ? { raw_uid_columns: columns.map((c) => source.header[c]) } : {}),
        ...(source.problems().badRows !== undefined ? { bad_rows: source.problems().badRows } : {}),
      });
      return await finishOptout(result, summary, sink, flags, deps, say, undefined, badRows);
    });
  } finally {
    await connection.close();
  }
}

/** The raw-UID columns: each --col by name, or the one column named like a raw UID; a column named twice is refused. */
function rawUidColumns(header: readonly string[], cols: readonly string[] | undefined, source: string): number[] {
  const wanted = cols === undefined || cols.length === 0 ? [undefined] : cols;
  const indexes: number[] = [];
  for (const col of wanted) {
    const column = pickRawUidColumn(header, col);
    if (!column.ok) throw new UserError(`${source}: ${column.message}`);
    if (indexes.includes(column.index))
      throw new UserError(`--col '${header[column.index]}' is named twice: give each column once`);
    indexes.push(column.index);
  }
  return indexes;
}

/** A row of the input as the checker sees it: one raw-UID cell of it. */
type ColumnCell = InputRow & { source: InputRow };

/**
 * Checking several raw-UID columns of a row with the one-column checker: each input row goes in as one row per
 * column (holding that column's cell), and the verdicts come back in input order, so consecutive verdicts
 * regroup into the rows they came from.
 */
function perRowVerdicts(columns: readonly number[]): {
  column: number;
  cellsOf(rows: AsyncIterable<InputRow[]>): AsyncIterable<InputRow[]>;
  rowsOf(checked: readonly CheckedRow[]): { row: InputRow; verdicts: RawUidVerdict[] }[];
} {
  if (columns.length === 1) {
    return {
      column: columns[0],
      cellsOf: (rows) => rows,
      rowsOf: (checked) => checked.map(({ row, verdict }) => ({ row, verdicts: [verdict] })),
    };
  }
  let pending: RawUidVerdict[] = [];
  return {
    column: 0,
    async *cellsOf(rows) {
      for await (const chunk of rows) {
        const split: ColumnCell[] = [];
        for (const row of chunk) {
          for (const c of columns) split.push({ ...row, cells: [row.cells[c] ?? ''], source: row });
        }
        yield split;
      }
    },
    rowsOf(checked) {
      const out: { row: InputRow; verdicts: RawUidVerdict[] }[] = [];
      for (const { row, verdict } of checked) {
        pending.push(verdict);
        if (pending.length === columns.length) {
          out.push({ row: (row as ColumnCell).source, verdicts: pending });
          pending = [];
        }
      }
      return out;
    },
  };
}

/** Output columns for several raw-UID columns: the input's, then `<column>_opted_out`, ... per column. */
function verdictLayoutPerColumn(
  inputHeader: readonly string[],
  names: readonly string[],
  timeFormat: TimeFormat,
): TypedHeader & { place(cells: readonly string[], verdicts: readonly string[]): string[] } {
  const verdict = verdictTypes(timeFormat);
  return {
    header: resultHeader(
      inputHeader,
      names.map((name) => ({ name })),
      VERDICT_COLUMNS,
    ),
    types: [...inputHeader.map((): ColumnType => 'input'), ...names.flatMap(() => verdict)],
    place: (cells, verdicts) => [...cells, ...verdicts],
  };
}

/**
 * Output columns: the input's, then opted_out, opted_out_since, reason (typed as the verdicts are, see
 * verdictTypes). Checking an earlier output of optout-check again writes over its verdict columns instead of adding
 * a second set; any other input column that has a verdict column's name (map's own `reason`) is kept, and the
 * verdict column is named with `_2` (`reason_2`), so no two columns share a name.
 */
export function verdictLayout(
  inputHeader: readonly string[],
  timeFormat: TimeFormat = 'unix',
): TypedHeader & { place(cells: readonly string[], verdict: readonly string[]): string[] } {
  // the verdict columns of an earlier check: opted_out, opted_out_since and its reason (maybe reason_2), in a row
  const first = inputHeader.indexOf(VERDICT_COLUMNS[0]);
  const earlierCheck =
    first >= 0 && inputHeader[first + 1] === VERDICT_COLUMNS[1] && /^reason(_\d+)?$/.test(inputHeader[first + 2] ?? '');
  const header = [...inputHeader];
  const taken = new Set(header);
  const slots = VERDICT_COLUMNS.map((name, k) => {
    if (earlierCheck) return first + k;
    let unique: string = name;
    for (let n = 2; taken.has(unique); n++) unique = `${name}_${n}`;
    taken.add(unique);
    return header.push(unique) - 1;
  });
  const types: TypedHeader['types'] = header.map(() => 'input');
  const verdict = verdictTypes(timeFormat);
  for (let k = 0; k < slots.length; k++) types[slots[k]] = verdict[k];
  return {
    header,
    types,
    place(cells, verdict) {
      const out = cells.slice();
      for (let k = 0; k < slots.length; k++) out[slots[k]] = verdict[k];
      return out;
    },
  };
}

function chooseInput(input: string | undefined, stdin: { isTTY?: boolean }): string {
  if (input !== undefined && input !== '') return input;
  if (stdin.isTTY) {
    throw new UserError(
      'no input: give a CSV, JSONL or Parquet file of raw UIDs (uid2-batch optout-check FILE), pipe one in (... | uid2-batch optout-check -), or use --state FILE',
    );
  }
  return '-';
}

export function optoutSummary(
  command: string,
  result: OptoutResult,
  client: ServiceClient,
  startedMs: number,
  endedMs: number,
  extra: Record<string, unknown> = {},
): RunSummary {
  const c: OptoutCounts = result.counts;
  return makeSummary({
    command,
    rows: c.rows,
    status: {
      optout: c.status.opted_out,
      invalid: c.status.invalid,
      error: c.status.error,
      ...(c.status.missing > 0 ? { missing: c.status.missing } : {}),
    },
    ...requestCounters(client.stats),
    startedMs,
    endedMs,
    extra: {
      outcome: result.outcome.kind,
      opted_out: c.status.opted_out,
      not_opted_out: c.status.not_opted_out,
      raw_uids_sent: c.sent,
      batches: c.batches,
      batches_failed: c.batchesFailed,
      ...extra,
    },
  });
}

/** `optout-check: 10,000 rows in 1.2 s: 12 opted out, 9,980 not, 8 invalid, 0 error; 2 requests, 0 retries` (`, 3 missing` after invalid when any cell was empty) */
export function formatOptoutSummary(s: RunSummary): string {
  const num = (k: string): number => (typeof s[k] === 'number' ? (s[k] as number) : 0);
  return (
    `${s.command}: ${formatCount(s.rows)} ${s.state_file !== undefined ? 'raw UIDs' : 'rows'} in ${formatDuration(s.duration_s)}: ` +
    `${formatCount(num('opted_out'))} opted out, ${formatCount(num('not_opted_out'))} not, ${formatCount(s.status.invalid)} invalid, ${s.status.missing ? `${formatCount(s.status.missing)} missing, ` : ''}${formatCount(s.status.error)} error; ` +
    `${formatCount(s.requests)} requests, ${formatCount(s.retries)} retries` +
    (typeof s.tombstoned === 'number' ? `; ${formatCount(s.tombstoned)} entries tombstoned` : '')
  );
}

/**
 * Commits or abandons the output by outcome, reports, and picks the exit code. Only a completed run writes its
 * output; with `delivery` (--state), the opt-outs it holds are delivered with its rename, and a stopped run's wait in
 * the state file for the next completed run.
 */
export async function finishOptout(
  result: OptoutResult,
  summary: RunSummary,
  sink: TableSink,
  flags: OptoutCheckFlags,
  deps: OptoutCheckDeps,
  say: Say,
  delivery?: ChangeDelivery,
  badRows?: BadRowsOutput,
): Promise<number> {
  const { outcome } = result;
  const keep = outcome.kind === 'completed';
  // the --bad-rows list is kept only with a completed run, and then renamed together with the output
  if (!keep) await badRows?.abort();
  await reportRun(
    sink,
    keep,
    formatOptoutSummary(summary),
    summary,
    flags.output,
    deps,
    [badRows],
    delivery !== undefined ? { ...delivery, say } : undefined,
  );
  const output = flags.output.output;
  switch (outcome.kind) {
    case 'completed':
      if (result.counts.status.error === 0) return EXIT.ok;
      say(
        `${formatCount(result.counts.status.error)} raw UID(s) could not be checked (${result.batchErrors.join('; ')}); run again to check them`,
      );
      return EXIT.partial;
    case 'interrupted':
      say(
        `interrupted: ${output !== undefined && output !== '-' ? `${output} was not written` : 'the rows on stdout are incomplete'}` +
          (delivery !== undefined ? '; the opt-outs found wait in the state file for the next completed run' : ''),
      );
      return EXIT.interrupted;
    case 'auth-refused':
      throw outcome.error;
    case 'failed':
      throw outcome.error;
  }
}

/**
 * Columns of `optout-check --state`: one row per raw UID checked, the entry named by hash_type and hash as `map
 * --emit-hash` and the remap-due changes file name it.
 */
export const SWEEP_HEADER = ['hash_type', 'hash', 'raw_uid', 'which', ...VERDICT_COLUMNS] as const;

export function sweepColumns(timeFormat: TimeFormat = 'unix'): TypedHeader {
  return { header: [...SWEEP_HEADER], types: ['string', 'string', 'string', 'string', ...verdictTypes(timeFormat)] };
}

export function sweptCells(
  row: SweptRawUid,
  timeFormat: TimeFormat = 'unix',
  hashEncoding: HashEncoding = 'base64',
): string[] {
  return [
    row.entry.type,
    hashCell(row.entry.hash, hashEncoding),
    row.rawUid,
    row.which,
    ...verdictCells(row.verdict, timeFormat),
  ];
}

/** optout-check --state FILE: sweeps the stored raw UIDs, tombstones what opted out, records each check. */
async function runStateSweep(
  path: string,
  resolved: ResolvedConfig,
  flags: OptoutCheckFlags,
  deps: OptoutCheckDeps,
  say: Say,
  startedMs: number,
): Promise<number> {
  const state = openState(path, { envFingerprint: envFingerprint(resolved), create: false });
  try {
    // tombstones and check times are written: a remap-due at the same time must wait
    await state.waitForLock((flags.wait ?? 0) * 1000);
    const nowS = Math.floor(startedMs / 1000);
    const connection = await connect(flags, resolved);
    const runId = state.startRun(
      'optout-check',
      JSON.stringify({
        sweep_fraction: flags.sweepFraction ?? 1,
        private_operator: flags.privateOperator,
        output: flags.output.output ?? '-',
      }),
      nowS,
    );
    try {
      const timeFormat = flags.output.timeFormat ?? 'unix';
      const cellsOf = (row: SweptRawUid): string[] => sweptCells(row, timeFormat, flags.output.hashEncoding);
      return await withRunOutput(
        sweepColumns(timeFormat),
        'optout-check',
        true,
        flags.output,
        deps,
        async (sink, progress) => {
          const client = connection.client;
          let done = 0;
          const replayed = await replaySweepOptouts(state, (rows) => sink.writeRows(rows.map(cellsOf)));
          if (replayed > 0) say(replayedLine(replayed));
          const result = await sweepStateOptouts({
            state,
            nowS,
            journal: { runId, state },
            check: connection.check,
            concurrency: connection.concurrency,
            ...(flags.sweepFraction !== undefined ? { fraction: flags.sweepFraction } : {}),
            ...(deps.signal !== undefined ? { signal: deps.signal } : {}),
            onChecked: async (rows) => {
              const cells = (flags.onlyOptedOut ? rows.filter((r) => r.verdict.kind === 'opted_out') : rows).map(
                cellsOf,
              );
              await sink.writeRows(cells);
              done += rows.length;
              progress.update({ done, retries: client.stats.retries, http429: client.stats.http429 });
            },
          });
          progress.stop();
          const c = result.counts;
          const summary = optoutSummary('optout-check', result, client, startedMs, deps.now(), {
            state_file: path,
            entries_planned: c.planned,
            entries_checked: c.entries,
            tombstoned: c.tombstoned,
            ...(replayed > 0 ? { replayed_changes: replayed } : {}),
          });
          state.finishRun(runId, JSON.stringify(summary), exitCodeOf(result), nowS);
          if (c.planned === 0) say(`${path} holds no entry with a raw UID: nothing to check`);
          return await finishOptout(result, summary, sink, flags, deps, say, {
            state,
            kind: 'optout',
            replayed,
            upTo: result.journalUpTo,
          });
        },
      );
    } finally {
      await connection.close();
    }
  } finally {
    state.close();
  }
}
