import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { AbortMultipartUploadCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli, serveConnection, spawnCli, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';
import { STORE_KEYS, startS3Store, type S3Store } from '../helpers/s3-store.js';

// hash, optout-check and remap-due reading from and writing to an S3-compatible store started here on loopback.
const dir = tempDir('s3-commands');
const BUCKET = 'team';
let store: S3Store;
let serve: ServeProcess;
let parts = '';

function emails(from: number, to: number): string {
  const lines = ['id,email'];
  for (let i = from; i < to; i++) lines.push(`${i},${i % 53 === 0 ? `broken-${i}` : `user.${i}@example.com`}`);
  return `${lines.join('\n')}\n`;
}

/** A raw UID as the service writes one: 32 bytes, base64. */
function rawUid(i: number): string {
  return Buffer.alloc(32, i % 251).toString('base64');
}

async function put(key: string, body: string | Buffer): Promise<void> {
  await store.client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: body }));
}

/** A run against the store and, for a command that asks the service, the local service. */
function cli(args: string[], env: Record<string, string> = {}) {
  const asks = args[0] !== 'hash';
  return runCli([...args, ...(asks ? serveConnection(serve).args : [])], {
    env: { ...serveConnection(serve).env, ...store.env(env) },
  });
}

/** Requests the service has answered so far, every endpoint but the statistics that tests read. */
async function requests(): Promise<number> {
  const counts = Object.entries((await serve.stats()).requests);
  return counts.filter(([path]) => !path.startsWith('/_local/')).reduce((sum, [, n]) => sum + n, 0);
}

beforeAll(async () => {
  ensureBuilt();
  store = await startS3Store(dir.path);
  await store.createBucket(BUCKET);
  parts = dir.file('parts');
  mkdirSync(parts);
  for (let p = 0; p < 3; p++) {
    const body = gzipSync(emails(p * 700, (p + 1) * 700));
    dir.file(join('parts', `data_${p}.csv.gz`), body);
    await put(`unload/data_${p}.csv.gz`, body);
  }
  await put('unload/_SUCCESS', '');
  const uids = ['raw_uid', ...Array.from({ length: 300 }, (_, i) => rawUid(i))].join('\n');
  dir.file('uids.csv', `${uids}\n`);
  await put('uids/uids.csv', `${uids}\n`);
  serve = await startServe();
}, 120_000);

afterAll(async () => {
  await serve?.stop();
  await store?.close();
  dir.remove();
});

describe('hash with s3:// inputs and outputs', () => {
  it('a many-part gzip unload in a bucket hashes to the same bytes as the same parts on disk', async () => {
    const local = dir.file('hashed.csv');
    const fromDisk = await cli(['hash', join(parts, 'data_*.csv.gz'), '--email-col', 'email', '-o', local, '--quiet']);
    expect(fromDisk.stderr).toBe('');
    expect(fromDisk.code).toBe(0);
    const inStore = await cli([
      'hash',
      `s3://${BUCKET}/unload/data_*.csv.gz`,
      '--email-col',
      'email',
      '-o',
      `s3://${BUCKET}/hashed/all.csv.gz`,
      '--quiet',
    ]);
    expect(inStore.stderr).toBe('');
    expect(inStore.code).toBe(0);
    const expected = readFileSync(local);
    expect(expected.toString('utf8').split('\n').length).toBe(2102);
    expect(gunzipSync(await store.bytes(BUCKET, 'hashed/all.csv.gz')).equals(expected)).toBe(true);
  });

  it('--bad-rows to s3:// lists the skipped records as the file would', async () => {
    const broken = `id,email\n1,a@example.com\n2,"unclosed\n`;
    dir.file('broken.csv', broken);
    await put('broken/rows.csv', broken);
    const local = dir.file('bad-rows.csv');
    const args = ['--email-col', 'email', '--on-bad-row', 'skip', '--quiet'];
    const fromDisk = await cli([
      'hash',
      dir.file('broken.csv'),
      ...args,
      '-o',
      dir.file('h1.csv'),
      '--bad-rows',
      local,
    ]);
    expect(fromDisk.code).toBe(9);
    const inStore = await cli([
      'hash',
      `s3://${BUCKET}/broken/rows.csv`,
      ...args,
      '-o',
      dir.file('h2.csv'),
      '--bad-rows',
      `s3://${BUCKET}/broken/bad-rows.csv`,
    ]);
    expect(inStore.code).toBe(9);
    const listed = readFileSync(local, 'utf8').replaceAll(dir.file('broken.csv'), `s3://${BUCKET}/broken/rows.csv`);
    expect(listed.split('\n').length).toBeGreaterThan(2);
    expect(await store.text(BUCKET, 'broken/bad-rows.csv')).toBe(listed);
  });

  it('--output-dir with s3:// inputs is a usage error in one line', async () => {
    const refused = await cli(['hash', `s3://${BUCKET}/unload/data_*.csv.gz`, '--output-dir', dir.path]);
    expect(refused.stderr).toBe(
      `uid2-batch: --output-dir names its outputs after local inputs: 's3://${BUCKET}/unload/data_*.csv.gz' is in S3; use -o s3://BUCKET/KEY or -o FILE instead\n`,
    );
    expect(refused.code).toBe(2);
  });

  it('an output object already there is refused in one line before a row is read, and kept', async () => {
    await put('taken/out.csv', 'kept\n');
    const refused = await cli([
      'hash',
      join(parts, 'data_0.csv.gz'),
      '--email-col',
      'email',
      '-o',
      `s3://${BUCKET}/taken/out.csv`,
    ]);
    expect(refused.stderr).toBe(
      `uid2-batch: s3://${BUCKET}/taken/out.csv: already exists; delete it first (aws s3 rm s3://${BUCKET}/taken/out.csv) or choose another key\n`,
    );
    expect(refused.code).toBe(1);
    expect(await store.text(BUCKET, 'taken/out.csv')).toBe('kept\n');
  });
});

