import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_RECORD_BYTES } from '../../src/pipeline/io/record-limit.js';
import { openSource } from '../../src/pipeline/io/source.js';
import { InputError, type BadRecord } from '../../src/pipeline/io/table.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { settled, type AskedSource } from '../helpers/settled-reading.js';

const dir = tempDir('bad-records');
afterAll(() => dir.remove());

interface Read {
  rows: string[];
  bad: BadRecord[];
  badRows: number | undefined;
}

/** Reads a whole table in skip mode: rows as `line:cells`, and the records skipped. */
async function readSkipping(opts: AskedSource): Promise<Read> {
  const bad: BadRecord[] = [];
  const source = await openSource(await settled({ ...opts, onBadRecord: (b) => bad.push(b), chunkRows: 3 }));
  const rows: string[] = [];
  for await (const chunk of source.rows()) for (const r of chunk) rows.push(`${r.line}:${r.cells.join('|')}`);
  return { rows, bad, badRows: source.problems().badRows };
}

/** The bytes as a stream of reads of `size` bytes, so that a bad byte or a record falls across reads. */
function inReadsOf(bytes: Buffer, size: number): NodeJS.ReadableStream {
  const reads: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) reads.push(bytes.subarray(i, i + size));
  return Readable.from(reads, { objectMode: false });
}

async function failure(promise: Promise<unknown>): Promise<InputError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(InputError);
    return err as InputError;
  }
  throw new Error('expected an InputError');
}

const good = (i: number) => `${i},user${i}@example.com,n${i}`;

/** id,email,note: line 4 has invalid UTF-8, line 7 a NUL (CRLF there), the last record opens a quote never closed. */
function csvWithBadRecords(): Buffer {
  const parts = [
    'id,email,note\n',
    `${good(1)}\n${good(2)}\n`,
    Buffer.from('3,user3@example.com,caf\xe9\n', 'latin1'),
    `${good(4)}\n\n${good(5)}\r\n`,
    '6,user6@example.com,a\u0000b\r\n',
    `${good(7)}\n`,
    '8,"user8@example.com,never closed\n',
    `${good(9)}\n`,
  ];
  return Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : p)));
}

const WANT_ROWS = [
  '2:1|user1@example.com|n1',
  '3:2|user2@example.com|n2',
  '5:4|user4@example.com|n4',
  '7:5|user5@example.com|n5',
  '9:7|user7@example.com|n7',
  '11:9|user9@example.com|n9',
];

