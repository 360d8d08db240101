import type { RowChunk } from './row-chunk.js';

/**
 * The reassembly window: chunks in input order, each waiting until all its identifier cells are answered.
 * Rows leave in input order, so a chunk leaves only once every chunk before it has. The count of rows in the
 * window is what the engine bounds for backpressure.
 */
export class Reassembler {
  private queue: (RowChunk | null)[] = [];
  private head = 0;
  /** Rows in the window (read, not yet handed to the sink). */
  pendingRows = 0;

  push(chunk: RowChunk): void {
    this.queue.push(chunk);
    this.pendingRows += chunk.rowCount;
  }

  get pendingChunks(): number {
    return this.queue.length - this.head;
  }

  /** Takes the chunks at the front of the window that are fully answered, in input order. */
  takeReady(): RowChunk[] {
    const ready: RowChunk[] = [];
    const queue = this.queue;
    while (this.head < queue.length && (queue[this.head] as RowChunk).unanswered === 0) {
      const chunk = queue[this.head] as RowChunk;
      // the window must not keep what has left it: rows are most of a run's memory
      queue[this.head++] = null;
      this.pendingRows -= chunk.rowCount;
      ready.push(chunk);
    }
    if (this.head >= 64 && this.head * 2 >= queue.length) {
      this.queue = queue.slice(this.head);
      this.head = 0;
    }
    return ready;
  }
}
