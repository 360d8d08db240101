/** Reads from S3: an object's bytes as a stream (or by ranges), and the objects a `s3://bucket/prefix/part-*` pattern names. */
import {
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
} from '@aws-sdk/client-s3';
import { PassThrough, type Readable } from 'node:stream';
import { globMatcher, hasWildcard, InputPartsError } from '../input-parts.js';
import { InputError } from '../table.js';
import { s3Client, s3Problem } from './s3-client.js';
import { isS3Url, parseS3Url, type S3Location } from './s3-url.js';

/** Bytes buffered between the download and the reading: the download waits when the reading does. */
const DOWNLOAD_CHUNK_BYTES = 64 * 1024;

function locationOf(url: string): S3Location {
  const at = parseS3Url(url);
  if ('problem' in at) throw new InputPartsError(`'${url}': ${at.problem}`);
  return at;
}

/**
 * The body of the object at `url`, streamed as it is downloaded (memory stays bounded whatever its size), and its
 * size for progress. Failures name the object and a fix, never a credential.
 */
export async function openS3Object(url: string): Promise<{ stream: NodeJS.ReadableStream; size: number | undefined }> {
  const { bucket, key } = locationOf(url);
  try {
    const out = await s3Client().send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    return { stream: downloadOf(out.Body as Readable, url), size: out.ContentLength };
  } catch (err) {
    const { problem, hint } = s3Problem(err, bucket);
    throw new InputError(url, undefined, problem, hint);
  }
}

/** An object read by byte ranges: its size, and the bytes [from, to) as one ranged GET each. */
export interface RangedObject {
  size: number;
  read(from: number, to: number): AsyncIterable<Buffer>;
}

/**
 * The object at `url` as ranges of its bytes (a runner of --shard reads its share of one object so). Its size is
 * asked first (one HEAD); each range is streamed, and a range left unread stops its download.
 */
export async function openS3Ranges(url: string): Promise<RangedObject> {
  const { bucket, key } = locationOf(url);
  const failed = (err: unknown): InputError => {
    const { problem, hint } = s3Problem(err, bucket);
    return new InputError(url, undefined, problem, hint);
  };
  let size: number;
  try {
    size = (await s3Client().send(new HeadObjectCommand({ Bucket: bucket, Key: key }))).ContentLength ?? 0;
  } catch (err) {
    throw failed(err);
  }
  async function* read(from: number, to: number): AsyncGenerator<Buffer> {
    if (to <= from) return;
    let body: Readable;
    try {
      const range = `bytes=${from}-${to - 1}`;
      body = (await s3Client().send(new GetObjectCommand({ Bucket: bucket, Key: key, Range: range }))).Body as Readable;
    } catch (err) {
      throw failed(err);
    }
    for await (const buf of downloadOf(body, url)) yield buf as Buffer;
  }
  return { size, read };
}

/**
 * The body of a download as the input reads it: a connection that breaks off mid-object becomes one line naming
 * the object (not the socket's error with its stack), and closing the input stops the download.
 */
export function downloadOf(body: Readable, url: string): Readable {
  const out = new PassThrough({ highWaterMark: DOWNLOAD_CHUNK_BYTES });
  body.once('error', (err: Error & { code?: string }) => {
    out.destroy(
      new InputError(
        url,
        undefined,
        `the download broke off (${err.code ?? err.name})`,
        'run the same command again (with --state, rows already mapped are not sent again)',
      ),
    );
  });
  out.once('close', () => body.destroy());
  body.pipe(out);
  return out;
}

/**
 * The S3 arguments of a run made into the objects they name, other arguments kept in their place: a key is itself;
 * a wildcard in the last part (`s3://b/unload/data_*.csv.gz`) is the objects under that prefix whose names match,
 * sorted by code unit as local parts are. Hidden and marker objects (`_SUCCESS`) are left out as in a directory.
 */
export async function expandS3Inputs(args: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const arg of args) {
    if (!isS3Url(arg)) {
      out.push(arg);
      continue;
    }
    const { bucket, key } = locationOf(arg);
    const cut = key.lastIndexOf('/') + 1;
    const dir = key.slice(0, cut);
    const pattern = key.slice(cut);
    if (hasWildcard(dir))
      throw new InputPartsError(
        `'${arg}': only the last part of a key may hold a wildcard, e.g. 's3://${bucket}/unload/data_*.csv.gz'`,
      );
    if (!hasWildcard(pattern)) {
      out.push(arg);
      continue;
    }
    const matches = globMatcher(pattern);
    const names = (await listKeys(arg, bucket, dir)).filter(
      (name) => !name.includes('/') && !name.startsWith('_') && matches(name),
    );
    if (names.length === 0)
      throw new InputPartsError(`'${arg}' matches no object under 's3://${bucket}/${dir}'; check the pattern`);
    names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    for (const name of names) out.push(`s3://${bucket}/${dir}${name}`);
  }
  const parquet = out.find((path) => isS3Url(path) && /\.parquet$/i.test(path));
  if (parquet !== undefined)
    throw new InputPartsError(
      `'${parquet}': Parquet is read from local files only; copy it first (aws s3 cp ${parquet} .) and map the copy`,
    );
  return out;
}

/** The names (after `prefix`) of every object under `prefix`, page after page. */
async function listKeys(shown: string, bucket: string, prefix: string): Promise<string[]> {
  const names: string[] = [];
  let token: string | undefined;
  do {
    let page: ListObjectsV2CommandOutput;
    try {
      page = await s3Client().send(
        new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ...(token ? { ContinuationToken: token } : {}) }),
      );
    } catch (err) {
      const { problem, hint } = s3Problem(err, bucket);
      throw new InputError(shown, undefined, problem, hint);
    }
    for (const item of page.Contents ?? []) if (item.Key !== undefined) names.push(item.Key.slice(prefix.length));
    token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
  } while (token !== undefined);
  return names;
}
