/** A map run's outputs, settled once: the -o file or the parts of --output-dir, --rejects, --bad-rows, the summary. */
import { commitTogether } from '../io/output/commit-together.js';
import { openSink } from '../io/output/sink.js';
import type { TableInfo, TableSink } from '../io/table.js';
import type { ColumnType } from '../io/typed-cells.js';
import { sinkCompression, type OutputCompression, type OutputFlags, type OutputFormat } from '../run/output-options.js';
import type { BadRowFlags } from '../run/bad-rows-output.js';
import { outputBytes } from '../run/run-report.js';
import { printSummary, writeSummaryJson, type RunSummary } from '../run/summary.js';
import { partsShare, type Shard } from '../shard/shard-spec.js';
import { partSinks } from './output-dir-sinks.js';

/** Where a map run's rows and figures go, decided before the input is opened. */
export interface OutputSpec {
  /** -o: a file or an s3:// URI; absent or '-': stdout. */
  readonly path: string | undefined;
  readonly format: OutputFormat;
  /** --compress; absent: gzip when the path ends in .gz. */
  readonly compress: OutputCompression | undefined;
  /** --output-dir: one output per input part, at `paths` (in the parts' order), instead of -o. */
  readonly outputDir: { readonly dir: string; readonly paths: readonly string[] } | undefined;
  /** Under --shard with several parts: whether a part's output is this runner's to write. */
  readonly ownPart: ((index: number) => boolean) | undefined;
  readonly rejects: string | undefined;
  /** Only the first runner under --shard writes the header row, so the runners' outputs put end to end are one. */
  readonly headerLine: boolean;
  /** --on-bad-row and --bad-rows: a dry run skips as asked but writes no --bad-rows file. */
  readonly badRows: BadRowFlags;
  readonly quiet: boolean;
  readonly summaryJson: string | undefined;
}

/** Settles the outputs from what was asked; `parts` is the number of input parts, for --output-dir under --shard. */
export function settleOutputs(
  asked: Partial<BadRowFlags> & {
    output: OutputFlags;
    outputDir?: { dir: string; paths: string[] } | undefined;
    rejects?: string | undefined;
    shard?: Shard | undefined;
    dryRun?: boolean | undefined;
  },
  parts: number,
): OutputSpec {
  const { output, outputDir, rejects, shard } = asked;
  return {
    path: output.output,
    format: output.format,
    compress: output.compress,
    outputDir,
    ownPart: shard !== undefined && outputDir !== undefined ? partsShare(parts, shard) : undefined,
    rejects,
    headerLine: shard === undefined || shard.index === 1,
    badRows: {
      onBadRow: asked.onBadRow ?? 'fail',
      ...(asked.badRows !== undefined && asked.dryRun !== true ? { badRows: asked.badRows } : {}),
    },
    quiet: output.quiet === true,
    summaryJson: output.summaryJson,
  };
}

/** The run's row outputs, open: the output (or the parts' outputs) and --rejects. */
export interface OpenOutputs {
  sink: TableSink;
  rejects: TableSink | undefined;
}

/** Where the run writes, besides its spec: the columns, the input (for --output-dir's parts), stdout, encoders. */
export interface OutputOpening {
  header: string[];
  types: readonly ColumnType[];
  source: TableInfo;
  stdout: NodeJS.WritableStream;
  /** Encoder threads of the sink (the run's plan); 0: encoded on this thread or by the row threads. */
  encoderThreads: number;
}

/** Opens the output, then --rejects (in the output's format: a row is encoded once for both); a failure closes both. */
export async function openOutputs(spec: OutputSpec, at: OutputOpening): Promise<OpenOutputs> {
  const { header, types } = at;
  const headerLine = spec.headerLine ? {} : { headerLine: false };
  const sink =
    spec.outputDir !== undefined
      ? partSinks(spec.outputDir.paths, at.source, header, types, spec.ownPart)
      : await openSink({
          path: spec.path,
          format: spec.format,
          ...sinkCompression(spec),
          header,
          types,
          stream: at.stdout,
          threads: at.encoderThreads,
          ...headerLine,
        });
  if (spec.rejects === undefined) return { sink, rejects: undefined };
  try {
    return { sink, rejects: await openSink({ path: spec.rejects, format: spec.format, header, types, ...headerLine }) };
  } catch (err) {
    await sink.abort();
    throw err;
  }
}

/** The output of an input with no columns: empty too, written whole. */
export async function writeEmptyOutput(spec: OutputSpec, stdout: NodeJS.WritableStream): Promise<void> {
  const sink = await openSink({
    path: spec.path,
    format: spec.format,
    ...sinkCompression(spec),
    header: [],
    stream: stdout,
  });
  await sink.commit();
}

/** The outputs of a completed run replace their targets together; a run that did not complete removes them all. */
export async function settleWritten(
  spec: OutputSpec,
  outputs: OpenOutputs,
  others: readonly ({ commit(): Promise<void>; abort(): Promise<void> } | undefined)[],
  completed: boolean,
  summary: RunSummary,
): Promise<void> {
  if (completed) {
    await commitTogether([outputs.sink, outputs.rejects, ...others]);
    Object.assign(summary, outputBytes(spec.path));
    return;
  }
  await outputs.rejects?.abort();
  await outputs.sink.abort();
  for (const other of others) await other?.abort();
}

/** The summary on stderr (unless --quiet) and in --summary-json. */
export async function reportSummary(
  spec: OutputSpec,
  summary: RunSummary,
  stderr: NodeJS.WritableStream,
): Promise<void> {
  if (!spec.quiet) printSummary(summary, stderr);
  if (spec.summaryJson !== undefined) await writeSummaryJson(spec.summaryJson, summary);
}

/** What a run that did not complete says of its output. */
export function notWritten(spec: OutputSpec): string {
  if (spec.path !== undefined) return `${spec.path} was not written`;
  if (spec.outputDir !== undefined) return `no output in ${spec.outputDir.dir} was written`;
  return 'the rows on stdout are incomplete';
}
