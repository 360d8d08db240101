import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ColumnFlags, IdentifierColumn } from '../../src/pipeline/map/identifier-columns.js';
import type { HashCounts } from '../../src/pipeline/hash/hash-rows.js';
import type { PreparedRows } from '../../src/pipeline/map/prepare-rows.js';
import type { RowFormat } from '../../src/pipeline/io/output/row-encoders.js';
import type { RowThreads as RowThreadsType } from '../../src/pipeline/threads/row-threads.js';
import type { InputRow, OpenSourceOptions, SourceProblemCounts } from '../../src/pipeline/io/table.js';
import type { InputReading } from '../../src/pipeline/jobs/run-input.js';
import { settled } from '../helpers/settled-reading.js';
import { ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli, serveConnection, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';
import { sameTableTwoWays, trickyCsv } from '../helpers/row-threads-data.js';
import { seeded } from '../helpers/seeded-random.js';

// Worker threads start from compiled JS: the threaded path and the single-threaded path it must match are both
// taken from dist/, so the two sides are always the same build.
type SourceModule = typeof import('../../src/pipeline/io/source.js');
type PiecesModule = typeof import('../../src/pipeline/io/csv/piece-source.js');
type ThreadsModule = typeof import('../../src/pipeline/threads/row-threads.js');
type HashModule = typeof import('../../src/pipeline/hash/hash-rows.js');
type PrepareModule = typeof import('../../src/pipeline/map/prepare-rows.js');
type EncodersModule = typeof import('../../src/pipeline/io/output/row-encoders.js');
type ColumnsModule = typeof import('../../src/pipeline/map/identifier-columns.js');

let source: SourceModule;
let pieces: PiecesModule;
let threadsModule: ThreadsModule;
let hashing: HashModule;
let preparing: PrepareModule;
let encoders: EncodersModule;
let columnsModule: ColumnsModule;

async function fromDist<T>(file: string): Promise<T> {
  return (await import(pathToFileURL(join(ROOT, 'dist', 'pipeline', file)).href)) as T;
}

const dir = tempDir('uid2-row-threads-');

beforeAll(async () => {
  ensureBuilt();
  source = await fromDist<SourceModule>('io/source.js');
  pieces = await fromDist<PiecesModule>('io/csv/piece-source.js');
  threadsModule = await fromDist<ThreadsModule>('threads/row-threads.js');
  hashing = await fromDist<HashModule>('hash/hash-rows.js');
  preparing = await fromDist<PrepareModule>('map/prepare-rows.js');
  encoders = await fromDist<EncodersModule>('io/output/row-encoders.js');
  columnsModule = await fromDist<ColumnsModule>('map/identifier-columns.js');
});
afterAll(() => dir.remove());

// ---------------------------------------------------------------------------------------------------------
// inputs

interface Case {
  name: string;
  bytes: Buffer;
  opts?: Pick<InputReading, 'delimiter' | 'header' | 'encoding'>;
  columns: ColumnFlags;
  format?: 'csv' | 'jsonl';
}

const COLS: ColumnFlags = { emailCol: 'email', phoneCol: 'phone' };
const utf8 = (s: string): Buffer => Buffer.from(s, 'utf8');

const CASES: Case[] = [
  {
    name: 'quoted cells with "" and the delimiter and multi-line values',
    bytes: utf8(
      'id,email,phone,note\n1,"A.B@Example.com","+14155550100","say ""hi"", there"\n2,"multi\nline@x.com",+1415,"a\r\nb\rc\nd"\n3,"x"",y@z.com",,""\n4,u@v.com,"+1415\n5550100","""quoted"""\n',
    ),
    columns: COLS,
  },
  {
    name: 'CRLF, LF and lone CR mixed per line',
    bytes: utf8(
      'id,email,phone\r\n1,a@b.com,+14155550100\n2,c@d.com,+14155550101\r3,E@F.com,bad\r\n4,g@h.com,\r5,,+14155550102\n',
    ),
    columns: COLS,
  },
  {
    name: 'empty lines, leading ones too',
    bytes: utf8('\n\r\n\r\nid,email,phone\n\n\n1,a@b.com,+14155550100\r\n\r\n2,c@d.com,\r\r\r3,x,+1\n\n'),
    columns: COLS,
  },
  {
    name: 'ragged rows: short, long, and trailing delimiters',
    bytes: utf8(
      'id,email,phone\n1,a@b.com\n2\n3,c@d.com,+14155550100,extra\n4,e@f.com,+14155550101,\n5,g@h.com,+14155550102,,\n6,i@j.com,,,x\n7,"k@l.com"\n',
    ),
    columns: COLS,
  },
  {
    name: '--no-header',
    bytes: utf8('1,a@b.com,+14155550100\n2,"c\nd@e.com",bad\n3\n4,x@y.com,+14155550101,more\n'),
    opts: { header: false },
    columns: { emailCol: 'col2', phoneCol: 'col3' },
  },
  {
    name: 'delimiter ;',
    bytes: utf8('id;email;phone;note\n1;a@b.com;+14155550100;"x;y"\n2;"c;d@e.com";;"a\nb"\n3;E@F.COM;+1;a,b\n'),
    opts: { delimiter: ';' },
    columns: COLS,
  },
  {
    name: 'delimiter tab',
    bytes: utf8('id\temail\tphone\n1\ta@b.com\t+14155550100\n2\t"c\td@e.com"\t\n3\t"multi\r\nline"\t+14155550101\n'),
    opts: { delimiter: '\t' },
    columns: COLS,
  },
  {
    name: 'latin1 with bytes >= 0x80',
    bytes: Buffer.from(
      'id,email,name\n1,Jos\xe9@example.com,Jos\xe9\n2,ren\xe9e@x.com,"M\xfcller\n\xc6"\n3,a@b.com,\xff\xfe\n',
      'latin1',
    ),
    opts: { encoding: 'latin1' },
    columns: { emailCol: 'email' },
  },
  {
    name: 'a UTF-8 BOM',
    bytes: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), utf8('email,phone\nA@B.com,+14155550100\n"x\ny",\n')]),
    columns: COLS,
  },
  {
    name: 'a UTF-8 BOM and --no-header',
    bytes: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), utf8('A@B.com,+14155550100\n"x\ny",\n')]),
    opts: { header: false },
    columns: { emailCol: 'col1', phoneCol: 'col2' },
  },
  { name: 'a header only', bytes: utf8('id,email,phone\n'), columns: COLS },
  { name: 'a header only, no final newline', bytes: utf8('\r\n\nid,email,phone'), columns: COLS },
  {
    name: 'a header only, --no-header (one row)',
    bytes: utf8('id,a@b.com,+14155550100'),
    opts: { header: false },
    columns: { emailCol: 'col2' },
  },
  { name: 'an empty file', bytes: Buffer.alloc(0), columns: COLS },
  { name: 'only empty lines', bytes: utf8('\n\r\n\r\n\n\r'), columns: COLS },
  {
    name: 'no final newline, last cell quoted and multi-line',
    bytes: utf8('id,email,phone\n1,a@b.com,+14155550100\n2,"c\r\nd",x'),
    columns: COLS,
  },
  {
    name: 'emails, phones and hashes of every shape',
    bytes: utf8(
      'email,phone,email_hash\n' +
        'First.Last+tag@Gmail.com,+14155550100,' +
        'ab'.repeat(32) +
        '\n' +
        'f.i.r.s.t@googlemail.com,14155550100,' +
        'AB'.repeat(32) +
        '\n' +
        ' USER@EXAMPLE.COM ,+1 415 555 0100,' +
        Buffer.alloc(32, 7).toString('base64') +
        '\n' +
        'not-an-email,+999999999999999999,' +
        'ab'.repeat(31) +
        '\n' +
        'a@b,++1,not-a-hash\n' +
        '@example.com,,' +
        Buffer.alloc(31, 7).toString('base64') +
        '\n',
    ),
    columns: { emailCol: 'email', phoneCol: 'phone', emailHashCol: 'email_hash' },
  },
  {
    name: 'random tricky rows, comma',
    bytes: utf8(trickyCsv(250, 11)),
    columns: { ...COLS, emailHashCol: 'email_hash' },
  },
  {
    name: 'random tricky rows, ;',
    bytes: utf8(trickyCsv(150, 12, ';')),
    opts: { delimiter: ';' },
    columns: { ...COLS, emailHashCol: 'email_hash' },
  },
  {
    name: 'every field quoted, values with quotes, delimiters and line breaks',
    bytes: utf8(sameTableTwoWays(300, 14).allQuoted),
    columns: { ...COLS, emailHashCol: 'email_hash' },
  },
  {
    name: 'every field quoted, tab-delimited',
    bytes: utf8(sameTableTwoWays(120, 15, '\t').allQuoted),
    opts: { delimiter: '\t' },
    columns: { ...COLS, emailHashCol: 'email_hash' },
  },
  {
    name: 'every field quoted, plainly (whole-field quotes only), CRLF',
    bytes: utf8(
      Array.from(
        { length: 200 },
        (_, i) => `"${i}","user${i}@example.com","+1415555${String(i).padStart(4, '0')}",""\r\n`,
      ).join(''),
    ),
    opts: { header: false },
    columns: { emailCol: 'col2', phoneCol: 'col3' },
  },
  {
    name: 'random tricky rows, JSONL output',
    bytes: utf8(trickyCsv(120, 13)),
    columns: { ...COLS, emailHashCol: 'email_hash' },
    format: 'jsonl',
  },
  {
    // the delimiter is read in the input's encoding (one byte 0xA7 in Latin-1)
    name: 'latin1 with a non-ASCII delimiter (§) before a multi-line quoted value',
    bytes: Buffer.from('id\xa7email\xa7note\n1\xa7a@b.com\xa7"x\ny"\n2\xa7c@d.com\xa7z\n', 'latin1'),
    opts: { encoding: 'latin1', delimiter: '\xa7' },
    columns: { emailCol: 'email' },
  },
];

