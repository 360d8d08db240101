// Runner K of N under --shard: what the N runners read, put end to end, is what one runner reads.
import { afterAll, describe, expect, it } from 'vitest';
import { readCsvRecords } from '../../../src/pipeline/io/csv/csv-records.js';
import type { OpenSourceOptions } from '../../../src/pipeline/io/table.js';
import { openInput, settleInput, type InputReading } from '../../../src/pipeline/jobs/run-input.js';
import { partsShare, type Shard } from '../../../src/pipeline/shard/shard-spec.js';
import { isPieceSource, type TableInput } from '../../../src/pipeline/threads/table-input.js';
import { RowThreads } from '../../../src/pipeline/threads/row-threads.js';
import { tempDir } from '../../helpers/map-e2e-data.js';
import { seeded } from '../../helpers/seeded-random.js';

const dir = tempDir('shard-input');
afterAll(() => dir.remove());

type Reading = InputReading & Pick<OpenSourceOptions, 'onBadRecord'>;
interface Read {
  header: string[];
  rows: [number, string[]][];
  skipped: number[];
}

/** Everything a runner reads: the header, each row with its line, and the lines of records it skipped. */
async function readShard(paths: string[], reading: Reading, threads: number, shard?: Shard): Promise<Read> {
  const skipped: number[] = [];
  const options: Reading = {
    ...reading,
    ...(reading.onBadRecord ? { onBadRecord: (bad) => skipped.push(bad.line) } : {}),
  };
  const spec = await settleInput(paths, options, shard);
  const input: TableInput = await openInput(spec, {
    onBadRecord: options.onBadRecord,
    rowThreads: threads,
    findHeaderless: spec.format === 'csv' && spec.reading.header,
  });
  const rows: [number, string[]][] = [];
  if (isPieceSource(input)) {
    for await (const piece of input.pieces())
      readCsvRecords(piece, input.settings, input.name, (line, cells) => rows.push([line, cells]));
  } else {
    for await (const chunk of input.rows()) for (const row of chunk) rows.push([row.line, row.cells]);
  }
  const bad = input.problems().badRows ?? 0;
  expect(bad).toBe(skipped.length);
  return { header: input.header, rows, skipped };
}

/** Reads as one runner, then as N runners for N = 1..4, and checks the shares put end to end are the whole. */
async function expectSharesMakeTheWhole(paths: string[], reading: Reading = {}, threads = 0): Promise<Read> {
  const whole = await readShard(paths, reading, threads);
  for (let count = 1; count <= 4; count++) {
    const shares: Read[] = [];
    for (let index = 1; index <= count; index++)
      shares.push(await readShard(paths, reading, threads, { index, count }));
    for (const share of shares) expect(share.header).toEqual(whole.header);
    expect(shares.flatMap((s) => s.rows)).toEqual(whole.rows);
    expect(shares.flatMap((s) => s.skipped)).toEqual(whole.skipped);
  }
  return whole;
}

const threadCounts = RowThreads.available() ? [0, 2] : [0];

