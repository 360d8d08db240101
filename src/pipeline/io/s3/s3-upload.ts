/** An object uploaded while it is written: parts go up as they fill, the object is made only by complete(). */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  type CompletedPart,
  CreateMultipartUploadCommand,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { Writable } from 'node:stream';
import { OutputError } from '../table.js';
import { s3Problem } from './s3-client.js';

/** How an upload is cut: bytes per part (S3 takes 5 MiB at least, but for the last part) and parts sent at once. */
export interface UploadShape {
  partBytes: number;
  partsInFlight: number;
  /** Parts of one size, before the size doubles (see partBytesFor). */
  partsPerSize: number;
}

/** Parts of 8 MiB, four in flight: about 40 MiB of memory at most up to 8 GiB written (see partBytesFor). */
export const UPLOAD_SHAPE: UploadShape = { partBytes: 8 * 1024 * 1024, partsInFlight: 4, partsPerSize: 1000 };

/**
 * The size of part `number` (from 1). An upload has 10,000 parts at most: parts of one size would cap an object at
 * 10,000 of them (80 GiB for 8 MiB), so the size doubles every 1,000 parts, which reaches S3's largest object
 * (5 TiB) while the first 8 GiB keep the memory of small parts.
 */
export function partBytesFor(shape: UploadShape, number: number): number {
  return shape.partBytes * 2 ** Math.floor((number - 1) / shape.partsPerSize);
}

/** A part to send, and the memory it holds until it is sent (its buffer, of which the last part fills a share). */
interface Part {
  bytes: Buffer;
  held: number;
}

/**
 * The bytes written to `stream` (or given to write()) are cut into parts and uploaded as a multipart upload, at
 * most `partsInFlight` parts at once: a write waits while they are all in flight, so memory stays near
 * (partsInFlight + 1) parts. The upload is started by the first full part; an object smaller than one part is held
 * and sent whole by complete(). Ending the stream (or end()) sends the last part and waits for every part; only
 * complete() makes the object appear, and abort() drops the parts (S3 keeps nothing), so a failed or interrupted
 * run leaves no object.
 */