describe('skipping bad CSV records', () => {
  it('skips the records with invalid UTF-8, a NUL or a quote never closed, and reads on', async () => {
    const path = dir.file('bad.csv', csvWithBadRecords());
    const got = await readSkipping({ path });
    expect(got.rows).toEqual(WANT_ROWS);
    expect(got.bad).toEqual([
      { file: path, line: 4, reason: 'invalid UTF-8' },
      { file: path, line: 8, reason: 'NUL byte (a binary or UTF-16 file?)' },
      { file: path, line: 10, reason: 'a quoted value opens on this line and is never closed' },
    ]);
    expect(got.badRows).toBe(3);
  });

  it.each([1, 2, 3, 5, 7, 11])('reads the same whatever the reads are cut into (%i bytes)', async (size) => {
    const got = await readSkipping({ path: 'bad.csv', stream: inReadsOf(csvWithBadRecords(), size) });
    expect(got.rows).toEqual(WANT_ROWS);
    expect(got.bad.map((b) => b.line)).toEqual([4, 8, 10]);
  });

  it.each([1, 4, 64])(
    'after a quote never closed, the bad bytes further down are still skipped (reads of %i)',
    async (size) => {
      const bytes = Buffer.concat([
        Buffer.from('id,email\n1,"a@example.com\n2,b\0@example.com\n3,c@example.com\n4,'),
        Buffer.from([0xff]),
        Buffer.from('d@example.com\n5,e@example.com\n'),
      ]);
      const got = await readSkipping({ path: 'bad.csv', stream: inReadsOf(bytes, size) });
      expect(got.rows).toEqual(['4:3|c@example.com', '6:5|e@example.com']);
      expect(got.bad).toEqual([
        { file: 'bad.csv', line: 2, reason: 'a quoted value opens on this line and is never closed' },
        { file: 'bad.csv', line: 3, reason: 'NUL byte (a binary or UTF-16 file?)' },
        { file: 'bad.csv', line: 5, reason: 'invalid UTF-8' },
      ]);
    },
  );

  it('without skip mode the first bad record still ends the run', async () => {
    const path = dir.file('bad-fail.csv', csvWithBadRecords());
    const err = await failure(
      (async () => {
        const source = await openSource(await settled({ path }));
        for await (const _ of source.rows());
      })(),
    );
    // the NUL is said first when one read holds both: it tells of a binary file, the stronger hint
    expect(err.line).toBe(8);
  });

  it('a bad header is never skipped', async () => {
    const path = dir.file('bad-header.csv', Buffer.from('id,e\xffmail\n1,a@example.com\n', 'latin1'));
    expect((await failure(readSkipping({ path }))).line).toBe(1);
  });

  it('a JSON Lines value nested 100,000 deep is skipped like any bad line', async () => {
    const deep = `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`;
    const path = dir.file(
      'deep.jsonl',
      `{"email":"a@example.com"}\n{"email":"b@example.com","x":${deep}}\n{"email":"c@example.com","x":[1]}\n`,
    );
    const got = await readSkipping({ path });
    expect(got.rows).toEqual(['1:a@example.com|', '3:c@example.com|[1]']);
    expect(got.bad).toEqual([
      { file: path, line: 2, reason: expect.stringContaining('nested deeper than 1,000 levels') },
    ]);
  });

  it('a record over the size limit is skipped up to the end of its first line', async () => {
    const big = `3,"${'x'.repeat(MAX_RECORD_BYTES + 10)}`;
    const path = dir.file('big.csv', `id,email,note\n${good(1)}\n${big}\n${good(4)}\n${good(5)}\n`);
    const got = await readSkipping({ path });
    expect(got.rows).toEqual(['2:1|user1@example.com|n1', '4:4|user4@example.com|n4', '5:5|user5@example.com|n5']);
    expect(got.bad).toEqual([{ file: path, line: 3, reason: expect.stringContaining('longer than 16 MB') }]);
  });

  it('gives up when most records are bad: not a file with a few bad rows', async () => {
    const lines = ['id,email'];
    for (let i = 0; i < 3000; i++) lines.push(i % 3 === 0 ? `${i},ok@example.com` : `${i},\u0000`);
    const path = dir.file('binary.csv', `${lines.join('\n')}\n`);
    const err = await failure(readSkipping({ path }));
    expect(err.message).toContain('not a file with a few bad rows');
  });
});

describe('skipping bad JSON Lines records', () => {
  it('skips lines that are not objects, not JSON or not UTF-8', async () => {
    const text = Buffer.concat([
      Buffer.from('{"id":"1","email":"a@example.com"}\n[1,2]\n{"id":"3",\n', 'utf8'),
      Buffer.from('{"id":"4","email":"caf\xe9@example.com"}\n', 'latin1'),
      Buffer.from('{"id":"5","email":"e@example.com"}\n', 'utf8'),
    ]);
    const path = dir.file('bad.jsonl', text);
    for (const opts of [{ path }, { path, stream: inReadsOf(text, 4) }]) {
      const got = await readSkipping(opts);
      expect(got.rows).toEqual(['1:1|a@example.com', '5:5|e@example.com']);
      expect(got.bad.map((b) => `${b.line} ${b.reason}`)).toEqual([
        '2 not a JSON object',
        '3 not valid JSON',
        '4 invalid UTF-8',
      ]);
    }
  });
});