// ---------------------------------------------------------------------------------------------------------
// the two paths

/** How the bytes reach the reader: a file (64 KiB reads) or a stream of 1..5-byte reads (cuts everywhere). */
type Feed = 'file' | 'tiny';

async function inputOptions(c: Case, feed: Feed, seed: number): Promise<OpenSourceOptions> {
  const path = join(dir.path, `${c.name.replace(/[^a-z0-9]+/gi, '-')}.csv`);
  const base = await settled({ path, format: 'csv', ...c.opts });
  if (feed === 'file') {
    writeBytes(path, c.bytes);
    return base;
  }
  const rnd = seeded(seed);
  const reads: Buffer[] = [];
  for (let at = 0; at < c.bytes.length; ) {
    const n = 1 + Math.floor(rnd() * 5);
    reads.push(c.bytes.subarray(at, at + n));
    at += n;
  }
  return { ...base, stream: Readable.from(reads) };
}

function writeBytes(path: string, bytes: Buffer): void {
  // tempDir.file writes strings; bytes (Latin-1, a BOM) go through fs directly
  writeFileSync(path, bytes);
}

function columnsOf(c: Case, header: string[]): IdentifierColumn[] {
  return header.length === 0 ? [] : columnsModule.resolveIdentifierColumns(header, c.columns).columns;
}

