import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import {
  CreateBucketCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { startS3Store, type S3Store } from '../helpers/s3-store.js';
import { seeded } from '../helpers/seeded-random.js';
import { runCli, serveConnection, spawnCli, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';

// `map` reading from and writing to an S3-compatible store that this file starts on loopback.
const dir = tempDir('map-s3');
const HEADER = 'id,email,phone';
const KEYS = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER' };
let store: S3Store;
let endpoint = '';
let s3: S3Client;
let serve: ServeProcess;
let exportDir = '';
/** How each object the store holds was made, by key. */
let created = new Map<string, string>();

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function row(i: number): string {
  const email = i % 41 === 40 ? `broken-${i}` : `user.${i % 997}@example.com`;
  const phone = i % 3 === 0 ? '' : `+1617555${String(i % 10_000).padStart(4, '0')}`;
  return `${String(i).padStart(5, '0')},${email},${phone}`;
}

/** The environment of a CLI run against the store: its address, and credentials it accepts unless replaced. */
function storeEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...KEYS,
    AWS_ENDPOINT_URL: endpoint,
    AWS_REGION: 'us-east-1',
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_CONFIG_FILE: join(dir.path, 'no-aws-config'),
    AWS_SHARED_CREDENTIALS_FILE: join(dir.path, 'no-aws-credentials'),
    ...extra,
  };
}

const MAP = ['--email-col', 'email', '--phone-col', 'phone', '--quiet'];

function mapArgs(args: string[]): string[] {
  const { args: connection } = serveConnection(serve);
  return ['map', ...args, ...MAP, ...connection];
}

function run(args: string[], env: Record<string, string> = {}) {
  return runCli(mapArgs(args), { env: { ...serveConnection(serve).env, ...storeEnv(env) } });
}

/** Identity map requests the service has answered so far. */
async function mapRequests(): Promise<number> {
  return (await serve.stats()).requests['/v3/identity/map'] ?? 0;
}

async function objectText(key: string): Promise<string> {
  const out = await s3.send(new GetObjectCommand({ Bucket: 'unload', Key: key }));
  return (await out.Body?.transformToString()) ?? '';
}

async function objectExists(key: string): Promise<boolean> {
  try {
    await s3.send(new HeadObjectCommand({ Bucket: 'unload', Key: key }));
    return true;
  } catch {
    return false;
  }
}

beforeAll(async () => {
  ensureBuilt();
  store = await startS3Store(dir.path);
  endpoint = store.endpoint;
  s3 = store.client;
  created = store.made;
  await s3.send(new CreateBucketCommand({ Bucket: 'unload' }));
  exportDir = dir.file('export');
  mkdirSync(exportDir);
  const lines = Array.from({ length: 3000 }, (_, i) => row(i));
  for (let p = 0; p < 3; p++) {
    const body = gzipSync(`${HEADER}\n${lines.slice(p * 1000, (p + 1) * 1000).join('\n')}\n`);
    dir.file(join('export', `data_${p}_0_0.csv.gz`), body);
    await s3.send(new PutObjectCommand({ Bucket: 'unload', Key: `exports/data_${p}_0_0.csv.gz`, Body: body }));
  }
  await s3.send(new PutObjectCommand({ Bucket: 'unload', Key: 'exports/_SUCCESS', Body: '' }));
  // a part whose second line holds a NUL byte: the run reads it last and fails there
  const bad = gzipSync(`${HEADER}\n00001,a\u0000@example.com,\n`);
  await s3.send(
    new PutObjectCommand({ Bucket: 'unload', Key: 'broken/data_0.csv.gz', Body: gzipSync(`${HEADER}\n${row(0)}\n`) }),
  );
  await s3.send(new PutObjectCommand({ Bucket: 'unload', Key: 'broken/data_1.csv.gz', Body: bad }));
  serve = await startServe();
}, 120_000);

afterAll(async () => {
  await serve?.stop();
  await store?.close();
  dir.remove();
});

