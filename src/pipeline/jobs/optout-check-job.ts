/** A whole optout-check run: the raw UIDs of input files, or of a state file, checked for opt-outs. */
import { strandedChangeLines } from '../run/stranded-changes.js';
import { ownsKey } from '../shard/shard-keys.js';
import type { Shard } from '../shard/shard-spec.js';
import type { StateBackend } from '../../state/backend.js';
import { openState, type StateStore } from '../../state/index.js';
import { lockForSweep } from '../run/lock-wait.js';
import { describeState, isPostgresState, openStateBackend } from '../../state/open-backend.js';
import { closeOnFailure } from '../io/close-on-failure.js';
import { hashCell, type HashEncoding } from '../io/output/hash-cells.js';
import { requireTextColumns } from '../io/parquet/parquet-columns.js';
import { openInput, settleInput, type InputReading, type InputSpec } from './run-input.js';
import type { InputRow, TableSink, TableSource } from '../io/table.js';
import type { ColumnType, TimeFormat, TypedHeader } from '../io/typed-cells.js';
import { resultHeader } from '../map/identifier-columns.js';
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
  type SweepResult,
  type SweptRawUid,
} from '../optout/optout-sweep.js';
import { BadRowsOutput, type BadRowFlags } from '../run/bad-rows-output.js';
import { runBatchCommand, type BatchPlan } from '../run/batch-run.js';
import { changeChannel } from '../run/change-journal.js';
import type { ServiceClient, ServiceTarget } from '../run/connection.js';
import { EXIT, UserError } from '../run/exit-codes.js';
import type { OutputFlags } from '../run/output-options.js';
import { sayTo, type InputRunDeps, type RunDeps, type Say } from '../run/run-deps.js';
import { reportRun, requestCounters, type ChangeDelivery } from '../run/run-report.js';
import { formatCount, formatDuration, makeSummary, type RunSummary } from '../run/summary.js';

/** What an optout-check run is asked to do, checked: input files, or a state file to sweep. */
export interface OptoutCheckOptions extends Partial<BadRowFlags> {
  /** The input files (a '-' reads stdin); empty with `state`. */
  inputs: string[];
  /** --col, repeatable: every column named is checked. */
  cols?: string[] | undefined;
  /** How the files are read: format, header, delimiter, encoding. */
  reading: InputReading;
  onlyOptedOut: boolean;
  state?: string | undefined;
  sweepFraction?: number | undefined;
  /** --shard K/N with --state: check only the entries whose key falls to runner K. */
  shard?: Shard | undefined;
  privateOperator: boolean;
  concurrency?: number | undefined;
  /** --wait with --state: seconds to wait for another run's lock on the state file (absent: fail at once). */
  wait?: number | undefined;
  output: OutputFlags;
}

const DEFAULT_PRIVATE_CONCURRENCY = 4;

/** `optout-check`: returns the exit code (0, 3 some batches failed, 130 interrupted); throws for the rest. */
export async function runOptoutCheckJob(
  options: OptoutCheckOptions,
  target: ServiceTarget,
  deps: InputRunDeps,
  startedMs: number,
): Promise<number> {
  const say = sayTo(options.output, deps);
  if (options.state !== undefined) return runStateSweep(options.state, target, options, deps, say, startedMs);
  const badRows = await BadRowsOutput.open(
    { onBadRow: options.onBadRow ?? 'fail', ...(options.badRows !== undefined ? { badRows: options.badRows } : {}) },
    say,
  );
  let code: number;
  try {
    // settled once, as map's is: s3:// patterns listed, the format resolved, the reading's defaults filled in
    const input = await settleInput(options.inputs, options.reading);
    code = await checkFile(input, options, deps, target, badRows, startedMs);
  } catch (err) {
    await badRows?.abort();
    throw err;
  }
  return badRows === undefined ? code : badRows.end(code);
}

/** Requests in flight: one on one socket, the public service's rule for this endpoint, unless a private operator. */
function optoutConcurrency(options: OptoutCheckOptions): number {
  return options.privateOperator ? (options.concurrency ?? DEFAULT_PRIVATE_CONCURRENCY) : 1;
}

function optoutCheckOf(client: ServiceClient): OptoutStatusFn {
  return (ids, signal) => client.optoutStatus(ids, { signal });
}

/** optout-check of input files: the verdict of every raw UID of the given column(s). */
async function checkFile(
  input: InputSpec,
  options: OptoutCheckOptions,
  deps: InputRunDeps,
  target: ServiceTarget,
  badRows: BadRowsOutput | undefined,
  startedMs: number,
): Promise<number> {
  // raw UIDs are read as parsed rows on this thread: no row threads, and no headerless guess
  const source = (await openInput(input, {
    stdin: deps.stdin,
    onBadRecord: badRows?.record,
    signal: deps.signal,
    rowThreads: 0,
    findHeaderless: false,
  })) as TableSource;
  return closeOnFailure(source, () => checkSource(source, options, deps, target, startedMs, badRows));
}