function formatOf(c: Case, header: string[], columns: IdentifierColumn[]): RowFormat {
  return c.format === 'jsonl'
    ? {
        format: 'jsonl',
        header: columns.length > 0 ? columnsModule.resultHeader(header, columns, hashing.HASH_FIELDS) : [],
      }
    : { format: 'csv' };
}

interface Outcome {
  header: string[];
  notes: string[];
  bytes: string;
  counts: HashCounts;
  /** Reasons in the order first seen: the summary lists equal counts in that order. */
  reasonOrder: string[];
  problems: SourceProblemCounts;
  lines: number[];
  prepared: PreparedRows;
}

async function unthreaded(c: Case, feed: Feed, seed: number): Promise<Outcome> {
  const table = await source.openSource(await inputOptions(c, feed, seed));
  const columns = columnsOf(c, table.header);
  const encode = encoders.rowEncoder(formatOf(c, table.header, columns));
  const counts = hashing.emptyHashCounts(columns.length);
  const all: InputRow[] = [];
  let bytes = '';
  for await (const chunk of table.rows()) {
    all.push(...chunk.map((r) => ({ ...r, cells: [...r.cells] })));
    bytes += encode(hashing.hashRows(chunk, columns, counts));
  }
  return {
    header: table.header,
    notes: table.notes,
    bytes,
    counts,
    reasonOrder: Object.keys(counts.reasons),
    problems: table.problems(),
    lines: all.map((r) => r.line),
    prepared: preparing.prepareRows(all, columns),
  };
}

/**
 * One pool per case and thread count, for hashing and preparing alike: the config depends only on the case (the
 * piece size does not matter), and a pool that served earlier runs must not change later answers.
 */