describe('map with s3:// inputs and outputs', () => {
  it('a many-part gzip unload in a bucket maps to the same bytes as the same parts on disk', async () => {
    const fromDisk = dir.file('disk.csv');
    const local = await run([join(exportDir, 'data_*_0_0.csv.gz'), '-o', fromDisk]);
    expect(local.stderr).toBe('');
    expect(local.code).toBe(0);
    const fromStore = dir.file('store.csv');
    const remote = await run(['s3://unload/exports/data_*_0_0.csv.gz', '-o', fromStore]);
    expect(remote.stderr).toBe('');
    expect(remote.code).toBe(0);
    const mapped = readFileSync(fromDisk, 'utf8');
    expect(mapped.split('\n').length).toBe(3002);
    expect(readFileSync(fromStore, 'utf8')).toBe(mapped);
  });

  it('an output to s3:// holds the bytes an output to a file holds, gzipped by its name too', async () => {
    const file = dir.file('to-file.csv');
    expect((await run(['s3://unload/exports/data_1_0_0.csv.gz', '-o', file])).code).toBe(0);
    const upload = await run(['s3://unload/exports/data_1_0_0.csv.gz', '-o', 's3://unload/out/one.csv']);
    expect(upload.stderr).toBe('');
    expect(upload.code).toBe(0);
    expect(await objectText('out/one.csv')).toBe(readFileSync(file, 'utf8'));
    const gz = await run(['s3://unload/exports/data_1_0_0.csv.gz', '-o', 's3://unload/out/one.csv.gz']);
    expect(gz.code).toBe(0);
    const body = await s3.send(new GetObjectCommand({ Bucket: 'unload', Key: 'out/one.csv.gz' }));
    const bytes = Buffer.from((await body.Body?.transformToByteArray()) ?? []);
    expect(bytes.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
  });

  it('--s3-endpoint names the store when no AWS endpoint variable does; a bad one is a usage error', async () => {
    const out = dir.file('by-flag.csv');
    const byFlag = await run(['s3://unload/exports/data_2_0_0.csv.gz', '--s3-endpoint', endpoint, '-o', out], {
      AWS_ENDPOINT_URL: '',
    });
    expect(byFlag.stderr).toBe('');
    expect(byFlag.code).toBe(0);
    expect(readFileSync(out, 'utf8').split('\n')[1]).toMatch(/^02000,/);
    const bad = await run(['s3://unload/exports/data_2_0_0.csv.gz', '--s3-endpoint', 'ftp://user:pw@host/']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe(
      'uid2-batch: --s3-endpoint must be an http:// or https:// URL with a host, such as http://127.0.0.1:9000\n',
    );
  });

  it('--rejects to s3:// holds the bytes of --rejects to a file', async () => {
    const file = dir.file('rejects.csv');
    const local = await run(['s3://unload/exports/data_0_0_0.csv.gz', '-o', dir.file('r-out.csv'), '--rejects', file]);
    expect(local.code).toBe(0);
    const remote = await run([
      's3://unload/exports/data_0_0_0.csv.gz',
      '-o',
      dir.file('r-out-2.csv'),
      '--rejects',
      's3://unload/out/rejects.csv',
    ]);
    expect(remote.stderr).toBe('');
    expect(remote.code).toBe(0);
    const rejected = readFileSync(file, 'utf8');
    expect(rejected.split('\n').length).toBeGreaterThan(3);
    expect(await objectText('out/rejects.csv')).toBe(rejected);
  });

  it.each([
    // notes that Parquet cannot compress away, so that its row groups fill several 8 MiB parts before the end
    [
      'Parquet',
      'parquet',
      (random: () => number) => Array.from({ length: 40 }, () => Math.floor(random() * 2 ** 52).toString(36)).join(''),
    ],
    // many parts of CSV, so that the multipart upload is under way for a while before the end
    ['CSV', 'csv', () => 'y'.repeat(600)],
  ] as const)(
    'an interrupted %s run with parts already sent makes no object, leaves no upload and writes no local file',
    async (_name, ext, cell) => {
      const tmp = dir.file(`tmp-interrupted-${ext}`);
      mkdirSync(tmp);
      const random = seeded(29);
      const input = dir.file(
        `interrupted-${ext}.csv`,
        `${HEADER},pad\n${Array.from({ length: 80_000 }, (_, i) => `${row(i)},${cell(random)}`).join('\n')}\n`,
      );
      const cli = spawnCli(mapArgs([input, '-o', `s3://unload/out/interrupted.${ext}`]), {
        env: { ...serveConnection(serve).env, ...storeEnv({ TMPDIR: tmp }) },
      });
      try {
        for (let waited = 0; store.unfinishedUploads('unload').length === 0 && waited < 60_000; waited += 20)
          await sleep(20);
        expect(store.unfinishedUploads('unload')).toHaveLength(1);
        // the output goes up as it is written: nothing of it is kept on the local disk
        expect(readdirSync(tmp)).toEqual([]);
        cli.child.kill('SIGTERM');
        const ended = await cli.done;
        expect(ended.code).toBe(130);
      } finally {
        if (cli.child.exitCode === null && cli.child.pid !== undefined) process.kill(cli.child.pid, 'SIGKILL');
      }
      expect(await objectExists(`out/interrupted.${ext}`)).toBe(false);
      expect(store.unfinishedUploads('unload')).toEqual([]);
      expect(readdirSync(tmp)).toEqual([]);
    },
    120_000,
  );

  it('an output over one upload part (8 MiB) is uploaded in parts and holds the same bytes', async () => {
    const pad = 'x'.repeat(600);
    const rows = Array.from({ length: 16_000 }, (_, i) => `${row(i)},${pad}`);
    await s3.send(
      new PutObjectCommand({
        Bucket: 'unload',
        Key: 'wide/data.csv.gz',
        Body: gzipSync(`${HEADER},pad\n${rows.join('\n')}\n`),
      }),
    );
    const file = dir.file('wide.csv');
    expect((await run(['s3://unload/wide/data.csv.gz', '-o', file])).code).toBe(0);
    const upload = await run(['s3://unload/wide/data.csv.gz', '-o', 's3://unload/out/wide.csv']);
    expect(upload.stderr).toBe('');
    expect(upload.code).toBe(0);
    const local = readFileSync(file);
    expect(local.length).toBeGreaterThan(9 * 1024 * 1024);
    // the store says how each object was made: Post is a completed multipart upload, Put a single request
    expect(created.get('out/wide.csv')).toBe('ObjectCreated:Post');
    expect(created.get('out/one.csv') ?? 'ObjectCreated:Put').toBe('ObjectCreated:Put');
    const uploaded = Buffer.from(await objectText('out/wide.csv'));
    expect(uploaded.length).toBe(local.length);
    // compared whole, not element by element: a deep equality of 10 MB takes minutes
    expect(uploaded.equals(local)).toBe(true);
  }, 120_000);

  it('a Parquet output to s3:// holds the bytes of the same output to a file', async () => {
    const file = dir.file('to-file.parquet');
    expect((await run(['s3://unload/exports/data_2_0_0.csv.gz', '-o', file])).code).toBe(0);
    const upload = await run(['s3://unload/exports/data_2_0_0.csv.gz', '-o', 's3://unload/out/two.parquet']);
    expect(upload.stderr).toBe('');
    expect(upload.code).toBe(0);
    const body = await s3.send(new GetObjectCommand({ Bucket: 'unload', Key: 'out/two.parquet' }));
    const bytes = Buffer.from((await body.Body?.transformToByteArray()) ?? []);
    expect(bytes.equals(readFileSync(file))).toBe(true);
  });

  it('a Parquet output to s3:// of several parts, encoded on other threads, holds the bytes of the file', async () => {
    const random = seeded(31);
    const note = () => Array.from({ length: 30 }, () => Math.floor(random() * 2 ** 52).toString(36)).join('');
    const input = dir.file(
      'threads-parquet.csv',
      `${HEADER},note\n${Array.from({ length: 40_000 }, (_, i) => `${row(i)},${note()}`).join('\n')}\n`,
    );
    const file = dir.file('threads.parquet');
    expect((await run([input, '-o', file, '--threads', '2'])).code).toBe(0);
    const upload = await run([input, '-o', 's3://unload/out/threads.parquet', '--threads', '2']);
    expect(upload.stderr).toBe('');
    expect(upload.code).toBe(0);
    const local = readFileSync(file);
    expect(local.length).toBeGreaterThan(9 * 1024 * 1024);
    expect(created.get('out/threads.parquet')).toBe('ObjectCreated:Post');
    const body = await s3.send(new GetObjectCommand({ Bucket: 'unload', Key: 'out/threads.parquet' }));
    const bytes = Buffer.from((await body.Body?.transformToByteArray()) ?? []);
    expect(bytes.equals(local)).toBe(true);
    // a Parquet input's reading thread encodes the Parquet output itself, and hands the sink its bytes
    const again = dir.file('threads-again.parquet');
    expect((await run([file, '-o', again, '--threads', '2'])).code).toBe(0);
    const uploadAgain = await run([file, '-o', 's3://unload/out/threads-again.parquet', '--threads', '2']);
    expect(uploadAgain.stderr).toBe('');
    expect(uploadAgain.code).toBe(0);
    const bodyAgain = await s3.send(new GetObjectCommand({ Bucket: 'unload', Key: 'out/threads-again.parquet' }));
    const bytesAgain = Buffer.from((await bodyAgain.Body?.transformToByteArray()) ?? []);
    expect(bytesAgain.equals(readFileSync(again))).toBe(true);
  }, 120_000);

  it('a run that fails leaves no object', async () => {
    const failed = await run(['s3://unload/broken/data_*.csv.gz', '-o', 's3://unload/out/failed.csv']);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/s3:\/\/unload\/broken\/data_1\.csv\.gz: line 2: NUL byte/);
    expect(await objectExists('out/failed.csv')).toBe(false);
  });

  it('an existing object is refused in one line, before anything is sent to the service', async () => {
    await s3.send(new PutObjectCommand({ Bucket: 'unload', Key: 'out/taken.csv', Body: 'kept\n' }));
    const before = await mapRequests();
    const refused = await run(['s3://unload/exports/data_0_0_0.csv.gz', '-o', 's3://unload/out/taken.csv']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      'uid2-batch: s3://unload/out/taken.csv: already exists; delete it first (aws s3 rm s3://unload/out/taken.csv) or choose another key\n',
    );
    expect(await mapRequests()).toEqual(before);
    expect(await objectText('out/taken.csv')).toBe('kept\n');
  });

  it('--summary-json and --metrics-file to s3:// are put whole at the end, replaced by the next run, and say a failure', async () => {
    const reports = [
      '--summary-json',
      's3://unload/reports/summary.json',
      '--metrics-file',
      's3://unload/reports/uid2.prom',
    ];
    const local = dir.file('reports-local.json');
    expect(
      (await run(['s3://unload/exports/data_2_0_0.csv.gz', '-o', dir.file('r-local.csv'), '--summary-json', local]))
        .code,
    ).toBe(0);
    const expected = JSON.parse(readFileSync(local, 'utf8')) as Record<string, unknown>;
    for (const round of [1, 2]) {
      const done = await run(['s3://unload/exports/data_2_0_0.csv.gz', '-o', dir.file(`r-${round}.csv`), ...reports]);
      expect(done.stderr).toBe('');
      expect(done.code).toBe(0);
      const summary = JSON.parse(await objectText('reports/summary.json')) as Record<string, unknown>;
      expect(summary).toMatchObject({ command: 'map', outcome: 'completed', exit_code: 0 });
      for (const key of ['rows', 'status', 'requests']) expect(summary[key], key).toEqual(expected[key]);
      const metrics = await objectText('reports/uid2.prom');
      expect(metrics.startsWith('# HELP uid2_batch_')).toBe(true);
      expect(metrics).toMatch(/^uid2_batch_exit_code\{command="map"\} 0$/m);
    }
    // a failed run's reports say so, as local ones do: each object is put whole, once the run has ended
    const failed = await run(['s3://unload/broken/data_*.csv.gz', '-o', dir.file('r-failed.csv'), ...reports]);
    expect(failed.code).toBe(1);
    const summary = JSON.parse(await objectText('reports/summary.json')) as Record<string, unknown>;
    expect(summary).toMatchObject({ command: 'map', outcome: 'failed', exit_code: 1 });
    expect(await objectText('reports/uid2.prom')).toMatch(/^uid2_batch_exit_code\{command="map"\} 1$/m);
  });

  describe('--shard K/N', () => {
    /** Runs the N runners of `input` one after another; their outputs put end to end in K order. */
    async function shardsJoined(input: string, count: number, extra: string[] = []): Promise<string> {
      const outs: string[] = [];
      for (let k = 0; k < count; k++) {
        const out = dir.file(`shard-${basename(input)}-${k}-${count}.csv`);
        const r = await run([input, ...extra, '--shard', `${k}/${count}`, '-o', out]);
        expect(r.stderr).toBe('');
        expect(r.code).toBe(0);
        outs.push(readFileSync(out, 'utf8'));
      }
      return outs.join('');
    }

    it('several objects: whole parts per runner, the outputs joined in K order are the one-runner output', async () => {
      const whole = dir.file('shard-parts-whole.csv');
      expect((await run(['s3://unload/exports/data_*_0_0.csv.gz', '-o', whole])).code).toBe(0);
      const expected = readFileSync(whole, 'utf8');
      expect(expected.split('\n').length).toBe(3002);
      // three parts over two runners, and over four (one runner has none)
      for (const count of [2, 4])
        expect(await shardsJoined('s3://unload/exports/data_*_0_0.csv.gz', count)).toBe(expected);
    });

    it('one plain object: record-aligned ranges read by ranged GETs, joined in K order the one-runner output', async () => {
      // quoted line breaks to cut around, CRLF and LF line ends
      const lines = Array.from(
        { length: 1500 },
        (_, i) => `${row(i)},${i % 7 === 0 ? `"one\r\ntwo ""${i}"""` : `n${i}`}${i % 3 === 0 ? '\r' : ''}`,
      );
      await s3.send(
        new PutObjectCommand({
          Bucket: 'unload',
          Key: 'plain/rows.csv',
          Body: `${HEADER},note\n${lines.join('\n')}\n`,
        }),
      );
      const jsonl = Array.from({ length: 700 }, (_, i) =>
        JSON.stringify({
          id: i,
          email: `json.${i}@example.com`,
          phone: i % 2 === 0 ? '' : `+1617556${String(i).padStart(4, '0')}`,
        }),
      );
      await s3.send(new PutObjectCommand({ Bucket: 'unload', Key: 'plain/rows.jsonl', Body: `${jsonl.join('\n')}\n` }));
      for (const input of ['s3://unload/plain/rows.csv', 's3://unload/plain/rows.jsonl']) {
        const whole = dir.file(`shard-whole-${basename(input)}.csv`);
        const one = await run([input, '-o', whole]);
        expect(one.stderr).toBe('');
        expect(one.code).toBe(0);
        const expected = readFileSync(whole, 'utf8');
        expect(expected.split('\n').length).toBeGreaterThan(700);
        for (const count of input.endsWith('.csv') ? [3, 5] : [3])
          expect(await shardsJoined(input, count)).toBe(expected);
      }
    }, 180_000);

    it('one gzip object is refused with the line that says to unload in parts, before the service is asked', async () => {
      const before = await mapRequests();
      const refused = await run(['s3://unload/exports/data_0_0_0.csv.gz', '--shard', '1/2', '-o', dir.file('gz.csv')]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toBe(
        "uid2-batch: --shard cannot split 's3://unload/exports/data_0_0_0.csv.gz': a gzip file can only be read from " +
          'its start; unload the table in parts (several files) and give them all, so each runner takes whole parts\n',
      );
      expect(await mapRequests()).toBe(before);
    });
  });

  it.each([
    [
      'a missing bucket (input)',
      ['s3://no-such-bucket/data.csv'],
      {},
      1,
      "uid2-batch: s3://no-such-bucket/data.csv: the bucket 'no-such-bucket' does not exist; check the bucket name and the region (AWS_REGION)\n",
    ],
    [
      'a missing bucket (output)',
      ['s3://unload/exports/data_0_0_0.csv.gz', '-o', 's3://no-such-bucket/out.csv'],
      {},
      1,
      "uid2-batch: s3://no-such-bucket/out.csv: the bucket 'no-such-bucket' does not exist; check the bucket name and the region (AWS_REGION)\n",
    ],
    [
      'a missing object',
      ['s3://unload/exports/missing.csv'],
      {},
      1,
      'uid2-batch: s3://unload/exports/missing.csv: no such object; check the key (aws s3 ls shows what is there)\n',
    ],
    [
      'a pattern matching nothing',
      ['s3://unload/exports/part-*.csv'],
      {},
      2,
      "uid2-batch: 's3://unload/exports/part-*.csv' matches no object under 's3://unload/exports/'; check the pattern\n",
    ],
    [
      'a bad URL',
      ['s3://Bad_Bucket/data.csv'],
      {},
      2,
      "uid2-batch: 's3://Bad_Bucket/data.csv': 'Bad_Bucket' is not a bucket name; write s3://BUCKET/KEY, e.g. s3://my-bucket/exports/users.csv\n",
    ],
    [
      'no credentials',
      ['s3://unload/exports/data_0_0_0.csv.gz'],
      { AWS_ACCESS_KEY_ID: '', AWS_SECRET_ACCESS_KEY: '' },
      1,
      'uid2-batch: s3://unload/exports/data_0_0_0.csv.gz: no AWS credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run where a role provides them\n',
    ],
    [
      'refused credentials',
      ['s3://unload/exports/data_0_0_0.csv.gz'],
      { AWS_ACCESS_KEY_ID: 'AKIDWRONG', AWS_SECRET_ACCESS_KEY: 'wrong-secret-value' },
      1,
      'uid2-batch: s3://unload/exports/data_0_0_0.csv.gz: the AWS credentials were refused; check or renew them (AWS_PROFILE, AWS_ACCESS_KEY_ID)\n',
    ],
    [
      '--summary-json naming an object that is not a summary',
      ['s3://unload/exports/data_0_0_0.csv.gz', '--summary-json', 's3://unload/exports/data_1_0_0.csv.gz'],
      {},
      2,
      "uid2-batch: --summary-json 's3://unload/exports/data_1_0_0.csv.gz' exists and is not a run summary: it would be replaced; choose another --summary-json key (or remove the object)\n",
    ],
    [
      '--metrics-file naming an object that is not a metrics file',
      ['s3://unload/exports/data_0_0_0.csv.gz', '--metrics-file', 's3://unload/exports/data_1_0_0.csv.gz'],
      {},
      2,
      'uid2-batch: --metrics-file s3://unload/exports/data_1_0_0.csv.gz exists and is not a metrics file of this tool: name a new file (e.g. uid2_batch.prom) or remove it\n',
    ],
    [
      '--output-dir with s3:// inputs',
      ['s3://unload/exports/data_*_0_0.csv.gz', '--output-dir', dir.path],
      {},
      2,
      "uid2-batch: --output-dir names its outputs after local inputs: 's3://unload/exports/data_*_0_0.csv.gz' is in S3; use -o s3://BUCKET/KEY or -o FILE instead\n",
    ],
  ])('%s: one line, its exit code, nothing sent', async (_what, args, env, code, line) => {
    const before = await mapRequests();
    const result = await run(args, env);
    expect(result.stderr).toBe(line);
    expect(result.code).toBe(code);
    expect(result.stdout).toBe('');
    expect(result.stderr).not.toContain('wrong-secret-value');
    expect(await mapRequests()).toEqual(before);
  });
});
