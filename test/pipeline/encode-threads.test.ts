import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packRows, rowEncoder, unpackRows } from '../../src/pipeline/io/output/row-encoders.js';
import type { OpenSinkOptions, TableSink } from '../../src/pipeline/io/table.js';
import type { WorkerPool as WorkerPoolType } from '../../src/pipeline/workers/worker-pool.js';
import { ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli, serveConnection, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';

// Worker threads start from compiled JS, so the threaded paths are exercised through dist/.
type OpenSink = (opts: OpenSinkOptions) => Promise<TableSink>;
type PoolClass = new (options: {
  script: URL;
  size: number;
  workerData?: unknown;
  purpose: string;
}) => WorkerPoolType<unknown, unknown>;

/** Cells that need quoting, escaping, or survive only if lengths (not separators) delimit them. */
const AWKWARD = ['plain', '', 'a,b', 'say "hi"', 'two\nlines', 'cr\rhere', '\u0000nul', 'é😀', ' padded ', '=1+2'];

function rowsFor(n: number, seed: number): string[][] {
  const rows: string[][] = [];
  for (let i = 0; i < n; i++) {
    const width = 3 + ((i * 7 + seed) % 4);
    const row: string[] = [];
    for (let c = 0; c < width; c++) row.push(c === 0 ? `row${i}` : AWKWARD[(i * 31 + c * 17 + seed) % AWKWARD.length]);
    rows.push(row);
  }
  return rows;
}

describe('packRows / unpackRows', () => {
  it('round-trips ragged rows with any characters, absent cells becoming empty', () => {
    const rows = rowsFor(500, 1);
    expect(unpackRows(packRows(rows))).toEqual(rows);
    const withHoles = [['a', undefined, 'c'], [], ['\u0000']];
    expect(unpackRows(packRows(withHoles))).toEqual([['a', '', 'c'], [], ['\u0000']]);
  });

  it('refuses a packing whose lengths do not cover the text', () => {
    const packed = packRows([['abc']]);
    expect(() => unpackRows({ ...packed, text: 'abcd' })).toThrow(/left over/);
  });
});

describe('output encoding on worker threads (dist)', () => {
  let openSink: OpenSink;
  let WorkerPool: PoolClass;
  const dir = tempDir('uid2-encode-threads-');

  beforeAll(async () => {
    ensureBuilt();
    openSink = (
      (await import(pathToFileURL(join(ROOT, 'dist', 'pipeline', 'io', 'output', 'sink.js')).href)) as {
        openSink: OpenSink;
      }
    ).openSink;
    WorkerPool = (
      (await import(pathToFileURL(join(ROOT, 'dist', 'pipeline', 'workers', 'worker-pool.js')).href)) as {
        WorkerPool: PoolClass;
      }
    ).WorkerPool;
  });
  afterAll(() => dir.remove());

  async function writeWith(
    threads: number,
    format: 'csv' | 'jsonl',
    chunks: string[][][],
    name: string,
  ): Promise<string> {
    const path = join(dir.path, `${name}-${threads}.${format}`);
    const sink = await openSink({ path, format, header: ['id', 'b', 'c', 'd', 'e', 'f'], threads });
    for (const chunk of chunks) await sink.writeRows(chunk);
    await sink.commit();
    return readFileSync(path, 'utf8');
  }

  it.each(['csv', 'jsonl'] as const)(
    '%s: 0, 1 and 2 threads write the same bytes, chunks in the order given',
    async (format) => {
      const chunks = Array.from({ length: 40 }, (_, k) => rowsFor(50 + (k % 7) * 30, k));
      const inline = await writeWith(0, format, chunks, 'same');
      expect(await writeWith(1, format, chunks, 'same')).toBe(inline);
      expect(await writeWith(2, format, chunks, 'same')).toBe(inline);
      // the inline bytes are the encoder's: header, then every chunk in order
      const encode = rowEncoder(format === 'csv' ? { format } : { format, header: ['id', 'b', 'c', 'd', 'e', 'f'] });
      const expected =
        (format === 'csv' ? encode([['id', 'b', 'c', 'd', 'e', 'f']]) : '') + chunks.map((c) => encode(c)).join('');
      expect(inline).toBe(expected);
    },
  );

  it('rows changed after writeRows returns do not change what is written', async () => {
    const path = join(dir.path, 'mutated.csv');
    const sink = await openSink({ path, format: 'csv', header: ['a'], threads: 1 });
    const rows = [['before']];
    await sink.writeRows(rows);
    rows[0][0] = 'after';
    await sink.commit();
    expect(readFileSync(path, 'utf8')).toBe('a\nbefore\n');
  });

  it('a task that throws in a worker rejects with a message naming the work; the pool goes on', async () => {
    const script = join(dir.path, 'throwing-worker.mjs');
    writeFileSync(
      script,
      `import { serveTasks } from ${JSON.stringify(pathToFileURL(join(ROOT, 'dist', 'pipeline', 'workers', 'worker-pool.js')).href)};\n` +
        `serveTasks((n) => { if (n === 3) throw new Error('three is bad'); return { output: n * 2 }; });\n`,
    );
    const pool = new WorkerPool({ script: pathToFileURL(script), size: 2, purpose: 'doubling' });
    try {
      const answers = await Promise.allSettled([1, 2, 3, 4].map((n) => pool.run(n)));
      expect(answers.map((a) => (a.status === 'fulfilled' ? a.value : (a.reason as Error).message))).toEqual([
        2,
        4,
        'doubling failed in a worker thread: three is bad',
        8,
      ]);
    } finally {
      await pool.close();
    }
  });

  it('a worker thread that dies fails its task and every later one with a clear error', async () => {
    const script = join(dir.path, 'dying-worker.mjs');
    writeFileSync(
      script,
      `import { serveTasks } from ${JSON.stringify(pathToFileURL(join(ROOT, 'dist', 'pipeline', 'workers', 'worker-pool.js')).href)};\n` +
        `serveTasks(() => process.exit(7));\n`,
    );
    const pool = new WorkerPool({ script: pathToFileURL(script), size: 1, purpose: 'output encoding' });
    try {
      await expect(pool.run('x')).rejects.toThrow('output encoding: a worker thread exited unexpectedly (code 7)');
      await expect(pool.run('y')).rejects.toThrow(/exited unexpectedly/);
    } finally {
      await pool.close();
    }
  });

  it('a chunk that cannot be encoded fails writeRows on a threaded sink; abort leaves no file', async () => {
    const path = join(dir.path, 'never.csv');
    const sink = await openSink({ path, format: 'csv', header: ['a'], threads: 1 });
    // a cell that cannot become text: the failure must reach the caller, not vanish on the way to a thread
    await expect(sink.writeRows([[{ toString: null } as unknown as string]])).rejects.toThrow();
    await sink.abort();
    expect(() => readFileSync(path)).toThrow(/ENOENT/);
  });
});

describe('--threads 0 and 1 give the same output (built CLI)', () => {
  const dir = tempDir('uid2-threads-cli-');
  let serve: ServeProcess | undefined;
  let input = '';

  beforeAll(async () => {
    ensureBuilt();
    // a few thousand rows with valid, invalid and empty identifiers, repeats and cells that need quoting
    let text = 'id,email,phone,note\n';
    for (let i = 0; i < 4000; i++) {
      const email = i % 13 === 0 ? 'not-an-email' : i % 11 === 0 ? '' : `User.${i % 1500}+tag@Gmail.com`;
      const phone = i % 5 === 0 ? '+1415555' : i % 3 === 0 ? '' : `+1415555${String(i % 10000).padStart(4, '0')}`;
      text += `${i},${email},${phone},"note, ""${i}"""\n`;
    }
    input = dir.file('in.csv', text);
    serve = await startServe();
  });
  afterAll(async () => {
    await serve?.stop();
    dir.remove();
  });

  it('hash', async () => {
    const outs: string[] = [];
    for (const threads of ['0', '1']) {
      const out = join(dir.path, `hash-${threads}.csv`);
      const result = await runCli(['hash', input, '-o', out, '--quiet', '--threads', threads]);
      expect(result.code, result.stderr).toBe(0);
      outs.push(readFileSync(out, 'utf8'));
    }
    expect(outs[0].split('\n')).toHaveLength(4002);
    expect(outs[0]).toContain('invalid email');
    expect(outs[1]).toBe(outs[0]);
  });

  it('map, with --rejects', async () => {
    const connection = serveConnection(serve as ServeProcess);
    const outs: string[] = [];
    for (const threads of ['0', '1']) {
      const out = join(dir.path, `map-${threads}.csv`);
      const rejects = join(dir.path, `rejects-${threads}.csv`);
      const result = await runCli(
        ['map', input, '-o', out, '--rejects', rejects, '--quiet', '--threads', threads, ...connection.args],
        { env: connection.env },
      );
      expect(result.code, result.stderr).toBe(0);
      outs.push(readFileSync(out, 'utf8'), readFileSync(rejects, 'utf8'));
    }
    expect(outs[0].split('\n')).toHaveLength(4002);
    expect(outs[0]).toContain(',mapped,');
    expect(outs[2]).toBe(outs[0]);
    expect(outs[3]).toBe(outs[1]);
  });

  it('--threads must be a whole number', async () => {
    const result = await runCli(['hash', input, '--threads', 'two']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--threads must be a whole number from 0 to 64');
  });
});