class Pools {
  private readonly pools = new Map<number, RowThreadsType>();

  get(piecesSource: Awaited<ReturnType<PiecesModule['openCsvPieces']>>, c: Case, threads: number): RowThreadsType {
    let pool = this.pools.get(threads);
    if (pool === undefined) {
      const columns = columnsOf(c, piecesSource.header);
      pool = new threadsModule.RowThreads(
        {
          name: piecesSource.name,
          csv: piecesSource.settings,
          width: piecesSource.width,
          columns,
          format: formatOf(c, piecesSource.header, columns),
          v2: false,
        },
        threads,
        // a small young generation: the tests run several pools side by side
        8,
      );
      this.pools.set(threads, pool);
    }
    return pool;
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
    this.pools.clear();
  }
}

async function threadedHash(c: Case, feed: Feed, seed: number, pieceBytes: number, threads: number, pools: Pools) {
  const src = await pieces.openCsvPieces(await inputOptions(c, feed, seed), pieceBytes);
  const pool = pools.get(src, c, threads);
  const counts = hashing.emptyHashCounts(columnsOf(c, src.header).length);
  const decoder = new TextDecoder();
  let bytes = '';
  for await (const piece of pool.hashed(src)) {
    hashing.addHashCounts(counts, piece.counts);
    bytes += decoder.decode(piece.bytes);
  }
  return {
    header: src.header,
    notes: src.notes,
    bytes,
    counts,
    reasonOrder: Object.keys(counts.reasons),
    problems: src.problems(),
  };
}

async function threadedPrepare(c: Case, feed: Feed, seed: number, pieceBytes: number, threads: number, pools: Pools) {
  const src = await pieces.openCsvPieces(await inputOptions(c, feed, seed), pieceBytes);
  const pool = pools.get(src, c, threads);
  const parts: PreparedRows[] = [];
  for await (const chunk of pool.prepared(src)) {
    expect(chunk.rows, 'a row thread keeps the rows').toBeUndefined();
    expect(chunk.ticket).toBeDefined();
    parts.push(chunk.prepared);
  }
  return { prepared: concatPrepared(parts, columnsOf(c, src.header).length), problems: src.problems() };
}

function concatPrepared(parts: PreparedRows[], width: number): PreparedRows {
  const cat = (k: 'status' | 'phone'): Uint8Array => {
    const out = new Uint8Array(parts.reduce((n, p) => n + p[k].length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p[k], at);
      at += p[k].length;
    }
    return out;
  };
  return {
    rowCount: parts.reduce((n, p) => n + p.rowCount, 0),
    width,
    status: cat('status'),
    phone: cat('phone'),
    hashes: new Uint8Array(Buffer.concat(parts.map((p) => p.hashes))),
    reasons: parts.flatMap((p) => p.reasons),
    needingRegion: parts.reduce((n, p) => n + p.needingRegion, 0),
  };
}

/** Thread counts and piece sizes tried per case: tiny pieces, so most inputs are many pieces over several threads. */
const VARIANTS: { threads: number; pieceBytes: number; feed: Feed }[] = [
  { threads: 1, pieceBytes: 1, feed: 'file' },
  { threads: 3, pieceBytes: 7, feed: 'tiny' },
  { threads: 1, pieceBytes: 64, feed: 'tiny' },
  { threads: 3, pieceBytes: 300, feed: 'tiny' },
];

