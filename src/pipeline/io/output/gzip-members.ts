/** gzip output compressed on the thread pool, as a series of independent gzip members written in order. */
import { Transform, type TransformCallback } from 'node:stream';
import { constants, gzip } from 'node:zlib';

/** Bytes gathered into one member: large enough that the member headers and the lost context cost nothing. */
const MEMBER_BYTES = 1024 * 1024;
/** Members being compressed at once; the thread pool has four threads unless the user set UV_THREADPOOL_SIZE. */
const MEMBERS_IN_FLIGHT = 4;

/**
 * A gzip file may be several gzip members one after the other (RFC 1952 2.2), and every gzip reader reads them as
 * one stream (gzip -d, zcat, Python's gzip, zlib's gunzip, the warehouses' loaders). Compressing each megabyte on
 * its own lets the thread pool compress several at once while the main thread maps rows, where one zlib stream
 * compresses a chunk at a time and waits for the main thread between chunks.
 *
 * The fastest level: the output is mostly base64 and hex, which compresses little better at higher levels, and at
 * the default level compressing took longer than mapping the rows. The largest hash table (memLevel 9, a few
 * hundred KB per member being compressed) finds matches sooner than the default one, for the same output size.
 */
export class GzipMembers extends Transform {
  private staging = Buffer.allocUnsafe(MEMBER_BYTES);
  private used = 0;
  private readonly inFlight: Promise<Buffer>[] = [];
  private members = 0;

  constructor() {
    super({ writableHighWaterMark: MEMBER_BYTES });
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    // copied: a writer may reuse or release its buffer once this write is done (the sink's releaseWhenWritten)
    if (this.used + chunk.length > this.staging.length) {
      const bigger = Buffer.allocUnsafe(this.used + chunk.length);
      this.staging.copy(bigger, 0, 0, this.used);
      this.staging = bigger;
    }
    chunk.copy(this.staging, this.used);
    this.used += chunk.length;
    if (this.used < MEMBER_BYTES) {
      done();
      return;
    }
    this.startMember();
    if (this.inFlight.length < MEMBERS_IN_FLIGHT) {
      done();
      return;
    }
    this.pushOldest().then(() => done(), done);
  }

  override _flush(done: TransformCallback): void {
    // an empty output is still a gzip file (a member of no bytes), not a file of no bytes that readers refuse
    if (this.used > 0 || this.members === 0) this.startMember();
    const drain = async (): Promise<void> => {
      while (this.inFlight.length > 0) await this.pushOldest();
    };
    drain().then(() => done(), done);
  }

  override _destroy(err: Error | null, done: (error?: Error | null) => void): void {
    // members still compressing settle on their own; their failures are this stream's error or nobody's
    for (const member of this.inFlight) member.catch(() => undefined);
    this.inFlight.length = 0;
    done(err);
  }

  private startMember(): void {
    const bytes = this.staging.subarray(0, this.used);
    this.staging = Buffer.allocUnsafe(MEMBER_BYTES);
    this.used = 0;
    this.members++;
    const member = new Promise<Buffer>((resolve, reject) => {
      gzip(bytes, { level: constants.Z_BEST_SPEED, memLevel: constants.Z_MAX_MEMLEVEL }, (err, out) =>
        err ? reject(err) : resolve(out),
      );
    });
    // awaited in order by pushOldest; until then a failure must not count as unhandled
    member.catch(() => undefined);
    this.inFlight.push(member);
  }

  private async pushOldest(): Promise<void> {
    const oldest = this.inFlight.shift();
    if (oldest !== undefined) this.push(await oldest);
  }
}
