/** One output per input part (`--output-dir`): the rows of a run over many parts, cut back into their parts. */
import { openSink } from './sink.js';
import type { OpenSinkOptions, PreparedOutput, TableSink } from '../table.js';

/** How the output of one part is opened: its path, and its format and column types. */
export type PartSinkOptions = Omit<OpenSinkOptions, 'stream' | 'threads'> & { path: string };

/**
 * A sink that writes each part's rows to that part's own output. Rows arrive in reading order; `partEnds` (see
 * PartsSource) says, for the parts read to their end so far, how many rows were read up to the end of each, so
 * the rows up to that count go to that part. Each part's output is opened when its first row (or, for a part with
 * no rows, the next part's) arrives, and finished (complete and closed beside its target) as soon as its rows are
 * all written; commit renames them all into place together, abort removes them all. So at most one output is open
 * at a time, however many parts, and a run that fails in its last part replaces none of the outputs of the others.
 */
export class PartSinks implements TableSink {
  private part = 0;
  private written = 0;
  private current: TableSink | undefined;
  /** The parts' outputs finished so far, waiting beside their targets. */
  private readonly finished: PreparedOutput[] = [];

  constructor(
    private readonly outputs: readonly PartSinkOptions[],
    private readonly partEnds: () => readonly number[],
    /** Under --shard: whether a part is this runner's; another runner's part has no rows here and gets no output. */
    private readonly owned: (index: number) => boolean = () => true,
  ) {}

  /** How many part outputs are complete (in place once the run commits). */
  get completed(): number {
    return this.finished.length;
  }

  async writeRows(rows: string[][]): Promise<void> {
    let from = 0;
    while (from < rows.length) {
      await this.closeFinishedParts();
      const end = this.partEnds()[this.part] ?? Number.POSITIVE_INFINITY;
      const take = Math.min(rows.length - from, end - this.written);
      if (take <= 0) throw new Error('more rows were written than the parts hold');
      const sink = await this.sinkOfPart();
      await sink.writeRows(from === 0 && take === rows.length ? rows : rows.slice(from, from + take));
      from += take;
      this.written += take;
    }
  }

  writeEncoded(): Promise<void> {
    throw new Error('PartSinks takes rows, not encoded bytes: a run over many parts encodes on this thread');
  }

  /** Renames every part's output into place (parts with no rows get their header alone). */
  async commit(): Promise<void> {
    await (await this.prepareCommit()).publish();
  }

  /** Finishes the parts not yet finished; the result renames them all, or removes them all. */
  async prepareCommit(): Promise<PreparedOutput> {
    try {
      while (this.part < this.outputs.length) {
        if (this.owned(this.part)) await this.sinkOfPart();
        await this.finishPart();
      }
    } catch (err) {
      await this.abort();
      throw err;
    }
    const finished = this.finished.splice(0);
    return {
      async publish() {
        for (let i = 0; i < finished.length; i++) {
          try {
            await finished[i].publish();
          } catch (err) {
            for (const rest of finished.slice(i + 1)) await rest.discard();
            throw err;
          }
        }
      },
      async discard() {
        for (const part of finished) await part.discard();
      },
    };
  }

  async abort(): Promise<void> {
    const sink = this.current;
    this.current = undefined;
    await sink?.abort();
    for (const part of this.finished.splice(0)) await part.discard();
  }

  /** Finishes the parts whose rows are all written (known once the part after them has been read into). */
  private async closeFinishedParts(): Promise<void> {
    for (;;) {
      const end = this.partEnds()[this.part];
      if (end === undefined || this.written < end || this.part >= this.outputs.length - 1) return;
      if (this.owned(this.part)) await this.sinkOfPart();
      await this.finishPart();
    }
  }

  private async sinkOfPart(): Promise<TableSink> {
    if (this.current === undefined) this.current = await openSink(this.outputs[this.part]);
    return this.current;
  }

  private async finishPart(): Promise<void> {
    const sink = this.current;
    this.current = undefined;
    this.part++;
    if (sink === undefined) return;
    if (sink.prepareCommit === undefined) throw new Error('a part output is always a file');
    this.finished.push(await sink.prepareCommit());
  }
}
