/** Records that cannot be read (--on-bad-row skip): skipped, said, listed in --bad-rows and counted. */
import { openSink } from '../io/output/sink.js';
import type { BadRecord, PreparedOutput, TableSink } from '../io/table.js';
import { EXIT } from './exit-codes.js';
import { formatCount } from './summary.js';

export interface BadRowFlags {
  /** fail (default): the first record that cannot be read ends the run, as before. skip: it is skipped and listed. */
  onBadRow: 'fail' | 'skip';
  /** With skip: the file that lists the skipped records (file, line, reason). */
  badRows?: string;
}

/** The columns of the --bad-rows file. */
export const BAD_ROW_COLUMNS = ['file', 'line', 'reason'] as const;

/** Without a --bad-rows file there is nothing to rename. */
const NOTHING_TO_PUBLISH: PreparedOutput = { publish: async () => undefined, discard: async () => undefined };

/** Skipped records said on stderr one by one, before the rest are only counted. */
const SAID_AT_MOST = 5;

/**
 * Where the skipped records of one run go: each is said on stderr (the first few; only file, line and reason, never
 * the record's content, which may hold an email) and written to --bad-rows, which like every output is a private
 * temp file renamed into place when the run completes.
 */
export class BadRowsOutput {
  count = 0;
  private pending: string[][] = [];
  private writing: Promise<void> = Promise.resolve();
  private failure: unknown;
  /** Committed or aborted. */
  private settled = false;

  private constructor(
    private readonly sink: TableSink | undefined,
    private readonly path: string | undefined,
    private readonly say: (line: string) => void,
  ) {}

  /** Opens the --bad-rows file, if one was asked for; undefined when records are not skipped. */
  static async open(flags: BadRowFlags, say: (line: string) => void): Promise<BadRowsOutput | undefined> {
    if (flags.onBadRow !== 'skip') return undefined;
    const path = flags.badRows;
    const sink =
      path === undefined
        ? undefined
        : await openSink({
            path,
            format: /\.(jsonl|ndjson)(\.gz)?$/i.test(path) ? 'jsonl' : 'csv',
            header: [...BAD_ROW_COLUMNS],
          });
    return new BadRowsOutput(sink, path, say);
  }

  /** For the source's onBadRecord: called as records are read, so it only queues the write. */
  readonly record = (bad: BadRecord): void => {
    this.count++;
    if (this.count <= SAID_AT_MOST) this.say(`${bad.file}: line ${bad.line}: ${bad.reason}; skipped`);
    if (this.sink === undefined) return;
    this.pending.push([bad.file, String(bad.line), bad.reason]);
    if (this.pending.length === 1) {
      const sink = this.sink;
      this.writing = this.writing.then(async () => {
        const rows = this.pending;
        this.pending = [];
        if (this.failure === undefined) await sink.writeRows(rows).catch((err: unknown) => (this.failure = err));
      });
    }
  };

  /** The lines that end the run's report on stderr. */
  closingLines(): string[] {
    if (this.count === 0) return [];
    const where =
      this.path !== undefined ? `listed in ${this.path}` : 'add --bad-rows FILE to list them (file, line, reason)';
    return [`${formatCount(this.count)} record(s) could not be read and were skipped (--on-bad-row skip): ${where}`];
  }

  /**
   * After the run that ended with `code` (a run that throws aborts the list instead): the list is kept when the
   * run's outputs are (it completed, maybe with rows in error) and dropped otherwise; the closing lines are said;
   * the exit code says whether records were skipped.
   */
  async end(code: number): Promise<number> {
    if (code === EXIT.ok || code === EXIT.partial) await this.commit();
    else await this.abort();
    for (const line of this.closingLines()) this.say(line);
    return this.exitCode(code);
  }

  /** Exit code 9 when records were skipped from an otherwise successful run. */
  exitCode(code: number): number {
    return code === EXIT.ok && this.count > 0 ? EXIT.skipped : code;
  }

  /** Renames the list into place; a second commit or abort (the run's end already settled it) does nothing. */
  async commit(): Promise<void> {
    if (this.settled) return;
    await (await this.prepareCommit()).publish();
  }

  /** The list complete beside its target, to be renamed together with the run's other outputs (commitTogether). */
  async prepareCommit(): Promise<PreparedOutput> {
    if (this.settled) return NOTHING_TO_PUBLISH;
    this.settled = true;
    await this.writing;
    if (this.failure !== undefined) {
      await this.sink?.abort();
      throw this.failure;
    }
    if (this.sink === undefined) return NOTHING_TO_PUBLISH;
    if (this.sink.prepareCommit !== undefined) return this.sink.prepareCommit();
    await this.sink.commit();
    return NOTHING_TO_PUBLISH;
  }

  async abort(): Promise<void> {
    if (this.settled) return;
    this.settled = true;
    await this.writing;
    await this.sink?.abort();
  }
}
