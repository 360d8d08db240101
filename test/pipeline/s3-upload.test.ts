import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { AbortMultipartUploadCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSink } from '../../src/pipeline/io/output/sink.js';
import { openParquetSink } from '../../src/pipeline/io/parquet/parquet-sink.js';
import { openS3Sink, uploadTarget } from '../../src/pipeline/io/s3/s3-sink.js';
import { ObjectUpload, partBytesFor, UPLOAD_SHAPE } from '../../src/pipeline/io/s3/s3-upload.js';
import { OutputError } from '../../src/pipeline/io/table.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { STORE_KEYS, startS3Store, type S3Store } from '../helpers/s3-store.js';

// Uploads that stream into a multipart upload, against an S3-compatible store on loopback.
const dir = tempDir('s3-upload');
const BUCKET = 'out';
const KIB = 1024;
let store: S3Store;
const saved = { ...process.env };

/** Writes `bytes` to the upload's stream in chunks of `chunk`, waiting when it asks to (backpressure). */
async function writeAll(upload: ObjectUpload, bytes: Buffer, chunk = 16 * KIB): Promise<void> {
  for (let at = 0; at < bytes.length; at += chunk) {
    if (!upload.stream.write(bytes.subarray(at, at + chunk))) await once(upload.stream, 'drain');
  }
}

async function end(upload: ObjectUpload): Promise<void> {
  upload.stream.end();
  await once(upload.stream, 'finish');
}

function pattern(size: number, seed = 7): Buffer {
  const out = Buffer.alloc(size);
  for (let i = 0; i < size; i++) out[i] = (i * 31 + seed + (i >> 10)) & 0xff;
  return out;
}

beforeAll(async () => {
  store = await startS3Store(dir.path);
  await store.createBucket(BUCKET);
  // the process's one S3 client is made from the environment on first use
  Object.assign(process.env, store.env());
}, 60_000);

afterAll(async () => {
  process.env = saved;
  await store?.close();
  dir.remove();
});