async function checkSource(
  source: TableSource,
  options: OptoutCheckOptions,
  deps: InputRunDeps,
  target: ServiceTarget,
  startedMs: number,
  badRows: BadRowsOutput | undefined,
): Promise<number> {
  const say = sayTo(options.output, deps);
  for (const line of source.notes) say(line);
  const columns = rawUidColumns(source.header, options.cols, source.name);
  requireTextColumns(
    source,
    columns.map((c) => source.header[c]),
  );

  const timeFormat = options.output.timeFormat ?? 'unix';
  const layout =
    columns.length === 1
      ? verdictLayout(source.header, timeFormat)
      : verdictLayoutPerColumn(
          source.header,
          columns.map((c) => source.header[c]),
          timeFormat,
        );
  const perRow = perRowVerdicts(columns);
  const concurrency = optoutConcurrency(options);
  return runBatchCommand(
    {
      openState: () => undefined,
      plan: (): BatchPlan<OptoutResult> => ({
        command: 'optout-check',
        target,
        connection: { kind: 'plain', connections: concurrency },
        output: { columns: layout, options: options.output, progressLabel: 'optout-check', cron: true },
        engine: async ({ client, sink, progress }) => {
          let done = 0;
          const checked = await checkRawUidRows(perRow.cellsOf(source.rows()), {
            column: perRow.column,
            check: optoutCheckOf(client),
            concurrency,
            ...(deps.signal !== undefined ? { signal: deps.signal } : {}),
            onRows: async (rows) => {
              const cells: string[][] = [];
              for (const { row, verdicts } of perRow.rowsOf(rows)) {
                if (options.onlyOptedOut && !verdicts.some((v) => v.kind === 'opted_out')) continue;
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
          // the counts are of raw UIDs (one per column of each row); rows are the input's
          return { ...checked, counts: { ...checked.counts, rows: Math.floor(checked.counts.rows / columns.length) } };
        },
        summary: (result, { client }) =>
          optoutSummary('optout-check', result, client, startedMs, deps.now(), {
            ...(columns.length > 1 ? { raw_uid_columns: columns.map((c) => source.header[c]) } : {}),
            ...(source.problems().badRows !== undefined ? { bad_rows: source.problems().badRows } : {}),
          }),
        finish: (result, summary, { sink }) =>
          finishOptout(result, summary, sink, options, deps, say, undefined, badRows),
      }),
    },
    deps,
  );
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
  options: OptoutCheckOptions,
  deps: RunDeps,
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
    options.output,
    deps,
    [badRows],
    delivery !== undefined ? { ...delivery, say } : undefined,
  );
  const output = options.output.output;
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
function runStateSweep(
  path: string,
  target: ServiceTarget,
  options: OptoutCheckOptions,
  deps: RunDeps,
  say: Say,
  startedMs: number,
): Promise<number> {
  const nowS = Math.floor(startedMs / 1000);
  const timeFormat = options.output.timeFormat ?? 'unix';
  const cellsOf = (row: SweptRawUid): string[] => sweptCells(row, timeFormat, options.output.hashEncoding);
  return runBatchCommand<SweepResult, StateStore | StateBackend>(
    {
      openState: () =>
        isPostgresState(path)
          ? openStateBackend(path, { envFingerprint: target.envFingerprint, create: false })
          : openState(path, { envFingerprint: target.envFingerprint, create: false }),
      plan: async (state): Promise<BatchPlan<SweepResult>> => {
        // tombstones and check times are written: a remap-due at the same time must wait; on a database, another
        // sweep of the same share
        await lockForSweep(state, 'optout-check', options.shard, options.wait);
        // a runner delivers its own share's opt-outs only: runners at once never write or acknowledge each other's
        const channel = changeChannel('optout', options.shard);
        for (const line of strandedChangeLines(await state.pendingChangeCounts(), channel)) say(line);
        let planned = 0;
        return {
          command: 'optout-check',
          target,
          connection: { kind: 'plain', connections: optoutConcurrency(options) },
          record: {
            args: {
              sweep_fraction: options.sweepFraction ?? 1,
              private_operator: options.privateOperator,
              output: options.output.output ?? '-',
            },
            startS: nowS,
            endS: () => nowS,
          },
          output: {
            columns: sweepColumns(timeFormat),
            options: options.output,
            progressLabel: 'optout-check',
            cron: true,
          },
          replay: (sink) => replaySweepOptouts(state, channel, (rows) => sink.writeRows(rows.map(cellsOf))),
          engine: async ({ client, sink, progress, runId }) => {
            let done = 0;
            const result = await sweepStateOptouts({
              state,
              nowS,
              journal: { runId, channel, state },
              check: optoutCheckOf(client),
              concurrency: optoutConcurrency(options),
              ...(options.sweepFraction !== undefined ? { fraction: options.sweepFraction } : {}),
              ...(options.shard !== undefined ? { share: (e) => ownsKey(options.shard as Shard, e.type, e.hash) } : {}),
              ...(deps.signal !== undefined ? { signal: deps.signal } : {}),
              onChecked: async (rows) => {
                const cells = (options.onlyOptedOut ? rows.filter((r) => r.verdict.kind === 'opted_out') : rows).map(
                  cellsOf,
                );
                await sink.writeRows(cells);
                done += rows.length;
                progress.update({ done, retries: client.stats.retries, http429: client.stats.http429 });
              },
            });
            planned = result.counts.planned;
            return result;
          },
          summary: (result, { client, replayed }) => {
            const c = result.counts;
            return optoutSummary('optout-check', result, client, startedMs, deps.now(), {
              state_file: describeState(path),
              entries_planned: c.planned,
              entries_checked: c.entries,
              tombstoned: c.tombstoned,
              ...(replayed > 0 ? { replayed_changes: replayed } : {}),
            });
          },
          finish: (result, summary, { sink, replayed }) => {
            if (planned === 0) say(`${describeState(path)} holds no entry with a raw UID: nothing to check`);
            return finishOptout(result, summary, sink, options, deps, say, {
              state,
              channel,
              replayed,
              upTo: result.journalUpTo,
            });
          },
        };
      },
    },
    deps,
  );
}
