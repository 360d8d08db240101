import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parquetMetadata } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EngineChunk } from '../../src/pipeline/map/map-engine.js';
import { prepareRows } from '../../src/pipeline/map/prepare-rows.js';
import { defaultLayout, outputColumns, outputRows } from '../../src/pipeline/map/result-columns.js';
import { SLOT } from '../../src/pipeline/map/row-chunk.js';
import { rowEncoder } from '../../src/pipeline/io/output/row-encoders.js';
import { resolveIdentifierColumns } from '../../src/pipeline/map/identifier-columns.js';
import { openParquetSink } from '../../src/pipeline/io/parquet/parquet-sink.js';
import { utf8RowBlock } from '../../src/pipeline/io/row-blocks.js';
import { openSource as openHere } from '../../src/pipeline/io/source.js';
import type { OpenSourceOptions, TableSource } from '../../src/pipeline/io/table.js';
import { ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { settled, type AskedSource } from '../helpers/settled-reading.js';

// The reading thread starts from compiled JS, so it is exercised through dist/.
type OpenTableInput = (opts: OpenSourceOptions, threads: number) => Promise<TableSource>;
interface AnsweredChunk {
  ticket?: { thread: number; piece: number };
  width: number;
  status: Uint8Array;
  mapped: ({ u: string; p: string | null; r: number } | null)[];
  /** What the engine's chunk hands the reading thread: each slot's answer (here the object itself) and its index. */
  answerOf: AnsweredChunk['mapped'];
  answerIndex: Int32Array;
  reason: (string | null)[];
  /** The reasons as the engine's chunk holds them: 0, or 1 + the index of the slot's reason in reasonTexts. */
  reasonOf: Uint32Array;
  reasonTexts: string[];
}
type Preparing = TableSource & {
  preparedChunks(columns: unknown[], output?: unknown): AsyncIterable<EngineChunk>;
  encode(chunk: AnsweredChunk, rejects: boolean): Promise<{ bytes: Uint8Array; rejectBytes: Uint8Array | null }>;
  closeThread(): Promise<void>;
};

/** Answers for a prepared chunk: every valid cell mapped to a raw UID made from its slot, the rest as prepared. */
function answer(prepared: EngineChunk['prepared'], ticket: AnsweredChunk['ticket']): AnsweredChunk {
  const status = prepared.status.slice();
  const mapped: AnsweredChunk['mapped'] = new Array(status.length).fill(null);
  const reason: (string | null)[] = new Array(status.length).fill(null);
  let invalid = 0;
  for (let slot = 0; slot < status.length; slot++) {
    if (status[slot] === SLOT.pending) {
      status[slot] = SLOT.mapped;
      mapped[slot] = { u: `UID${slot}`, p: slot % 3 === 0 ? `PREV${slot}` : null, r: 1_801_785_600 };
    } else if (status[slot] === SLOT.invalid) reason[slot] = prepared.reasons[invalid++];
  }
  const reasonTexts = [...new Set(reason.filter((text) => text !== null))];
  const reasonOf = Uint32Array.from(reason, (text) => (text === null ? 0 : reasonTexts.indexOf(text) + 1));
  return {
    ticket,
    width: prepared.width,
    status,
    mapped,
    answerOf: mapped,
    answerIndex: new Int32Array(status.length),
    reason,
    reasonOf,
    reasonTexts,
  };
}

const HEADER = ['id', 'email', 'zip'];
const rows = Array.from({ length: 25_003 }, (_, i) => [
  String(i),
  i % 11 === 0 ? '' : i % 13 === 0 ? 'not an email' : `User${i}@Example.com`,
  String(i % 1000).padStart(5, '0'),
]);

async function readAll(source: TableSource): Promise<{ cells: string[][]; lines: number[] }> {
  const cells: string[][] = [];
  const lines: number[] = [];
  for await (const chunk of source.rows())
    for (const r of chunk) {
      cells.push(r.cells);
      lines.push(r.line);
    }
  return { cells, lines };
}

describe('Parquet rows decoded on a reading thread (dist)', () => {
  let openTableInput: OpenTableInput;
  const openSource = async (opts: AskedSource) => openTableInput(await settled(opts), 1);
  const openHereSettled = async (opts: AskedSource) => openHere(await settled(opts));
  const dir = tempDir('uid2-parquet-read-thread-');
  let path = '';

  beforeAll(async () => {
    ensureBuilt();
    const url = pathToFileURL(join(ROOT, 'dist', 'pipeline', 'threads', 'table-input.js')).href;
    openTableInput = ((await import(url)) as { openTableInput: OpenTableInput }).openTableInput;
    path = join(dir.path, 'in.parquet');
    const sink = await openParquetSink({ path, format: 'parquet', header: HEADER }, 10_000);
    for (let i = 0; i < rows.length; i += 3000) await sink.writeRows(rows.slice(i, i + 3000));
    await sink.commit();
  });
  afterAll(() => dir.remove());

  it('gives the rows, lines and bytes read that reading on this thread gives', async () => {
    const here = await openHere(await settled({ path, chunkRows: 700 }));
    const there = await openSource({ path, chunkRows: 700, readThread: true });
    const a = await readAll(here);
    const b = await readAll(there);
    expect(b.cells).toEqual(rows);
    expect(b.lines).toEqual(rows.map((_, i) => i + 1));
    expect(b).toEqual(a);
    expect(there.bytesRead()).toBe(here.bytesRead());
    expect(there.bytesRead()).toBeGreaterThan(0);
  });

  it('prepares the identifier cells there as this thread would', async () => {
    const { columns } = resolveIdentifierColumns(HEADER, { emailCol: 'email' });
    const there = (await openSource({ path, chunkRows: 1000, readThread: true })) as Preparing;
    expect(typeof there.preparedChunks).toBe('function');
    let n = 0;
    for await (const chunk of there.preparedChunks(columns)) {
      expect(chunk.rows?.map((r) => r.cells)).toEqual(rows.slice(n, n + 1000));
      expect(chunk.prepared).toEqual(prepareRows(chunk.rows ?? [], columns));
      n += chunk.rows?.length ?? 0;
    }
    expect(n).toBe(rows.length);
  });

  it('keeps the rows for a text output and encodes them with their answers as this thread would', async () => {
    const { columns } = resolveIdentifierColumns(HEADER, { emailCol: 'email' });
    const layout = defaultLayout(columns);
    const there = (await openSource({ path, chunkRows: 1000, readThread: true })) as Preparing;
    const encode = rowEncoder({ format: 'csv' });
    let n = 0;
    try {
      for await (const chunk of there.preparedChunks(columns, { format: { format: 'csv' }, v2: false, layout })) {
        expect(chunk.rows).toBeUndefined();
        const mine = rows.slice(n, n + 1000).map((cells, i) => ({ line: n + i + 1, cells }));
        const answered = answer(chunk.prepared, chunk.ticket);
        const rejected: string[][] = [];
        const expected = encode(outputRows({ ...answered, rows: mine, width: columns.length }, rejected, layout));
        const { bytes, rejectBytes } = await there.encode(answered, true);
        expect(new TextDecoder().decode(bytes)).toBe(expected);
        expect(rejectBytes === null ? '' : new TextDecoder().decode(rejectBytes)).toBe(
          rejected.length > 0 ? encode(rejected) : '',
        );
        n += mine.length;
      }
    } finally {
      await there.closeThread();
    }
    expect(n).toBe(rows.length);
  });

  it('makes a Parquet output block of the kept columns and answers that rows would make, whatever is kept', async () => {
    const { columns } = resolveIdentifierColumns(HEADER, { emailCol: 'email' });
    for (const keep of [null, [2, 0], []]) {
      const layout = { ...defaultLayout(columns), keep };
      const width = outputColumns(HEADER, columns, layout).header.length;
      const there = (await openSource({ path, chunkRows: 1000, readThread: true })) as Preparing;
      let n = 0;
      try {
        const output = { format: { format: 'parquet', width }, v2: false, layout };
        for await (const chunk of there.preparedChunks(columns, output)) {
          const mine = rows.slice(n, n + 1000).map((cells, i) => ({ line: n + i + 1, cells }));
          const answered = answer(chunk.prepared, chunk.ticket);
          const out = outputRows({ ...answered, rows: mine, width: columns.length }, null, layout);
          const { bytes, rejectBytes } = await there.encode(answered, false);
          expect(Buffer.from(bytes).equals(Buffer.from(utf8RowBlock(out, width)))).toBe(true);
          expect(rejectBytes).toBeNull();
          n += mine.length;
        }
      } finally {
        await there.closeThread();
      }
      expect(n).toBe(rows.length);
    }
  });

  it('a row group that cannot be decoded is the same one-line input error as without the thread', async () => {
    const bytes = new Uint8Array(readFileSync(path));
    const meta = parquetMetadata(bytes.buffer);
    // the second group's email column: its pages overwritten with bytes that decode as nothing sensible
    const chunk = meta.row_groups[1].columns[1].meta_data;
    const start = Number(chunk?.dictionary_page_offset ?? chunk?.data_page_offset);
    bytes.fill(0xff, start, start + Number(chunk?.total_compressed_size));
    const broken = join(dir.path, 'broken.parquet');
    writeFileSync(broken, bytes);
    const failure = async (readThread: boolean) => {
      try {
        await readAll(await (readThread ? openSource : openHereSettled)({ path: broken, readThread }));
      } catch (err) {
        return { name: (err as Error).name, message: (err as Error).message };
      }
      return undefined;
    };
    const here = await failure(false);
    expect(here?.name).toBe('InputError');
    expect(here?.message).toContain('the row group holding rows 10001 to 20000');
    expect(await failure(true)).toEqual(here);
  });
});