export class ObjectUpload {
  readonly stream: Writable;
  /** The most bytes held at once (filling plus in flight): the memory bound, for tests. */
  peakHeldBytes = 0;
  private held = 0;
  /** The part being filled (the next part's size, see partBytesFor), and how much of it is. */
  private filling: Buffer | undefined;
  private filled = 0;
  private uploadId: Promise<string> | undefined;
  private nextPart = 1;
  private readonly parts: CompletedPart[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private whole: Buffer | undefined;
  private failure: OutputError | undefined;
  private settled = false;

  constructor(
    private readonly client: S3Client,
    private readonly url: string,
    private readonly bucket: string,
    private readonly key: string,
    private readonly shape: UploadShape = UPLOAD_SHAPE,
  ) {
    this.stream = new Writable({
      highWaterMark: 64 * 1024,
      write: (chunk: Buffer, _encoding, done) => {
        this.take(chunk).then(() => done(), done);
      },
      final: (done) => {
        this.finish().then(() => done(), done);
      },
    });
  }

  /**
   * Takes `bytes` as a write to `stream` would, for a writer that awaits each write rather than use the stream
   * (one or the other, never both): resolves once they are copied and a part is free for more.
   */
  async write(bytes: Uint8Array): Promise<void> {
    if (this.settled) throw new Error('write after the upload was completed or aborted');
    await this.take(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  }

  /** Ends what write() was given, as ending `stream` does: sends the last part and waits for every part. */
  async end(): Promise<void> {
    if (this.settled) throw new Error('end after the upload was completed or aborted');
    await this.finish();
  }

  /** Makes the object from the parts sent (or the bytes held); fails with one line naming the object. */
  async complete(): Promise<void> {
    if (this.settled) throw new Error('complete after the upload was completed or aborted');
    if (this.failure !== undefined) throw this.failure;
    this.settled = true;
    try {
      if (this.uploadId === undefined) {
        const body = this.whole ?? Buffer.alloc(0);
        await this.client.send(
          new PutObjectCommand({ Bucket: this.bucket, Key: this.key, Body: body, ContentLength: body.length }),
        );
        return;
      }
      const uploadId = await this.uploadId;
      await this.client.send(
        new CompleteMultipartUploadCommand({
          Bucket: this.bucket,
          Key: this.key,
          UploadId: uploadId,
          MultipartUpload: { Parts: this.parts },
        }),
      );
    } catch (err) {
      await this.dropParts();
      throw this.failed(err);
    }
  }

  /** Stops sending and drops what was sent; nothing appears. Safe to call after a failure, and twice. */
  async abort(): Promise<void> {
    if (this.settled) return;
    this.settled = true;
    this.stream.destroy();
    // parts still being sent may be stored after an abort that comes before them, and keep the upload alive: S3
    // asks to abort once none is in flight. They are a few parts at most.
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    await this.dropParts();
  }

  private async dropParts(): Promise<void> {
    if (this.uploadId === undefined) return;
    const uploadId = await this.uploadId.catch(() => undefined);
    if (uploadId === undefined) return;
    // best effort: parts left by a failed abort are removed by the bucket's lifecycle rule (docs/s3.md)
    await this.client
      .send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: this.key, UploadId: uploadId }))
      .catch(() => undefined);
  }

  private async take(chunk: Buffer): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    // copied: a writer may reuse or release a chunk's memory once its write is done
    let at = 0;
    while (at < chunk.length) {
      if (this.filling === undefined) {
        // no part waits for its number here: the one filled before was numbered before this one is made
        this.filling = Buffer.allocUnsafe(partBytesFor(this.shape, this.nextPart));
        this.hold(this.filling.length);
      }
      const copied = chunk.copy(this.filling, this.filled, at);
      this.filled += copied;
      at += copied;
      if (this.filled === this.filling.length) await this.send(this.takeFilling());
    }
  }

  private async finish(): Promise<void> {
    if (this.uploadId === undefined) {
      this.whole = this.takeFilling().bytes;
      return;
    }
    if (this.filled > 0) await this.send(this.takeFilling());
    while (this.inFlight.size > 0) await Promise.race(this.inFlight);
    if (this.failure !== undefined) throw this.failure;
  }

  /** The part filled so far and the memory it holds; the next write starts a new one. */
  private takeFilling(): Part {
    const part = {
      bytes: this.filling === undefined ? Buffer.alloc(0) : this.filling.subarray(0, this.filled),
      held: this.filling?.length ?? 0,
    };
    this.filling = undefined;
    this.filled = 0;
    return part;
  }

  private async send(part: Part): Promise<void> {
    while (this.inFlight.size >= this.shape.partsInFlight) await Promise.race(this.inFlight);
    if (this.failure !== undefined) throw this.failure;
    if (this.settled) throw new Error('write after the upload was completed or aborted');
    this.uploadId ??= this.create();
    let uploadId: string;
    try {
      uploadId = await this.uploadId;
    } catch (err) {
      this.failure ??= this.failed(err);
      throw this.failure;
    }
    const number = this.nextPart++;
    const sending: Promise<void> = this.client
      .send(
        new UploadPartCommand({
          Bucket: this.bucket,
          Key: this.key,
          UploadId: uploadId,
          PartNumber: number,
          Body: part.bytes,
          ContentLength: part.bytes.length,
        }),
      )
      .then((out) => {
        this.parts[number - 1] = { PartNumber: number, ETag: out.ETag };
      })
      .catch((err: unknown) => {
        this.failure ??= this.failed(err);
      })
      .finally(() => {
        this.inFlight.delete(sending);
        this.held -= part.held;
      });
    this.inFlight.add(sending);
  }

  private async create(): Promise<string> {
    const out = await this.client.send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: this.key }));
    if (out.UploadId === undefined) throw new Error('S3 started an upload without an upload id');
    return out.UploadId;
  }

  private hold(bytes: number): void {
    this.held += bytes;
    if (this.held > this.peakHeldBytes) this.peakHeldBytes = this.held;
  }

  private failed(err: unknown): OutputError {
    if (err instanceof OutputError) return err;
    const { problem, hint } = s3Problem(err, this.bucket);
    return new OutputError(this.url, `the upload failed: ${problem}`, hint);
  }
}
