// An S3-compatible store on loopback for tests (s3rver, in this process), with the multipart calls it lacks.
import { EventEmitter, once } from 'node:events';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand, GetObjectCommand, HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';

/** Credentials s3rver accepts; any others are refused with InvalidAccessKeyId. */
export const STORE_KEYS = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER' };

export interface S3Store {
  endpoint: string;
  client: S3Client;
  /** The environment of a CLI run against the store, its credentials replaced or added to by `extra`. */
  env(extra?: Record<string, string>): Record<string, string>;
  createBucket(bucket: string): Promise<void>;
  text(bucket: string, key: string): Promise<string>;
  bytes(bucket: string, key: string): Promise<Buffer>;
  exists(bucket: string, key: string): Promise<boolean>;
  /** The upload ids of multipart uploads started in `bucket` and neither completed nor aborted. */
  unfinishedUploads(bucket: string): string[];
  /** How each object was made, by key: ObjectCreated:Post is a completed multipart upload, :Put one request. */
  made: Map<string, string>;
  /** The sizes of the parts sent so far to the one unfinished upload in `bucket`, by part number. */
  partSizes(bucket: string): number[];
  close(): Promise<void>;
}

/** s3rver keeps a bucket's unfinished multipart uploads in this folder of the bucket's, one folder per upload id. */
function uploadsDir(root: string, bucket: string): string {
  return join(root, bucket, '._S3rver_uploads');
}

/**
 * Starts s3rver on 127.0.0.1 with its files under `dir`. s3rver answers AbortMultipartUpload with 405; real S3 drops
 * the parts, so the store here does that, which is what lets a test see that an aborted upload left none. As on S3,
 * a request of an aborted upload is answered NoSuchUpload, and the parts are dropped only once the part writes
 * already under way have ended: s3rver throws, out of any request, when a part's folder goes while it writes there.
 */
export async function startS3Store(dir: string): Promise<S3Store> {
  const root = join(dir, 's3-store');
  mkdirSync(root, { recursive: true });
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: root });
  const koa = server as unknown as EventEmitter & {
    middleware: ((ctx: KoaContext, next: () => Promise<void>) => Promise<void>)[];
  };
  const aborted = new Set<string>();
  const writing = new Map<string, number>();
  const ended = new EventEmitter();
  koa.middleware.unshift(async (ctx, next) => {
    const uploadId = ctx.query.uploadId;
    if (typeof uploadId !== 'string' || !/^[0-9a-f]+$/.test(uploadId)) return next();
    if (ctx.method !== 'DELETE') {
      if (aborted.has(uploadId)) {
        ctx.status = 404;
        ctx.type = 'application/xml';
        ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchUpload</Code></Error>';
        return;
      }
      writing.set(uploadId, (writing.get(uploadId) ?? 0) + 1);
      try {
        return await next();
      } finally {
        writing.set(uploadId, (writing.get(uploadId) ?? 1) - 1);
        ended.emit('ended');
      }
    }
    // s3rver checks credentials inside its router, after this: the key is checked here, as S3 would refuse an abort
    // signed with expired credentials
    const signedBy = /Credential=([^/]+)\//.exec(String(ctx.headers.authorization ?? ''))?.[1];
    if (signedBy !== STORE_KEYS.AWS_ACCESS_KEY_ID) {
      ctx.status = 403;
      ctx.type = 'application/xml';
      ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidAccessKeyId</Code></Error>';
      return;
    }
    aborted.add(uploadId);
    while ((writing.get(uploadId) ?? 0) > 0) await once(ended, 'ended');
    const bucket = ctx.path.split('/')[1] ?? '';
    rmSync(join(uploadsDir(root, bucket), uploadId), { recursive: true, force: true });
    ctx.status = 204;
  });
  const made = new Map<string, string>();
  koa.on('event', (event: { Records: { eventName: string; s3: { object: { key: string } } }[] }) => {
    for (const record of event.Records) made.set(decodeURIComponent(record.s3.object.key), record.eventName);
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({
    endpoint,
    forcePathStyle: true,
    region: 'us-east-1',
    credentials: { accessKeyId: STORE_KEYS.AWS_ACCESS_KEY_ID, secretAccessKey: STORE_KEYS.AWS_SECRET_ACCESS_KEY },
  });
  const bytes = async (bucket: string, key: string): Promise<Buffer> => {
    const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    return Buffer.from((await out.Body?.transformToByteArray()) ?? []);
  };
  return {
    endpoint,
    client,
    made,
    env: (extra = {}) => ({
      ...STORE_KEYS,
      AWS_ENDPOINT_URL: endpoint,
      AWS_REGION: 'us-east-1',
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_CONFIG_FILE: join(dir, 'no-aws-config'),
      AWS_SHARED_CREDENTIALS_FILE: join(dir, 'no-aws-credentials'),
      ...extra,
    }),
    async createBucket(bucket) {
      await client.send(new CreateBucketCommand({ Bucket: bucket }));
    },
    bytes,
    text: async (bucket, key) => (await bytes(bucket, key)).toString('utf8'),
    async exists(bucket, key) {
      try {
        await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
        return true;
      } catch {
        return false;
      }
    },
    partSizes(bucket) {
      const [upload, ...others] = existsSync(uploadsDir(root, bucket)) ? readdirSync(uploadsDir(root, bucket)) : [];
      if (upload === undefined || others.length > 0) throw new Error(`not one unfinished upload in ${bucket}`);
      const at = join(uploadsDir(root, bucket), upload);
      const numbers = readdirSync(at)
        .filter((name) => /^\d+$/.test(name))
        .map(Number)
        .sort((a, b) => a - b);
      return numbers.map((n) => statSync(join(at, String(n))).size);
    },
    unfinishedUploads(bucket) {
      const at = uploadsDir(root, bucket);
      return existsSync(at) ? readdirSync(at) : [];
    },
    async close() {
      client.destroy();
      await server.close();
    },
  };
}

interface KoaContext {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  type: string;
  body: unknown;
  query: Record<string, string | string[] | undefined>;
  status: number;
}
