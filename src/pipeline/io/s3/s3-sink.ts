/** An output to `s3://bucket/key`: uploaded in parts as it is written, the object made when the run commits. */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { createReadStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { HeadBucketCommand, HeadObjectCommand } from '@aws-sdk/client-s3';
import { pipeline } from 'node:stream/promises';
import { processAlive } from '../output/output-file.js';
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
  /** The sink that encodes the rows: given a stream it writes into it, given a path it writes that file. */
  openEncoder: (opts: OpenSinkOptions) => Promise<TableSink>,
  shape: UploadShape = UPLOAD_SHAPE,
): Promise<TableSink> {
  const url = opts.path;
  const at = parseS3Url(url);
  if ('problem' in at) throw new OutputError(url, at.problem);
  const { bucket, key } = at;
  await refuseUnwritable(url, bucket, key);
  if (opts.format === 'parquet') return openThroughFile(opts, openEncoder, url, bucket, key, shape);
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
  const prepare = async (): Promise<PreparedOutput> => {
    try {
      await bytes.commit();
    } catch (err) {
      await upload.abort();
      throw err;
    }
    return uploadStep(
      () => upload.complete(),
      () => upload.abort(),
    );
  };
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
 * The last commit step of an upload: `upload` makes the object appear, `discard` drops what was sent. A sealed file
 * is how a journal proves that a local rename happened; an upload has no such file, so it refuses to be sealed.
 */
function uploadStep(upload: () => Promise<void>, discard: () => Promise<void>): PreparedOutput {
  return {
    async publish(sealed) {
      if (sealed !== undefined) throw new Error('an s3:// output cannot be sealed as a local file');
      await upload();
    },
    discard,
  };
}

/**
 * Parquet: the rows go to a private local file (0600, in the temp directory) that is uploaded when the run commits.
 * The Parquet sink owns a file handle that it fsyncs and renames, and refuses any other target; giving it a stream
 * target is a change of its own, so a Parquet output needs room in the temp directory for its size.
 */
async function openThroughFile(
  opts: OpenSinkOptions,
  openEncoder: (opts: OpenSinkOptions) => Promise<TableSink>,
  url: string,
  bucket: string,
  key: string,
  shape: UploadShape,
): Promise<TableSink> {
  await removeStaleUploadDirs();
  const dir = await mkdtemp(join(tmpdir(), `${DIR_PREFIX}${process.pid}-`));
  let local: TableSink;
  try {
    local = await openEncoder({ ...opts, path: join(dir, basename(key)), mode: 0o600 });
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const file = join(dir, basename(key));
  const removeDir = () => rm(dir, { recursive: true, force: true });
  const prepare = async (): Promise<PreparedOutput> => {
    let prepared: PreparedOutput;
    try {
      prepared = await (local.prepareCommit?.() ?? Promise.reject(new Error('the output cannot be prepared')));
      await prepared.publish();
    } catch (err) {
      await removeDir();
      throw err;
    }
    return uploadStep(async () => {
      try {
        await uploadFile(url, bucket, key, file, shape);
      } finally {
        await removeDir();
      }
    }, removeDir);
  };
  // the local sink's own methods, called on it (its state stays its own), with the commit steps of the upload
  const encodeElsewhere = local.encodeElsewhere?.bind(local);
  const endFile = local.endFile?.bind(local);
  return {
    writeRows: (rows) => local.writeRows(rows),
    writeEncoded: (bytes) => local.writeEncoded(bytes),
    ...(encodeElsewhere !== undefined ? { encodeElsewhere } : {}),
    ...(endFile !== undefined ? { endFile } : {}),
    prepareCommit: prepare,
    async commit(sealed) {
      await (await prepare()).publish(sealed);
    },
    async abort() {
      try {
        await local.abort();
      } finally {
        await removeDir();
      }
    },
  };
}

/** The local files of uploads are in `<tmpdir>/uid2-batch-s3-<pid>-<random>/`. */
const DIR_PREFIX = 'uid2-batch-s3-';
const DIR_NAME = /^uid2-batch-s3-(\d+)-[^/]+$/;

/**
 * Removes the local files that runs killed before their upload (kill -9, a power cut) left in the temp directory:
 * they hold input rows. Those of live processes (a run uploading right now) are left alone.
 */
async function removeStaleUploadDirs(): Promise<void> {
  const names = await readdir(tmpdir()).catch(() => [] as string[]);
  for (const name of names) {
    const m = DIR_NAME.exec(name);
    if (m === null || processAlive(Number(m[1]))) continue;
    await rm(join(tmpdir(), name), { recursive: true, force: true }).catch(() => undefined);
  }
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

/** A finished local file sent through the same upload as a streamed output. */
async function uploadFile(url: string, bucket: string, key: string, file: string, shape: UploadShape): Promise<void> {
  const upload = new ObjectUpload(s3Client(), url, bucket, key, shape);
  try {
    await pipeline(createReadStream(file), upload.stream);
    await upload.complete();
  } catch (err) {
    await upload.abort();
    throw err;
  }
}