describe('one CSV file shared out by byte range', () => {
  it.each(threadCounts)(
    'quoted line breaks, CRLF, empty lines and a BOM: the shares are the whole (threads %i)',
    async (threads) => {
      const text =
        '\ufeffemail,note\r\n' +
        'a@example.com,"one\r\ntwo"\r\n' +
        '\r\n' +
        'b@example.com,"say ""hi""\nthere"\n' +
        'c@example.com,plain\r' +
        'd@example.com,"x,y"\n\n\n' +
        'e@example.com,last';
      const whole = await expectSharesMakeTheWhole([dir.file('quoted.csv', text)], {}, threads);
      expect(whole.rows.map(([line]) => line)).toEqual([2, 5, 7, 8, 11]);
    },
  );

  it.each(threadCounts)('a larger file of random quoting: the shares are the whole (threads %i)', async (threads) => {
    const random = seeded(29);
    const cell = (): string => {
      const r = random();
      if (r < 0.2) return `"q${Math.floor(random() * 1e6)}\n,""x"""`;
      if (r < 0.3) return '';
      return `v${Math.floor(random() * 1e9)}`;
    };
    const lines = ['email,a,b'];
    for (let i = 0; i < 3000; i++) lines.push(`u${i}@example.com,${cell()},${cell()}`);
    const whole = await expectSharesMakeTheWhole(
      [dir.file('random.csv', `${lines.join(random() < 2 ? '\r\n' : '\n')}\n`)],
      {},
      threads,
    );
    expect(whole.rows).toHaveLength(3000);
    // spread evenly by bytes, each of 4 runners has about a quarter of the rows
    for (let index = 1; index <= 4; index++) {
      const share = await readShard([dir.file('random.csv')], {}, threads, { index, count: 4 });
      expect(share.rows.length).toBeGreaterThan(600);
    }
  });

  it('fewer records than runners, one record, a header alone and an empty file', async () => {
    expect(
      (await expectSharesMakeTheWhole([dir.file('two.csv', 'email\na@example.com\nb@example.com\n')])).rows,
    ).toHaveLength(2);
    expect((await expectSharesMakeTheWhole([dir.file('header.csv', 'email\n')])).rows).toHaveLength(0);
    expect((await expectSharesMakeTheWhole([dir.file('empty.csv', '')])).header).toEqual([]);
    expect((await expectSharesMakeTheWhole([dir.file('blank.csv', '\n\n')])).header).toEqual([]);
  });

  it('a file without a header line, said or found: its first record is runner 1 row alone', async () => {
    const noHeader = dir.file('no-header.csv', 'a@example.com,1\nb@example.com\nc@example.com,3,4\nd@example.com,4\n');
    expect((await expectSharesMakeTheWhole([noHeader], { header: false })).rows).toHaveLength(4);
    const found = dir.file('found.csv', 'a@example.com\nb@example.com\nc@example.com\n');
    const whole = await expectSharesMakeTheWhole([found]);
    expect(whole.rows.map(([line]) => line)).toEqual([1, 2, 3]);
  });

  it('records skipped as unreadable are said by the runner whose range holds them', async () => {
    const bad = dir.file('bad.csv', 'email,n\na@example.com,1\nb@example.com,\u0000\nc@example.com,3\n');
    const whole = await expectSharesMakeTheWhole([bad], { onBadRecord: () => undefined });
    expect(whole.skipped).toEqual([3]);
  });
});

describe('one JSON Lines file shared out by byte range', () => {
  it('the first chunk makes every runner header; bad lines and extra keys land with their runner', async () => {
    const lines: string[] = [];
    for (let i = 0; i < 40; i++) {
      if (i % 9 === 4) lines.push('not json');
      else if (i % 7 === 6) lines.push('');
      else
        lines.push(
          JSON.stringify(
            i === 2
              ? { email: `u${i}@x.org`, zip: '1' }
              : i === 30
                ? { late: 'y', email: 'z@x.org' }
                : { email: `u${i}@x.org` },
          ),
        );
    }
    const path = dir.file('rows.jsonl', `${lines.join('\n')}\n`);
    const whole = await expectSharesMakeTheWhole([path], { chunkRows: 5, onBadRecord: () => undefined });
    expect(whole.header).toEqual(['email', 'zip']);
    expect(whole.skipped.length).toBeGreaterThan(2);
  });
});

describe('several parts shared out whole', () => {
  it('runs of parts in reading order, also with fewer parts than runners', async () => {
    const parts = [0, 1, 2].map((p) =>
      dir.file(`part-${p}.csv`, `email,n\np${p}a@example.com,1\np${p}b@example.com,2\n`),
    );
    const empty = dir.file('part-3.csv', '');
    expect((await expectSharesMakeTheWhole([...parts, empty])).rows).toHaveLength(6);
    expect((await expectSharesMakeTheWhole(parts.slice(0, 2))).rows).toHaveLength(4);
  });

  it('each part is one runner, and every part is some runner', () => {
    for (let parts = 0; parts <= 9; parts++) {
      for (let count = 1; count <= 5; count++) {
        const owners = Array.from({ length: parts }, (_, i) =>
          Array.from({ length: count }, (_, k) => k + 1).filter((index) => partsShare(parts, { index, count })(i)),
        );
        expect(owners.every((o) => o.length === 1)).toBe(true);
        // runs in order: the owner never goes down from one part to the next
        expect(owners.map((o) => o[0])).toEqual([...owners.map((o) => o[0])].sort((a, b) => a - b));
      }
    }
  });
});