describe('optout-check with s3:// inputs and outputs', () => {
  it('a file of raw UIDs in a bucket checks to the same bytes as the file on disk', async () => {
    const local = dir.file('checked.csv');
    const fromDisk = await cli(['optout-check', dir.file('uids.csv'), '-o', local, '--quiet']);
    expect(fromDisk.stderr).toBe('');
    expect(fromDisk.code).toBe(0);
    const inStore = await cli([
      'optout-check',
      `s3://${BUCKET}/uids/*.csv`,
      '-o',
      `s3://${BUCKET}/checked/uids.csv`,
      '--quiet',
    ]);
    expect(inStore.stderr).toBe('');
    expect(inStore.code).toBe(0);
    const expected = readFileSync(local, 'utf8');
    expect(expected.split('\n').length).toBe(302);
    expect(await store.text(BUCKET, 'checked/uids.csv')).toBe(expected);
  });

  it('a missing bucket for the output is one line, before anything is sent', async () => {
    const before = await requests();
    const refused = await cli(['optout-check', dir.file('uids.csv'), '-o', 's3://no-such-bucket/out.csv']);
    expect(refused.stderr).toBe(
      "uid2-batch: s3://no-such-bucket/out.csv: the bucket 'no-such-bucket' does not exist; check the bucket name and the region (AWS_REGION)\n",
    );
    expect(refused.code).toBe(1);
    expect(await requests()).toBe(before);
  });
});

describe('remap-due writing its changes to s3://', () => {
  it('the changes object holds the bytes of the changes file', async () => {
    const state = dir.file('state.db');
    const mapped = await cli([
      'map',
      join(parts, 'data_0.csv.gz'),
      '--email-col',
      'email',
      '--state',
      state,
      '-o',
      dir.file('mapped.csv'),
      '--quiet',
    ]);
    expect(mapped.code).toBe(0);
    const copy = dir.file('state-copy.db');
    copyFileSync(state, copy);
    // far enough ahead that every entry is due; both runs ask the same service at the same salts
    const later = ['--now', '2099-01-01T00:30:00Z', '--quiet'];
    const local = dir.file('changes.csv');
    const toFile = await cli(['remap-due', '--state', state, ...later, '-o', local]);
    expect(toFile.stderr).toBe('');
    expect(toFile.code).toBe(0);
    const toStore = await cli(['remap-due', '--state', copy, ...later, '-o', `s3://${BUCKET}/changes/today.csv`]);
    expect(toStore.stderr).toBe('');
    expect(toStore.code).toBe(0);
    expect(await store.text(BUCKET, 'changes/today.csv')).toBe(readFileSync(local, 'utf8'));
  });

  it('denied credentials for the changes object: one line, nothing sent, nothing written', async () => {
    const state = dir.file('state.db');
    const before = await requests();
    const refused = await cli(
      ['remap-due', '--state', state, '--now', '2099-01-01T00:30:00Z', '-o', `s3://${BUCKET}/changes/denied.csv`],
      {
        AWS_ACCESS_KEY_ID: 'WRONGKEY',
        AWS_SECRET_ACCESS_KEY: 'wrong-secret-value',
      },
    );
    expect(refused.stderr).toBe(
      `uid2-batch: s3://${BUCKET}/changes/denied.csv: access denied; give the credentials in use s3:GetObject / s3:ListBucket (reading) or s3:PutObject (writing) on it\n`,
    );
    expect(refused.stderr).not.toContain('wrong-secret-value');
    expect(refused.code).toBe(1);
    expect(await requests()).toBe(before);
    expect(await store.exists(BUCKET, 'changes/denied.csv')).toBe(false);
  });
});