describe('RowThreads.hashed and .prepared match the single-threaded path (dist)', () => {
  it('the tricky inputs are what they claim: many rows, every line end, ragged rows, quoted line breaks', async () => {
    const text = trickyCsv(250, 11);
    expect(text).toMatch(/\r\n/);
    expect(text).toMatch(/\r[^\n]/);
    expect(text).toMatch(/"[^"\n]*\n[^"]*"/);
    const reference = await unthreaded(CASES.find((c) => c.name === 'random tricky rows, comma') as Case, 'file', 0);
    expect(reference.counts.rows).toBe(250);
    expect(reference.problems.shortRows).toBeGreaterThan(0);
    expect(reference.problems.longRows).toBeGreaterThan(0);
    expect(Object.keys(reference.counts.reasons).length).toBeGreaterThan(2);
    // rows start on lines further down than their index: multi-line values and empty lines are counted
    expect(reference.lines[reference.lines.length - 1]).toBeGreaterThan(252);
  });

  it.each(CASES.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const pools = new Pools();
    try {
      const reference = await unthreaded(c, 'file', 1);
      if (c.format !== 'jsonl' && reference.bytes !== '') {
        // the bytes compared are a real table: every output row reads back as header + 4 cells per column
        const width = reference.header.length + 4 * columnsOf(c, reference.header).length;
        const records = parse(reference.bytes, { relax_column_count: true }) as string[][];
        expect(records.length).toBe(reference.counts.rows);
        expect(records.filter((r) => r.length !== width)).toEqual([]);
      }
      // the feed does not change what the single-threaded path reads
      expect(await unthreaded(c, 'tiny', 2)).toEqual(reference);
      for (const v of VARIANTS) {
        const label = `${v.threads} thread(s), pieces of ${v.pieceBytes} B, ${v.feed} reads`;
        const hashed = await threadedHash(c, v.feed, 3, v.pieceBytes, v.threads, pools);
        expect(hashed.header, label).toEqual(reference.header);
        expect(hashed.notes, label).toEqual(reference.notes);
        expect(hashed.bytes, label).toBe(reference.bytes);
        expect(hashed.counts, label).toEqual(reference.counts);
        expect(hashed.reasonOrder, label).toEqual(reference.reasonOrder);
        expect(hashed.problems, label).toEqual(reference.problems);
        const prepared = await threadedPrepare(c, v.feed, 4, v.pieceBytes, v.threads, pools);
        expect(prepared.prepared, label).toEqual(reference.prepared);
        expect(prepared.problems, label).toEqual(reference.problems);
      }
    } finally {
      await pools.close();
    }
  });
});

// ---------------------------------------------------------------------------------------------------------
// errors

interface ErrorCase {
  name: string;
  bytes: Buffer;
  opts?: Pick<InputReading, 'delimiter' | 'header' | 'encoding'>;
  /** What the single-threaded message must say (so the case tests the error it is named after). */
  expect: RegExp;
}

/** Rows with no quote at all, so a quote opened before them stays open. */
function plainRows(n: number, from = 0): string {
  let s = '';
  for (let i = from; i < from + n; i++) s += `${i},user${i}@example.com,note ${i}${i % 2 === 0 ? '\r\n' : '\n'}`;
  return s;
}

function manyRows(n: number, from = 0): string {
  let s = '';
  for (let i = from; i < from + n; i++)
    s += `${i},user${i}@example.com,"note\n${i}"${i % 3 === 0 ? '\r\n' : i % 3 === 1 ? '\n' : '\r'}`;
  return s;
}

const ERROR_CASES: ErrorCase[] = [
  {
    name: 'a quote never closed, late in a multi-piece file',
    bytes: utf8(`id,email,note\n${manyRows(40)}\n\n41,x@y.com,"never closed\n${plainRows(5, 42)}`),
    expect: /line \d+: a quoted value opens on this line and is never closed/,
  },
  {
    name: 'a quote never closed in the last row, after empty lines',
    bytes: utf8(`id,email,note\n${manyRows(20)}\r\n\r\n\r\n"`),
    expect: /never closed/,
  },
  {
    name: 'an invalid UTF-8 byte',
    bytes: Buffer.concat([
      utf8(`id,email,note\n${manyRows(30)}31,a@b.com,caf`),
      Buffer.from([0xe9]),
      utf8(`\n${manyRows(10, 32)}`),
    ]),
    expect: /line \d+: invalid UTF-8/,
  },
  {
    name: 'an invalid UTF-8 byte inside a multi-line quoted value',
    bytes: Buffer.concat([
      utf8(`id,email,note\n${manyRows(12)}13,a@b.com,"x\r\ny\r`),
      Buffer.from([0xc3, 0x28]),
      utf8(`"\n${manyRows(3, 14)}`),
    ]),
    expect: /invalid UTF-8/,
  },
  {
    name: 'a NUL byte',
    bytes: Buffer.concat([
      utf8(`id,email,note\n${manyRows(25)}26,a@b.com,x`),
      Buffer.from([0]),
      utf8(`y\n${manyRows(10, 27)}`),
    ]),
    expect: /line \d+: NUL byte/,
  },
  {
    name: 'a NUL byte in a Latin-1 file',
    bytes: Buffer.concat([Buffer.from(`id,email,note\n${manyRows(8)}9,caf\xe9@b.com,x`, 'latin1'), Buffer.from([0])]),
    opts: { encoding: 'latin1' },
    expect: /NUL byte/,
  },
  {
    name: 'the input ends in the middle of a UTF-8 character',
    bytes: Buffer.concat([utf8(`id,email,note\n${manyRows(9)}10,a@b.com,`), Buffer.from([0xe2, 0x82])]),
    expect: /ends in the middle of a UTF-8 character/,
  },
  {
    name: 'an invalid UTF-8 byte in the header',
    bytes: Buffer.concat([utf8('id,em'), Buffer.from([0xff]), utf8(`ail\n${manyRows(3)}`)]),
    expect: /line 1: invalid UTF-8/,
  },
];

