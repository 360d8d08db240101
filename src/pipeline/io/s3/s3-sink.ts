/** An output to `s3://bucket/key`: uploaded in parts as it is written, the object made when the run commits. */
import { HeadBucketCommand, HeadObjectCommand } from '@aws-sdk/client-s3';
import type { ByteTarget } from '../parquet/byte-target.js';
import { OutputError, type OpenSinkOptions, type PreparedOutput, type TableSink } from '../table.js';
import { s3Client, s3Problem } from './s3-client.js';
import { ObjectUpload, UPLOAD_SHAPE, type UploadShape } from './s3-upload.js';
import { parseS3Url } from './s3-url.js';

/**
 * Opens an output at `url`. The bucket and key are checked first, before any row is mapped: a missing bucket,
 * denied access or an object already there is one line naming the location and a fix. An object is never
 * replaced: a run cannot tell a finished output of its own from another's.
 */
export async function openS3Sink(
  opts: OpenSinkOptions & { path: string },
  /** The sink that encodes CSV, TSV or JSONL rows into the stream it is given (Parquet has a sink of its own). */
  openEncoder: (opts: OpenSinkOptions) => Promise<TableSink>,
  shape: UploadShape = UPLOAD_SHAPE,
): Promise<TableSink> {
  const url = opts.path;
  const at = parseS3Url(url);
  if ('problem' in at) throw new OutputError(url, at.problem);
  const { bucket, key } = at;
  await refuseUnwritable(url, bucket, key);
  if (opts.format === 'parquet') return openUploadingParquet(opts, url, bucket, key, shape);
  return openStreaming(opts, openEncoder, url, bucket, key, shape);
}

/**
 * CSV, TSV and JSONL: the encoded (and gzipped) bytes go straight into a multipart upload as they are written, in
 * bounded memory and with no local copy. Preparing the commit sends the last part; publishing completes the upload,
 * which is when the object appears.
 */
async function openStreaming(
  opts: OpenSinkOptions,
  openEncoder: (opts: OpenSinkOptions) => Promise<TableSink>,
  url: string,
  bucket: string,
  key: string,
  shape: UploadShape,
): Promise<TableSink> {
  const upload = new ObjectUpload(s3Client(), url, bucket, key, shape);
  const { path: _path, mode: _mode, ...rest } = opts;
  let bytes: TableSink;
  try {
    bytes = await openEncoder({ ...rest, stream: upload.stream });
  } catch (err) {
    await upload.abort();
    throw err;
  }
  const prepare = () => lastStepAfter(() => bytes.commit(), upload);
  return {
    writeRows: (rows) => bytes.writeRows(rows),
    writeEncoded: (chunk) => bytes.writeEncoded(chunk),
    prepareCommit: prepare,
    async commit(sealed) {
      await (await prepare()).publish(sealed);
    },
    async abort() {
      try {
        await bytes.abort();
      } finally {
        await upload.abort();
      }
    },
  };
}

/**
 * Sends what is left of an upload (`finish`), then gives its last commit step: publishing makes the object appear,
 * discarding drops what was sent; a failure to finish drops it at once. A sealed file is how a journal proves that
 * a local rename happened; an upload has no such file, so it refuses to be sealed.
 */
async function lastStepAfter(finish: () => Promise<void>, upload: ObjectUpload): Promise<PreparedOutput> {
  try {
    await finish();
  } catch (err) {
    await upload.abort();
    throw err;
  }
  return {
    async publish(sealed) {
      if (sealed !== undefined) throw new Error('an s3:// output cannot be sealed as a local file');
      await upload.complete();
    },
    discard: () => upload.abort(),
  };
}

/**
 * Parquet: the Parquet sink writes its file's bytes, row group after row group and then the footer, straight into
 * a multipart upload, as the CSV path does: bounded memory and no local copy. Preparing the commit sends the last
 * part; publishing completes the upload.
 */
async function openUploadingParquet(
  opts: OpenSinkOptions & { path: string },
  url: string,
  bucket: string,
  key: string,
  shape: UploadShape,
): Promise<TableSink> {
  const { openParquetSink, PARQUET_ROW_GROUP_ROWS } = await import('../parquet/parquet-sink.js');
  return openParquetSink(opts, PARQUET_ROW_GROUP_ROWS, async () =>
    uploadTarget(new ObjectUpload(s3Client(), url, bucket, key, shape), url, bucket),
  );
}

/** The bytes of a file that is never read back while it is written (a Parquet file) sent as an object. */
export function uploadTarget(upload: ObjectUpload, url: string, bucket: string): ByteTarget {
  return {
    name: url,
    write: (bytes) => upload.write(bytes),
    prepare: () => lastStepAfter(() => upload.end(), upload),
    discard: () => upload.abort(),
    failure(err) {
      const { problem, hint } = s3Problem(err, bucket);
      return new OutputError(url, `the upload failed: ${problem}`, hint);
    },
  };
}

/** The bucket must exist and let us in, and the key must be free: said before anything is sent. */
async function refuseUnwritable(url: string, bucket: string, key: string): Promise<void> {
  try {
    await s3Client().send(new HeadBucketCommand({ Bucket: bucket }));
  } catch (err) {
    const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
    // a HEAD answer has no body: 404 is the bucket's, not a key's
    const named = e.$metadata?.httpStatusCode === 404 ? Object.assign(e, { name: 'NoSuchBucket' }) : err;
    const { problem, hint } = s3Problem(named, bucket);
    throw new OutputError(url, problem, hint);
  }
  try {
    await s3Client().send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
  } catch (err) {
    if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return;
    const { problem, hint } = s3Problem(err, bucket);
    throw new OutputError(url, problem, hint);
  }
  throw new OutputError(url, 'already exists', `delete it first (aws s3 rm ${url}) or choose another key`);
}