/** An input whose hashed output is many upload parts (8 MiB each) long, made once. */
function longInput(): string {
  const path = dir.file('long.csv');
  if (existsSync(path)) return path;
  const pad = 'z'.repeat(120);
  const rows = ['id,email,pad'];
  for (let i = 0; i < 150_000; i++) rows.push(`${i},user.${i}@example.com,${pad}`);
  return dir.file('long.csv', `${rows.join('\n')}\n`);
}

/** Aborts, with valid credentials, what a run could not: as the lifecycle rule would. */
async function dropUnfinishedUploads(bucket: string, key: string): Promise<void> {
  for (const id of store.unfinishedUploads(bucket))
    await store.client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: id }));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A port on loopback where nothing listens. */
async function closedPort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * A container credentials endpoint (as ECS serves one) whose credentials are valid for the first `good` requests
 * and then are not: a session that expires during a long run. Each set expires within seconds, so the SDK asks
 * again before each request.
 */
async function expiringCredentials(good: number): Promise<{ url: string; server: Server }> {
  let served = 0;
  const server = createServer((_req, res) => {
    served++;
    const keys =
      served <= good
        ? { AccessKeyId: STORE_KEYS.AWS_ACCESS_KEY_ID, SecretAccessKey: STORE_KEYS.AWS_SECRET_ACCESS_KEY }
        : { AccessKeyId: 'EXPIREDKEY', SecretAccessKey: 'expired-secret-value' };
    res.setHeader('content-type', 'application/json');
    res.end(
      JSON.stringify({ ...keys, Token: 'session-token-value', Expiration: new Date(Date.now() + 2000).toISOString() }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/credentials`, server };
}

describe('faults', () => {
  it('an unreachable store: one line naming it, nothing sent to the service', async () => {
    const port = await closedPort();
    const before = await requests();
    const failed = await cli(['optout-check', `s3://${BUCKET}/uids/uids.csv`, '-o', dir.file('never.csv')], {
      AWS_ENDPOINT_URL: `http://127.0.0.1:${port}`,
    });
    expect(failed.stderr).toBe(
      `uid2-batch: s3://${BUCKET}/uids/uids.csv: the object store at http://127.0.0.1:${port} cannot be reached (ECONNREFUSED); check --s3-endpoint (else AWS_ENDPOINT_URL) and the network\n`,
    );
    expect(failed.code).toBe(1);
    expect(await requests()).toBe(before);
  }, 60_000);

  it('credentials that expire mid-upload: the run stops with one line, exit 1, and no object appears', async () => {
    const input = longInput();
    // good for checking the bucket and the key, starting the upload and its first part or two
    const credentials = await expiringCredentials(5);
    try {
      const failed = await cli(
        ['hash', input, '--email-col', 'email', '-o', `s3://${BUCKET}/long/hashed.csv`, '--quiet'],
        {
          AWS_ACCESS_KEY_ID: '',
          AWS_SECRET_ACCESS_KEY: '',
          AWS_CONTAINER_CREDENTIALS_FULL_URI: credentials.url,
        },
      );
      expect(failed.stderr).toBe(
        `uid2-batch: s3://${BUCKET}/long/hashed.csv: the upload failed: the AWS credentials were refused; check or renew them (AWS_PROFILE, AWS_ACCESS_KEY_ID)\n`,
      );
      expect(failed.stderr).not.toMatch(/EXPIREDKEY|expired-secret-value|session-token-value/);
      expect(failed.code).toBe(1);
      expect(await store.exists(BUCKET, 'long/hashed.csv')).toBe(false);
      // nor can the parts be dropped with those credentials: the bucket's lifecycle rule does it (docs/s3.md)
      expect(store.unfinishedUploads(BUCKET)).toHaveLength(1);
      await dropUnfinishedUploads(BUCKET, 'long/hashed.csv');
    } finally {
      await new Promise<void>((resolve) => credentials.server.close(() => resolve()));
    }
  }, 120_000);

  it('hash interrupted (SIGINT) with parts already sent: exit 130, no object, no unfinished upload', async () => {
    const run = spawnCli(['hash', longInput(), '--email-col', 'email', '-o', `s3://${BUCKET}/long/interrupted.csv`], {
      env: store.env(),
    });
    try {
      for (let waited = 0; store.unfinishedUploads(BUCKET).length === 0 && waited < 60_000; waited += 10)
        await sleep(10);
      expect(store.unfinishedUploads(BUCKET)).toHaveLength(1);
      run.child.kill('SIGINT');
      const ended = await run.done;
      expect(ended.code).toBe(130);
      expect(ended.stderr).toContain('interrupted');
    } finally {
      if (run.child.exitCode === null && run.child.pid !== undefined) process.kill(run.child.pid, 'SIGKILL');
    }
    expect(await store.exists(BUCKET, 'long/interrupted.csv')).toBe(false);
    expect(store.unfinishedUploads(BUCKET)).toEqual([]);
  }, 120_000);
});