async function caught(run: () => Promise<unknown>): Promise<Error> {
  try {
    await run();
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the input to be refused');
}

describe('input errors: the same InputError, message and line with and without threads (dist)', () => {
  it.each(ERROR_CASES.map((c) => [c.name, c] as const))('%s', async (_name, e) => {
    const c: Case = {
      name: e.name,
      bytes: e.bytes,
      ...(e.opts ? { opts: e.opts } : {}),
      columns: { emailCol: 'email' },
    };
    const reference = await caught(() => unthreaded(c, 'file', 1));
    expect(reference.name).toBe('InputError');
    expect(reference.message).toMatch(e.expect);
    const pools = new Pools();
    try {
      for (const v of VARIANTS) {
        const label = `${v.threads} thread(s), pieces of ${v.pieceBytes} B, ${v.feed} reads`;
        const hashErr = await caught(() => threadedHash(c, v.feed, 5, v.pieceBytes, v.threads, pools));
        expect({ name: hashErr.name, message: hashErr.message }, label).toEqual({
          name: 'InputError',
          message: reference.message,
        });
        const prepareErr = await caught(() => threadedPrepare(c, v.feed, 6, v.pieceBytes, v.threads, pools));
        expect({ name: prepareErr.name, message: prepareErr.message }, label).toEqual({
          name: 'InputError',
          message: reference.message,
        });
      }
    } finally {
      await pools.close();
    }
  });
});

// ---------------------------------------------------------------------------------------------------------
// the built CLI

/**
 * A --summary-json without what differs from run to run (timings) or from input file to input file of the same table
 * (its size in bytes, as some compared runs read the table differently quoted), for comparing two runs.
 */
function stableSummary(path: string): unknown {
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    if (v === null || typeof v !== 'object') return v;
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v))
      if (!/duration|per_s|_ms$|started|ended|elapsed|seconds|^bytes_read$/.test(k)) out[k] = strip(x);
    return out;
  };
  return strip(JSON.parse(readFileSync(path, 'utf8')));
}

