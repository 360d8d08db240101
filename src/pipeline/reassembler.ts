import type { RowChunk } from './row-chunk.js';

/**
 * The reassembly window: chunks in input order, each waiting until all its identifier cells are answered.
 * Rows leave in input order, so a chunk leaves only once every chunk before it has. The count of rows in the
 * window is what the engine bounds for backpressure.
 */
export class Reassembler {
  private queue: RowChunk[] = [];
  private head = 0;
  /** Rows in the window (read, not yet handed to the sink). */
  pendingRows = 0;

  push(chunk: RowChunk): void {
    this.queue.push(chunk);
    this.pendingRows += chunk.rows.length;
  }

  get pendingChunks(): number {
    return this.queue.length - this.head;
  }

  /** Takes the chunks at the front of the window that are fully answered, in input order. */
  takeReady(): RowChunk[] {
    const ready: RowChunk[] = [];
    while (this.head < this.queue.length && this.queue[this.head].unanswered === 0) {
      const chunk = this.queue[this.head++];
      this.pendingRows -= chunk.rows.length;
      ready.push(chunk);
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    return ready;
  }
}
