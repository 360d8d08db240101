/** A small text output in S3 (a run's summary or metrics): what is there before the run, and the text put whole. */
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { finished } from 'node:stream/promises';
import { OutputError } from '../table.js';
import { s3Client, s3Problem } from './s3-client.js';
import { ObjectUpload, UPLOAD_SHAPE } from './s3-upload.js';
import { parseS3Url, type S3Location } from './s3-url.js';

function locationOf(url: string): S3Location {
  const at = parseS3Url(url);
  if ('problem' in at) throw new OutputError(url, at.problem);
  return at;
}

/**
 * The object at `url` as far as telling whose it is takes: its size and its first `headBytes` bytes (one ranged
 * GET); null when there is none. A missing bucket or denied access is one line naming the location.
 */
export async function s3ObjectHead(url: string, headBytes: number): Promise<{ size: number; head: Buffer } | null> {
  const { bucket, key } = locationOf(url);
  try {
    const out = await s3Client().send(
      new GetObjectCommand({ Bucket: bucket, Key: key, Range: `bytes=0-${Math.max(0, headBytes - 1)}` }),
    );
    const head = Buffer.from((await out.Body?.transformToByteArray()) ?? []);
    // a ranged answer names the whole size after the slash: "bytes 0-63/1234"
    const whole = /\/(\d+)$/.exec(out.ContentRange ?? '');
    return { size: whole !== null ? Number(whole[1]) : head.length, head };
  } catch (err) {
    const { name, $metadata } = err as { name?: string; $metadata?: { httpStatusCode?: number } };
    if (name === 'NoSuchKey' || (name !== 'NoSuchBucket' && $metadata?.httpStatusCode === 404)) return null;
    // an empty object has no byte 0 to give
    if (name === 'InvalidRange' || $metadata?.httpStatusCode === 416) return { size: 0, head: Buffer.alloc(0) };
    const { problem, hint } = s3Problem(err, bucket);
    throw new OutputError(url, problem, hint);
  }
}

/**
 * Puts `text` at `url` whole, through the upload the S3 sink uses (one PUT for a text this small): the object is
 * there complete or not at all, never in part.
 */
export async function putS3Text(url: string, text: string): Promise<void> {
  const { bucket, key } = locationOf(url);
  const upload = new ObjectUpload(s3Client(), url, bucket, key, UPLOAD_SHAPE);
  try {
    upload.stream.end(text);
    await finished(upload.stream);
    await upload.complete();
  } catch (err) {
    await upload.abort();
    throw err;
  }
}