describe('map and hash with --threads 0 and --threads 2 write the same bytes (built CLI)', () => {
  let serve: ServeProcess | undefined;
  let input = '';
  let text = '';
  let plainInput = '';

  beforeAll(async () => {
    ensureBuilt();
    text = trickyCsv(3000, 21);
    input = join(dir.path, 'e2e.csv');
    writeBytes(input, utf8(text));
    // without its quotes, the tricky file is quote-free (the threads reuse its lines as they are) and has ragged
    // rows, trailing delimiters and empty lines; several pieces of 256 KiB
    plainInput = join(dir.path, 'e2e-plain.csv');
    writeBytes(plainInput, utf8(trickyCsv(12000, 22).replace(/"/g, '')));
    serve = await startServe();
  });
  afterAll(async () => {
    await serve?.stop();
  });

  const cols = ['--email-col', 'email', '--phone-col', 'phone', '--email-hash-col', 'email_hash'];

  async function map(
    threads: string,
    extra: string[],
    out: string,
    from = input,
  ): Promise<{ code: number | null; out: string; rejects: string; summary: unknown }> {
    const connection = serveConnection(serve as ServeProcess);
    const rejects = `${out}.rejects`;
    const summary = `${out}.summary.json`;
    const result = await runCli(
      [
        'map',
        from,
        '-o',
        out,
        '--rejects',
        rejects,
        '--summary-json',
        summary,
        '--quiet',
        '--threads',
        threads,
        ...cols,
        ...extra,
        ...connection.args,
      ],
      { env: connection.env },
    );
    expect([0, 3], result.stderr).toContain(result.code);
    return {
      code: result.code,
      out: readFileSync(out, 'utf8'),
      rejects: readFileSync(rejects, 'utf8'),
      summary: stableSummary(summary),
    };
  }

  it.each([
    ['v3, CSV', [], 'csv'],
    ['v2, CSV', ['--api', 'v2'], 'csv'],
    ['v3, JSONL output', ['--format', 'jsonl'], 'jsonl'],
    ['v3, JSONL, --emit-hash --time-format iso', ['--emit-hash', '--time-format', 'iso'], 'jsonl'],
    [
      'v3, CSV, --emit-hash --keep id --result-prefix',
      ['--emit-hash', '--keep', 'id', '--result-prefix', 'email=e', '--result-prefix', 'phone=p'],
      'csv',
    ],
    ['v3, TSV, --drop-input-columns --emit-hash', ['--drop-input-columns', '--emit-hash'], 'tsv'],
    ['v2, JSONL, --emit-hash --keep email', ['--api', 'v2', '--emit-hash', '--keep', 'email'], 'jsonl'],
  ] as const)('map %s, with --rejects', async (name, extra, ext) => {
    const tag = name.replace(/[^a-z0-9]+/gi, '-');
    // the two runs are independent processes: side by side, they take the time of one
    const [single, threaded] = await Promise.all([
      map('0', [...extra], join(dir.path, `map-${tag}-0.${ext}`)),
      map('2', [...extra], join(dir.path, `map-${tag}-2.${ext}`)),
    ]);
    // the run is worth comparing: every row is out, some mapped, some rejected
    expect(single.out.length).toBeGreaterThan(text.length);
    expect(single.out).toMatch(ext === 'csv' ? /,mapped,/ : ext === 'tsv' ? /\tmapped\t/ : /"mapped"/);
    // --emit-hash writes the hashes sent: base64 SHA-256s beside the answers
    if (extra.includes('--emit-hash' as never))
      expect(single.out).toMatch(/[A-Za-z0-9+/]{43}=(?:[,\t]|","[A-Za-z_]*hash_type":")email\b/);
    expect(single.rejects.length).toBeGreaterThan(0);
    expect(threaded.out).toBe(single.out);
    expect(threaded.rejects).toBe(single.rejects);
    expect(threaded.code).toBe(single.code);
    expect(threaded.summary).toEqual(single.summary);
  });

  it.each([
    ['v3', []],
    ['v2', ['--api', 'v2']],
    ['v3 --emit-hash --time-format iso', ['--emit-hash', '--time-format', 'iso']],
    ['v3 --keep phone,id', ['--keep', 'phone,id']],
    ['v3, TSV in and out', ['--delimiter', 'tab']],
    ['v2, TSV in and out, --keep email', ['--api', 'v2', '--delimiter', 'tab', '--keep', 'email']],
  ] as const)('map %s of a quote-free CSV with ragged rows, with --rejects', async (name, extra) => {
    const plainText = readFileSync(plainInput, 'utf8');
    expect(plainText).not.toContain('"');
    expect(plainText.length).toBeGreaterThan(3 * 256 * 1024);
    const tsv = extra.includes('tab' as never);
    let from = plainInput;
    if (tsv) {
      // the same table with tabs: its cells hold none
      expect(plainText).not.toContain('\t');
      from = join(dir.path, 'e2e-plain.tsv');
      writeBytes(from, utf8(plainText.replaceAll(',', '\t')));
    }
    const ext = tsv ? 'tsv' : 'csv';
    const [single, threaded] = await Promise.all([
      map('0', [...extra], join(dir.path, `plain-${name}-0.${ext}`), from),
      map('2', [...extra], join(dir.path, `plain-${name}-2.${ext}`), from),
    ]);
    if (tsv) expect(single.out.split('\n')[0]).toContain('\t');
    const summary = single.summary as { long_rows?: number; short_rows?: number };
    expect(summary.long_rows).toBeGreaterThan(0);
    expect(summary.short_rows).toBeGreaterThan(0);
    expect(single.rejects.length).toBeGreaterThan(0);
    expect(threaded.out).toBe(single.out);
    expect(threaded.rejects).toBe(single.rejects);
    expect(threaded.summary).toEqual(single.summary);
  });

  it('map of every field quoted writes the bytes of the same table quoted only where needed, with and without threads', async () => {
    const { allQuoted, minimal } = sameTableTwoWays(4000, 23);
    expect(allQuoted).not.toBe(minimal);
    const readBack = { relax_column_count: true, record_delimiter: ['\r\n', '\n', '\r'] };
    expect(parse(allQuoted, readBack)).toEqual(parse(minimal, readBack));
    const quotedPath = join(dir.path, 'all-quoted.csv');
    const minimalPath = join(dir.path, 'minimal.csv');
    writeBytes(quotedPath, utf8(allQuoted));
    writeBytes(minimalPath, utf8(minimal));
    const [reference, ...others] = await Promise.all([
      map('0', [], join(dir.path, 'minimal-0.csv'), minimalPath),
      map('2', [], join(dir.path, 'minimal-2.csv'), minimalPath),
      map('0', [], join(dir.path, 'all-quoted-0.csv'), quotedPath),
      map('2', [], join(dir.path, 'all-quoted-2.csv'), quotedPath),
    ]);
    expect(reference.out).toMatch(/,mapped,/);
    expect(reference.rejects.length).toBeGreaterThan(0);
    for (const other of others) {
      expect(other.out).toBe(reference.out);
      expect(other.rejects).toBe(reference.rejects);
      expect(other.summary).toEqual(reference.summary);
    }
  });

  it('map and hash of a one-column file without a header line, over several pieces', async () => {
    const lines: string[] = [];
    for (let i = 0; i < 30000; i++) lines.push(i % 37 === 5 ? `bad-${i}` : `User.${i}@Example.com`);
    const headerless = join(dir.path, 'emails.txt');
    writeBytes(headerless, utf8(`${lines.join('\n')}\n`));
    const connection = serveConnection(serve as ServeProcess);
    const runs = await Promise.all(
      ['0', '2'].flatMap((threads) => [
        runCli(['map', headerless, '--quiet', '--threads', threads, '--emit-hash', ...connection.args], {
          env: connection.env,
        }),
        runCli(['hash', headerless, '--quiet', '--threads', threads]),
      ]),
    );
    for (const r of runs) expect(r.code, r.stderr).toBe(0);
    const [map0, hash0, map2, hash2] = runs.map((r) => r.stdout);
    expect(map0.split('\n')[0]).toBe('col1,raw_uid,prev_raw_uid,refresh_from,status,reason,hash,hash_type');
    expect(map0.split('\n')[1]).toMatch(/^User\.0@Example\.com,[^,]{44},,\d+,mapped,,[^,]{44},email$/);
    expect(map0.trim().split('\n')).toHaveLength(lines.length + 1);
    expect(hash0.split('\n')[1]).toMatch(/^User\.0@Example\.com,[^,]{44},email,ok,$/);
    expect(map2).toBe(map0);
    expect(hash2).toBe(hash0);
  });

  it('hash --keep --drop-input-columns, threaded or not', async () => {
    const outs = await Promise.all(
      ['0', '2'].map(async (threads) => {
        const result = await runCli(['hash', input, '--quiet', '--threads', threads, '--keep', 'id', ...cols]);
        expect(result.code, result.stderr).toBe(0);
        return result.stdout;
      }),
    );
    expect(outs[0].split('\n')[0]).toBe(
      'id,email_hash,email_hash_type,email_status,email_reason,phone_hash,phone_hash_type,phone_status,phone_reason,email_hash_hash,email_hash_hash_type,email_hash_status,email_hash_reason',
    );
    expect(outs[0]).not.toMatch(/@/);
    expect(outs[1]).toBe(outs[0]);
  });

  it('hash from stdin', async () => {
    const outs = await Promise.all(
      ['0', '2'].map(async (threads) => {
        const summary = join(dir.path, `hash-stdin-${threads}.json`);
        const result = await runCli(
          ['hash', '-', '--quiet', '--threads', threads, '--summary-json', summary, ...cols],
          { input: text },
        );
        expect(result.code, result.stderr).toBe(0);
        return { stdout: result.stdout, summary: stableSummary(summary) };
      }),
    );
    expect(outs[0].stdout.length).toBeGreaterThan(text.length);
    expect(outs[0].stdout).toContain(',invalid,');
    expect(outs[1].stdout).toBe(outs[0].stdout);
    expect(outs[1].summary).toEqual(outs[0].summary);
  });
});
