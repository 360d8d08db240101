import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { parse } from 'csv-parse/sync';
import { afterAll, describe, expect, test } from 'vitest';
import { openSink } from '../../src/pipeline/io/output/sink.js';
import { openSource } from '../../src/pipeline/io/source.js';
import { OutputError, type InputRow } from '../../src/pipeline/io/table.js';
import { settled } from '../helpers/settled-reading.js';

const dir = mkdtempSync(join(tmpdir(), 'uid2-io-sink-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const target = (ext = '.csv') => join(dir, `out${++n}${ext}`);

/** Files in the output directory other than the targets: temp files left behind would show here. */
function leftovers(): string[] {
  return readdirSync(dir).filter((f) => f.endsWith('.tmp'));
}

/** A writable that keeps what it gets, slowly, so that backpressure matters. */
function slowWritable(highWaterMark: number): Writable & { text: () => string } {
  const parts: Buffer[] = [];
  const w = new Writable({
    highWaterMark,
    write(chunk: Buffer, _enc, cb) {
      parts.push(chunk);
      setTimeout(cb, 1);
    },
  }) as Writable & { text: () => string };
  w.text = () => Buffer.concat(parts).toString('utf8');
  return w;
}

const tricky = [
  ['1', 'plain@example.com', ''],
  ['2', 'has,comma', 'has "quotes"'],
  ['3', 'multi\nline', ' spaced '],
  ['4', '+14155550100', '=not a formula, just text'],
  ['5', 'Zoë 😊', 'DH5qQFhi5ALrdqcPiib8cy0Hwykx6frpqxWCkR0uijs='],
];

describe('file sink', () => {
  test('nothing at the target until commit; then the complete file, header first, quoted only when needed', async () => {
    const path = target();
    const sink = await openSink({ path, format: 'csv', header: ['id', 'value', 'note'] });
    await sink.writeRows(tricky.slice(0, 2));
    expect(existsSync(path)).toBe(false);
    expect(leftovers()).toEqual([`.${path.split('/').pop()}.${process.pid}.tmp`]);
    await sink.writeRows(tricky.slice(2));
    expect(existsSync(path)).toBe(false);
    await sink.commit();
    expect(leftovers()).toEqual([]);
    const text = readFileSync(path, 'utf8');
    expect(text.split('\n')[0]).toBe('id,value,note');
    expect(text).toContain('\n1,plain@example.com,\n');
    expect(text).toContain('"has,comma","has ""quotes"""');
    expect(parse(text)).toEqual([['id', 'value', 'note'], ...tricky]);
  });

  test('abort leaves no file and no temp file, and keeps an existing target as it was', async () => {
    const path = target();
    writeFileSync(path, 'previous run\n');
    const sink = await openSink({ path, format: 'csv', header: ['a'] });
    await sink.writeRows([['1'], ['2']]);
    await sink.abort();
    await sink.abort();
    expect(readFileSync(path, 'utf8')).toBe('previous run\n');
    expect(leftovers()).toEqual([]);

    const fresh = target();
    const other = await openSink({ path: fresh, format: 'jsonl', header: ['a'] });
    await other.writeRows([['1']]);
    await other.abort();
    expect(existsSync(fresh)).toBe(false);
    expect(leftovers()).toEqual([]);
  });

  test('commit replaces an existing target in one step', async () => {
    const path = target();
    writeFileSync(path, 'old\n');
    const sink = await openSink({ path, format: 'csv', header: ['a'] });
    await sink.writeRows([['new']]);
    expect(readFileSync(path, 'utf8')).toBe('old\n');
    await sink.commit();
    expect(readFileSync(path, 'utf8')).toBe('a\nnew\n');
  });

  test('BOM on request; an empty header writes an empty file', async () => {
    const path = target();
    const sink = await openSink({ path, format: 'csv', header: ['email'], bom: true });
    await sink.commit();
    expect(readFileSync(path)).toEqual(Buffer.from('\ufeffemail\n'));
    const empty = target();
    const none = await openSink({ path: empty, format: 'csv', header: [] });
    await none.commit();
    expect(readFileSync(empty, 'utf8')).toBe('');
  });

  test('mode: a file holding secrets can be created private', async () => {
    const path = target();
    const sink = await openSink({ path, format: 'csv', header: ['a'], mode: 0o600 });
    await sink.commit();
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  test('a directory that does not exist: one OutputError naming the path and the fix', async () => {
    const path = join(dir, 'missing', 'out.csv');
    await expect(openSink({ path, format: 'csv', header: ['a'] })).rejects.toThrow(OutputError);
    await expect(openSink({ path, format: 'csv', header: ['a'] })).rejects.toThrow(
      /missing\/out\.csv: the directory does not exist; create it first/,
    );
  });

  test('CSV out, CSV in: a round trip through the source gives the same cells', async () => {
    const path = target();
    const rows = Array.from({ length: 3000 }, (_, i) => tricky[i % tricky.length].map((c) => `${c}${i}`));
    const sink = await openSink({ path, format: 'csv', header: ['id', 'value', 'note'] });
    for (let i = 0; i < rows.length; i += 700) await sink.writeRows(rows.slice(i, i + 700));
    await sink.commit();
    const source = await openSource(await settled({ path }));
    const back: InputRow[] = [];
    for await (const chunk of source.rows()) back.push(...chunk);
    expect(source.header).toEqual(['id', 'value', 'note']);
    expect(back.map((r) => r.cells)).toEqual(rows);
  });
});

describe('JSONL sink', () => {
  test('one object per row keyed by the header; round trip through the JSONL source', async () => {
    const path = target('.jsonl');
    const header = ['id', 'value', 'note', 'key "quoted"'];
    const rows = tricky.map((r) => [...r, 'x']);
    const sink = await openSink({ path, format: 'jsonl', header });
    await sink.writeRows(rows);
    await sink.commit();
    const lines = readFileSync(path, 'utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(rows.length);
    expect(JSON.parse(lines[1])).toEqual({ id: '2', value: 'has,comma', note: 'has "quotes"', 'key "quoted"': 'x' });
    const source = await openSource(await settled({ path }));
    const back: InputRow[] = [];
    for await (const chunk of source.rows()) back.push(...chunk);
    expect(source.header).toEqual(header);
    expect(back.map((r) => r.cells)).toEqual(rows);
  });
});

describe('stream sink (stdout)', () => {
  test('waits for drain: the stream never holds much more than its high-water mark', async () => {
    const out = slowWritable(1024);
    const sink = await openSink({ path: '-', format: 'csv', header: ['i', 'email'], stream: out });
    let maxBuffered = 0;
    for (let c = 0; c < 30; c++) {
      const rows = Array.from({ length: 100 }, (_, i) => [String(c * 100 + i), `user${c * 100 + i}@example.com`]);
      await sink.writeRows(rows);
      maxBuffered = Math.max(maxBuffered, out.writableLength);
      expect(out.writableNeedDrain).toBe(false);
    }
    await sink.commit();
    const lines = out.text().trimEnd().split('\n');
    expect(lines).toHaveLength(3001);
    expect(lines[3000]).toBe('2999,user2999@example.com');
    expect(maxBuffered).toBeLessThanOrEqual(1024);
  });

  test('a reader that goes away (EPIPE) ends writing quietly', async () => {
    let writes = 0;
    const out = new Writable({
      highWaterMark: 16,
      write(_chunk, _enc, cb) {
        writes++;
        const err = Object.assign(new Error('write EPIPE'), { code: 'EPIPE' });
        setImmediate(() => cb(err));
      },
    });
    const sink = await openSink({ path: '-', format: 'csv', header: ['a'], stream: out });
    await sink.writeRows([['1'], ['2']]);
    await new Promise((r) => setImmediate(r));
    await sink.writeRows([['3']]);
    await expect(sink.commit()).resolves.toBeUndefined();
    expect(writes).toBe(1);
  });

  test('any other stream error fails the write with an OutputError', async () => {
    const out = new Writable({
      highWaterMark: 16,
      write(_chunk, _enc, cb) {
        setImmediate(() => cb(Object.assign(new Error('disk on fire'), { code: 'EIO' })));
      },
    });
    const sink = await openSink({ path: '-', format: 'csv', header: ['a'], stream: out });
    const failure = await (async () => {
      for (let i = 0; i < 5; i++) await sink.writeRows([['x'.repeat(100)]]);
    })().catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(OutputError);
    expect((failure as Error).message).toContain('EIO');
  });
});
