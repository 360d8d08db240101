/** Drives parquet-wasm's streaming writer one record batch at a time, collecting the file's bytes as they come. */
import { type RecordBatch, transformParquetStream, type WriterProperties } from 'parquet-wasm';

/**
 * The writer reads batches from a stream and writes the file's bytes to another. Here it is given one batch at a
 * time: the input stream holds no queue (high-water mark 0), so the writer asks for the next batch only once it
 * has written what the last one completed; write() resolves then, with those bytes collected, so at most one
 * batch waits in WebAssembly memory whatever the size of the file.
 */
export class ParquetStreamWriter {
  private feed: ReadableStreamDefaultController<RecordBatch> | undefined;
  /** Called when the writer asks for a batch. */
  private onAsk: (() => void) | undefined;
  private chunks: Uint8Array[] = [];
  private drained: Promise<void> | undefined;
  private failure: unknown;

  constructor(private readonly properties: WriterProperties) {}

  /** Hands the writer a batch (the writer's from here on) and waits until it asks for the next. */
  async write(batch: RecordBatch): Promise<void> {
    this.throwIfFailed();
    const asked = new Promise<void>((resolve) => {
      this.onAsk = resolve;
    });
    if (this.feed === undefined) {
      let feed: ReadableStreamDefaultController<RecordBatch> | undefined;
      const input = new ReadableStream<RecordBatch>(
        {
          start: (controller) => {
            feed = controller;
          },
          pull: () => this.onAsk?.(),
        },
        { highWaterMark: 0 },
      );
      if (feed === undefined) throw new Error('a stream that did not start at once');
      this.feed = feed;
      feed.enqueue(batch);
      // the writer reads the first batch for the schema before it answers
      this.drained = this.drain(await transformParquetStream(input, this.properties));
    } else this.feed.enqueue(batch);
    await Promise.race([asked, this.drained]);
    // the writer's bytes reach the output stream's reader in promise callbacks: let them all run
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.throwIfFailed();
  }

  /** Ends the input (after at least one write()) and waits until the writer has written the whole file. */
  async close(): Promise<void> {
    if (this.feed === undefined) throw new Error('a Parquet stream writer closed before any batch');
    this.feed.close();
    await this.drained;
    this.throwIfFailed();
  }

  /** The bytes written since the last call, in file order, in a buffer of their own (it can be handed over). */
  take(): Uint8Array {
    const chunks = this.chunks;
    this.chunks = [];
    const only = chunks.length === 1 ? chunks[0] : undefined;
    if (only !== undefined && only.byteOffset === 0 && only.byteLength === only.buffer.byteLength) return only;
    let size = 0;
    for (const chunk of chunks) size += chunk.byteLength;
    const bytes = new Uint8Array(size);
    let at = 0;
    for (const chunk of chunks) {
      bytes.set(chunk, at);
      at += chunk.byteLength;
    }
    return bytes;
  }

  private async drain(output: ReadableStream<Uint8Array>): Promise<void> {
    const reader = output.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        this.chunks.push(value);
      }
    } catch (err) {
      this.failure = err ?? new Error('the Parquet writer failed');
    }
  }

  private throwIfFailed(): void {
    if (this.failure !== undefined) throw this.failure;
  }
}
