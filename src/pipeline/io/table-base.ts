/** What the CSV and JSONL tables share: rows handed out in chunks as they are parsed, and ragged-row counts. */
import type { ByteInput } from './byte-input.js';
import type { InputRow, SourceProblemCounts, TableSource } from './table.js';

export abstract class TableBase implements TableSource {
  header: string[] = [];
  notes: string[] = [];
  readonly name: string;
  readonly totalBytes: number | undefined;
  protected ready: InputRow[] = [];
  protected ended = false;
  protected readonly counts: SourceProblemCounts = { shortRows: 0, longRows: 0, extraKeys: 0 };
  private iterated = false;

  constructor(
    protected readonly input: ByteInput,
    protected readonly chunkRows: number,
  ) {
    this.name = input.name;
    this.totalBytes = input.totalBytes;
  }

  abstract open(): Promise<void>;
  /** Reads and parses one more piece of input into `ready`; sets `ended` at the end. */
  protected abstract pump(): Promise<void>;

  bytesRead(): number {
    return this.input.bytesRead();
  }

  close(): void {
    this.input.close();
  }

  problems(): SourceProblemCounts {
    return { ...this.counts };
  }

  rows(): AsyncIterable<InputRow[]> {
    if (this.iterated) throw new Error(`${this.name}: rows() can be iterated only once`);
    this.iterated = true;
    return this.chunks();
  }

  private async *chunks(): AsyncGenerator<InputRow[]> {
    try {
      for (;;) {
        while (this.ready.length < this.chunkRows && !this.ended) await this.pump();
        if (this.ready.length === 0) return;
        if (this.ready.length <= this.chunkRows) {
          const out = this.ready;
          this.ready = [];
          yield out;
        } else {
          yield this.ready.splice(0, this.chunkRows);
        }
      }
    } finally {
      this.input.close();
    }
  }
}