describe('an object uploaded while it is written', () => {
  it('holds at most the parts in flight and the one filling, whatever the size, and appears only on complete', async () => {
    const shape = { partBytes: 64 * KIB, partsInFlight: 2, partsPerSize: 1000 };
    const upload = new ObjectUpload(store.client, 's3://out/big.bin', BUCKET, 'big.bin', shape);
    const body = pattern(40 * 64 * KIB + 123);
    await writeAll(upload, body);
    await end(upload);
    expect(store.unfinishedUploads(BUCKET)).toHaveLength(1);
    expect(await store.exists(BUCKET, 'big.bin')).toBe(false);
    await upload.complete();
    expect((await store.bytes(BUCKET, 'big.bin')).equals(body)).toBe(true);
    // the part filling and the parts in flight: a write waits rather than hold more
    expect(upload.peakHeldBytes).toBeGreaterThan(shape.partBytes);
    expect(upload.peakHeldBytes).toBeLessThanOrEqual((shape.partsInFlight + 1) * shape.partBytes);
    expect(store.unfinishedUploads(BUCKET)).toEqual([]);
  });

  it('an object smaller than one part is held and sent whole on complete', async () => {
    const upload = new ObjectUpload(store.client, 's3://out/small.bin', BUCKET, 'small.bin');
    const body = pattern(5000);
    await writeAll(upload, body);
    await end(upload);
    expect(await store.exists(BUCKET, 'small.bin')).toBe(false);
    await upload.complete();
    expect((await store.bytes(BUCKET, 'small.bin')).equals(body)).toBe(true);
  });

  it('an aborted upload leaves no object and no unfinished multipart upload', async () => {
    const upload = new ObjectUpload(store.client, 's3://out/dropped.bin', BUCKET, 'dropped.bin', {
      partBytes: 32 * KIB,
      partsInFlight: 2,
      partsPerSize: 1000,
    });
    await writeAll(upload, pattern(10 * 32 * KIB));
    expect(store.unfinishedUploads(BUCKET)).toHaveLength(1);
    await upload.abort();
    expect(await store.exists(BUCKET, 'dropped.bin')).toBe(false);
    expect(store.unfinishedUploads(BUCKET)).toEqual([]);
  });

  it('credentials refused mid-upload stop the writes with one line naming the object, and nothing appears', async () => {
    let refused = false;
    const client = new S3Client({
      endpoint: store.endpoint,
      forcePathStyle: true,
      region: 'us-east-1',
      // valid at first, then expired: as a session token that runs out during a long run
      credentials: async () =>
        refused
          ? { accessKeyId: 'EXPIREDKEY', secretAccessKey: 'expired-secret-value' }
          : {
              accessKeyId: STORE_KEYS.AWS_ACCESS_KEY_ID,
              secretAccessKey: STORE_KEYS.AWS_SECRET_ACCESS_KEY,
              // about to expire: the client asks again before each request
              expiration: new Date(Date.now() + 1000),
            },
    });
    const upload = new ObjectUpload(client, 's3://out/expired.bin', BUCKET, 'expired.bin', {
      partBytes: 32 * KIB,
      partsInFlight: 1,
      partsPerSize: 1000,
    });
    await writeAll(upload, pattern(3 * 32 * KIB));
    refused = true;
    const failure = await writeAll(upload, pattern(20 * 32 * KIB)).then(
      () => end(upload),
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(OutputError);
    const line = (failure as Error).message;
    expect(line).toContain('s3://out/expired.bin');
    expect(line).toContain('the AWS credentials were refused');
    expect(line).not.toMatch(/EXPIREDKEY|expired-secret-value|S3RVER/);
    await upload.abort();
    expect(await store.exists(BUCKET, 'expired.bin')).toBe(false);
    // nor can the parts be dropped with those credentials: the bucket's lifecycle rule does it (docs/s3.md)
    const left = store.unfinishedUploads(BUCKET);
    expect(left).toHaveLength(1);
    await store.client.send(new AbortMultipartUploadCommand({ Bucket: BUCKET, Key: 'expired.bin', UploadId: left[0] }));
    client.destroy();
  });
});

describe('the size of the parts', () => {
  it("stays at the first size for 1,000 parts, then doubles, so that 10,000 parts hold S3's largest object", () => {
    const MIB = 1024 * 1024;
    expect(partBytesFor(UPLOAD_SHAPE, 1)).toBe(8 * MIB);
    expect(partBytesFor(UPLOAD_SHAPE, 1000)).toBe(8 * MIB);
    expect(partBytesFor(UPLOAD_SHAPE, 1001)).toBe(16 * MIB);
    expect(partBytesFor(UPLOAD_SHAPE, 2001)).toBe(32 * MIB);
    let total = 0;
    for (let n = 1; n <= 10_000; n++) total += partBytesFor(UPLOAD_SHAPE, n);
    expect(total).toBeGreaterThanOrEqual(5 * 1024 ** 4);
  });

  it('an upload sends its later parts larger, and the object holds the same bytes', async () => {
    const shape = { partBytes: 8 * KIB, partsInFlight: 2, partsPerSize: 3 };
    const upload = new ObjectUpload(store.client, 's3://out/growing.bin', BUCKET, 'growing.bin', shape);
    const body = pattern(3 * 8 * KIB + 3 * 16 * KIB + 32 * KIB + 5);
    await writeAll(upload, body, 3000);
    await end(upload);
    expect(store.partSizes(BUCKET)).toEqual([8, 8, 8, 16, 16, 16, 32].map((k) => k * KIB).concat([5]));
    await upload.complete();
    expect((await store.bytes(BUCKET, 'growing.bin')).equals(body)).toBe(true);
  });
});

describe('an s3:// output of rows', () => {
  const header = ['id', 'email'];
  const rows = Array.from({ length: 20_000 }, (_, i) => [String(i), `user.${i}@example.com`]);

  it('gzipped to a .gz key, many parts: the same bytes as the same rows written to a local sink', async () => {
    const sink = await openS3Sink({ path: 's3://out/rows.csv.gz', format: 'csv', compress: 'gzip', header }, openSink, {
      partBytes: 8 * KIB,
      partsInFlight: 2,
      partsPerSize: 1000,
    });
    for (let i = 0; i < rows.length; i += 1000) await sink.writeRows(rows.slice(i, i + 1000));
    const prepared = await (sink.prepareCommit as () => ReturnType<NonNullable<typeof sink.prepareCommit>>)();
    expect(await store.exists(BUCKET, 'rows.csv.gz')).toBe(false);
    await prepared.publish();
    const local = dir.file('rows.csv');
    const file = await openSink({ path: local, format: 'csv', header });
    await file.writeRows(rows);
    await file.commit();
    const { readFileSync } = await import('node:fs');
    expect(gunzipSync(await store.bytes(BUCKET, 'rows.csv.gz')).equals(readFileSync(local))).toBe(true);
    expect(store.unfinishedUploads(BUCKET)).toEqual([]);
  });

  it('a run that fails after several parts were sent leaves no object and no unfinished upload', async () => {
    const sink = await openS3Sink({ path: 's3://out/failed.csv', format: 'csv', header }, openSink, {
      partBytes: 8 * KIB,
      partsInFlight: 2,
      partsPerSize: 1000,
    });
    for (let i = 0; i < rows.length; i += 1000) await sink.writeRows(rows.slice(i, i + 1000));
    expect(store.unfinishedUploads(BUCKET)).toHaveLength(1);
    await sink.abort();
    expect(await store.exists(BUCKET, 'failed.csv')).toBe(false);
    expect(store.unfinishedUploads(BUCKET)).toEqual([]);
  });

  it('an object already there is refused before a byte is written, and left as it was', async () => {
    const first = await openS3Sink({ path: 's3://out/there.csv', format: 'csv', header }, openSink);
    await first.writeRows(rows.slice(0, 3));
    await first.commit();
    const before = await store.text(BUCKET, 'there.csv');
    const again = openS3Sink({ path: 's3://out/there.csv', format: 'csv', header }, openSink);
    await expect(again).rejects.toThrow(/s3:\/\/out\/there.csv.*already exists/);
    expect(await store.text(BUCKET, 'there.csv')).toBe(before);
  });

  it.each([
    ['csv', 's3://out/sealed.csv'],
    ['parquet', 's3://out/sealed.parquet'],
  ] as const)('a %s output refuses to be sealed as a local file, and makes no object', async (format, url) => {
    const sink = await openS3Sink({ path: url, format, header }, openSink);
    await sink.writeRows(rows.slice(0, 3));
    const prepared = await (sink.prepareCommit as () => ReturnType<NonNullable<typeof sink.prepareCommit>>)();
    // a journal's record of the file about to be renamed into place
    const sealed = (): void => undefined;
    await expect(prepared.publish(sealed)).rejects.toThrow('an s3:// output cannot be sealed as a local file');
    await prepared.discard();
    expect(await store.exists(BUCKET, url.slice('s3://out/'.length))).toBe(false);
  });

  it('a missing bucket is one line, before a byte is written', async () => {
    const opening = openS3Sink({ path: 's3://no-such-bucket/x.csv', format: 'csv', header }, openSink);
    await expect(opening).rejects.toThrow(/the bucket 'no-such-bucket' does not exist/);
  });
});

describe('an s3:// Parquet output', () => {
  const header = ['id', 'email', 'note'];
  // notes that do not compress away, so that the file spans many small parts
  const rows = Array.from({ length: 45_000 }, (_, i) => [
    String(i),
    `user.${i}@example.com`,
    ((i * 2654435761) >>> 0).toString(36) + ((i * 40503) >>> 0).toString(16),
  ]);
  const shape = { partBytes: 16 * KIB, partsInFlight: 2, partsPerSize: 1000 };

  async function writeInChunks(sink: { writeRows(rows: string[][]): Promise<void> }): Promise<void> {
    for (let i = 0; i < rows.length; i += 1500) await sink.writeRows(rows.slice(i, i + 1500));
  }

  async function localFile(name: string, rowGroupRows?: number): Promise<Buffer> {
    const path = dir.file(name);
    const file = await openParquetSink({ path, format: 'parquet', header }, rowGroupRows);
    await writeInChunks(file);
    await file.commit();
    return readFileSync(path);
  }

  it('streams into the upload as its row groups are written: the same bytes as the file, made on commit', async () => {
    const sink = await openS3Sink({ path: 's3://out/rows.parquet', format: 'parquet', header }, openSink, shape);
    await writeInChunks(sink);
    // the first row groups are already sent, before the run commits
    expect(store.unfinishedUploads(BUCKET)).toHaveLength(1);
    expect(store.partSizes(BUCKET).length).toBeGreaterThan(2);
    expect(await store.exists(BUCKET, 'rows.parquet')).toBe(false);
    const prepared = await (sink.prepareCommit as () => ReturnType<NonNullable<typeof sink.prepareCommit>>)();
    expect(await store.exists(BUCKET, 'rows.parquet')).toBe(false);
    await prepared.publish();
    const uploaded = await store.bytes(BUCKET, 'rows.parquet');
    expect(uploaded.length).toBeGreaterThan(10 * shape.partBytes);
    expect(uploaded.equals(await localFile('rows.parquet'))).toBe(true);
    expect(store.made.get('rows.parquet')).toBe('ObjectCreated:Post');
    expect(store.unfinishedUploads(BUCKET)).toEqual([]);
  });

  it('holds at most the parts in flight and the one filling, whatever the size of the file', async () => {
    const upload = new ObjectUpload(store.client, 's3://out/bounded.parquet', BUCKET, 'bounded.parquet', shape);
    const sink = await openParquetSink(
      { path: 's3://out/bounded.parquet', format: 'parquet', header },
      2000,
      async () => uploadTarget(upload, 's3://out/bounded.parquet', BUCKET),
    );
    await writeInChunks(sink);
    await sink.commit();
    const uploaded = await store.bytes(BUCKET, 'bounded.parquet');
    expect(uploaded.equals(await localFile('bounded.parquet', 2000))).toBe(true);
    expect(uploaded.length).toBeGreaterThan(10 * (shape.partsInFlight + 1) * shape.partBytes);
    expect(upload.peakHeldBytes).toBeLessThanOrEqual((shape.partsInFlight + 1) * shape.partBytes);
  });

  it('a run that fails after parts were sent leaves no object and no unfinished upload', async () => {
    const sink = await openS3Sink({ path: 's3://out/failed.parquet', format: 'parquet', header }, openSink, shape);
    await writeInChunks(sink);
    expect(store.unfinishedUploads(BUCKET)).toHaveLength(1);
    await sink.abort();
    expect(await store.exists(BUCKET, 'failed.parquet')).toBe(false);
    expect(store.unfinishedUploads(BUCKET)).toEqual([]);
  });

  it('an upload that the store dropped mid-run fails in one line naming the object, and nothing is left', async () => {
    const sink = await openS3Sink({ path: 's3://out/gone.parquet', format: 'parquet', header }, openSink, shape);
    await sink.writeRows(rows.slice(0, 30_000));
    expect(store.unfinishedUploads(BUCKET)).toHaveLength(1);
    // the upload is dropped behind the run's back (as by a lifecycle rule): a later part or the completion fails
    const [id] = store.unfinishedUploads(BUCKET);
    await store.client.send(new AbortMultipartUploadCommand({ Bucket: BUCKET, Key: 'gone.parquet', UploadId: id }));
    const failure = await writeInChunks(sink)
      .then(() => sink.commit())
      .catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(OutputError);
    expect((failure as Error).message).toMatch(/^s3:\/\/out\/gone\.parquet: the upload failed/);
    await sink.abort();
    expect(await store.exists(BUCKET, 'gone.parquet')).toBe(false);
    expect(store.unfinishedUploads(BUCKET)).toEqual([]);
  });
});
