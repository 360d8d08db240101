import { readFileSync, writeFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';
import { parquetMetadata } from 'hyparquet';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import { afterAll, describe, expect, it } from 'vitest';
import { outputColumns } from '../../src/pipeline/map/result-columns.js';
import { ColumnError, resolveIdentifierColumns } from '../../src/pipeline/map/identifier-columns.js';
import {
  openParquetSource,
  requireTextColumns,
  type ParquetTableSource,
} from '../../src/pipeline/io/parquet/parquet-source.js';
import { openParquetSink } from '../../src/pipeline/io/parquet/parquet-sink.js';
import { openSink } from '../../src/pipeline/io/output/sink.js';
import { openSource } from '../../src/pipeline/io/source.js';
import { columnCells } from '../../src/pipeline/io/utf8-columns.js';
import { InputError, OutputError, type TableSource } from '../../src/pipeline/io/table.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { settled } from '../helpers/settled-reading.js';

const dir = tempDir('parquet');
afterAll(() => dir.remove());

async function readAll(
  source: TableSource,
): Promise<{ header: string[]; rows: Array<{ line: number; cells: string[] }> }> {
  const rows: Array<{ line: number; cells: string[] }> = [];
  for await (const chunk of source.rows()) for (const r of chunk) rows.push({ line: r.line, cells: r.cells });
  return { header: source.header, rows };
}

async function inputError(run: () => Promise<unknown>): Promise<InputError> {
  try {
    await run();
  } catch (err) {
    expect(err).toBeInstanceOf(InputError);
    return err as InputError;
  }
  throw new Error('expected an InputError');
}

/** A second, independent reader: DuckDB's own Parquet reader. */
async function duck(sql: string): Promise<{ columns: string[]; types: string[]; rows: unknown[][] }> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    const result = await conn.runAndReadAll(sql);
    return {
      columns: result.columnNames(),
      types: result.columnTypes().map((t) => t.toString()),
      rows: result.getRows(),
    };
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

/** The input columns as a CSV run reads them (texts that must stay as they are), then map's result columns. */
const HEADER = ['id', 'email', 'zip', 'note', 'raw_uid', 'prev_raw_uid', 'refresh_from', 'status', 'reason'];
const TYPES = ['input', 'input', 'input', 'input', 'string', 'string', 'unix_time', 'string', 'string'] as const;
function outputRows(n: number): string[][] {
  return Array.from({ length: n }, (_, i) => {
    const mapped = i % 10 !== 3;
    return [
      String(i).padStart(3, '0'),
      `user${i}@example.com`,
      i % 2 ? '02134' : '007',
      i % 7 === 0 ? '' : `note "${i}", é`,
      mapped ? `UID${i}`.padEnd(44, 'x') : '',
      mapped && i % 5 === 0 ? 'PREV'.padEnd(44, 'y') : '',
      mapped ? String(1_801_785_600 + i) : '',
      mapped ? 'mapped' : 'invalid',
      mapped ? '' : 'invalid email',
    ];
  });
}

describe('Parquet round trip', () => {
  const rows = outputRows(5003);
  const path = dir.file('out.parquet');

  it('rows written in row groups read back, cell for cell, as the CSV run has them', async () => {
    const sink = await openParquetSink({ path, format: 'parquet', header: HEADER, types: TYPES }, 1000);
    for (let i = 0; i < rows.length; i += 700) await sink.writeRows(rows.slice(i, i + 700).map((r) => r.slice()));
    await sink.commit();
    const source = await openSource(await settled({ path, chunkRows: 333 }));
    const back = await readAll(source);
    expect(back.header).toEqual(HEADER);
    expect(back.rows.map((r) => r.cells)).toEqual(rows);
    expect(back.rows.map((r) => r.line)).toEqual(rows.map((_, i) => i + 1));
    expect(source.bytesRead()).toBeGreaterThan(0);
  });

  it('a row group bigger than one read slice, with page offsets, reads back whole and in order', async () => {
    // small pages give every column an offset index, so the group can be read in slices of rows
    const n = 23_456;
    const emails = Array.from({ length: n }, (_, i) => `user${i}@example.com`);
    const zips = Array.from({ length: n }, (_, i) => String(i % 100_000).padStart(5, '0'));
    const writer = new ByteWriter();
    const pw = new ParquetWriter({
      writer,
      schema: [
        { name: 'root', num_children: 2 },
        { name: 'email', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
        { name: 'zip', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
      ],
    });
    pw.write({
      columnData: [
        { name: 'email', data: emails },
        { name: 'zip', data: zips },
      ],
      rowGroupSize: n,
      pageSize: 8192,
    });
    pw.finish();
    const bytes = new Uint8Array(writer.getBuffer());
    const bigPath = dir.file('one-group.parquet', bytes);
    const meta = parquetMetadata(bytes.buffer);
    expect(meta.row_groups.length).toBe(1);
    expect(meta.row_groups[0].columns.every((c) => c.offset_index_offset !== undefined)).toBe(true);
    // a group this small is read whole by default; without that, in slices of rows: the same rows either way
    for (const reading of [{}, { wholeGroupBytes: 0 }]) {
      const back = await readAll(await openParquetSource(await settled({ path: bigPath, chunkRows: 4096 }), reading));
      expect(back.rows.map((r) => r.cells)).toEqual(emails.map((e, i) => [e, zips[i]]));
      expect(back.rows.map((r) => r.line)).toEqual(emails.map((_, i) => i + 1));
    }
  });

  it('reads back in DuckDB with the types and nulls it was given', async () => {
    const meta = await duck(`SELECT * FROM parquet_metadata('${path}') WHERE column_id = 0`);
    expect(meta.rows.length).toBe(6); // 5003 rows in groups of 1000
    const described = await duck(`DESCRIBE SELECT * FROM read_parquet('${path}')`);
    expect(described.rows.map((r) => [r[0], r[1]])).toEqual(
      HEADER.map((h, i) => [h, TYPES[i] === 'unix_time' ? 'BIGINT' : 'VARCHAR']),
    );
    const got = await duck(`SELECT * FROM read_parquet('${path}')`);
    expect(got.rows.length).toBe(rows.length);
    const want = rows.map((r) =>
      r.map((cell, c) =>
        TYPES[c] === 'input' ? cell : cell === '' ? null : TYPES[c] === 'unix_time' ? BigInt(cell) : cell,
      ),
    );
    expect(got.rows).toEqual(want);
  });

  it('an ISO time column is a UTC timestamp in DuckDB and ISO text when read here; booleans and integers typed', async () => {
    const tsPath = dir.file('ts.parquet');
    const sink = await openParquetSink({
      path: tsPath,
      format: 'parquet',
      header: ['email', 'refresh_from', 'opted_out', 'n'],
      types: ['input', 'iso_time', 'boolean', 'integer'],
    });
    await sink.writeRows([
      ['a@example.com', '2027-02-05T00:00:00Z', 'true', '7'],
      ['b@example.com', '', 'false', ''],
      ['', '2027-02-05T00:00:00Z', '', '-3'],
    ]);
    await sink.commit();
    const got = await duck(
      `SELECT email, epoch(refresh_from)::BIGINT AS s, typeof(refresh_from) AS t, opted_out, typeof(opted_out), n, typeof(n) FROM read_parquet('${tsPath}')`,
    );
    expect(got.rows).toEqual([
      ['a@example.com', 1801785600n, 'TIMESTAMP WITH TIME ZONE', true, 'BOOLEAN', 7n, 'BIGINT'],
      ['b@example.com', null, 'TIMESTAMP WITH TIME ZONE', false, 'BOOLEAN', null, 'BIGINT'],
      ['', 1801785600n, 'TIMESTAMP WITH TIME ZONE', null, 'BOOLEAN', -3n, 'BIGINT'],
    ]);
    const back = await readAll(await openSource(await settled({ path: tsPath })));
    expect(back.rows.map((r) => r.cells)).toEqual([
      ['a@example.com', '2027-02-05T00:00:00.000Z', 'true', '7'],
      ['b@example.com', '', 'false', ''],
      ['', '2027-02-05T00:00:00.000Z', '', '-3'],
    ]);
  });

  it('a cell that does not fit its column type is refused in one line, not written', async () => {
    const p = dir.file('bad-type.parquet');
    const sink = await openParquetSink({ path: p, format: 'parquet', header: ['opted_out'], types: ['boolean'] });
    await expect(sink.writeRows([['maybe']])).rejects.toThrow(
      new OutputError(
        p,
        "column 'opted_out' holds a value that is not a boolean (true or false)",
        'this is a bug: please report it',
      ),
    );
    await sink.abort();
    expect(() => readFileSync(p)).toThrow();
  });

  it('reads what DuckDB wrote: strings as stored, other scalars as text, row groups in order', async () => {
    const p = dir.file('duck.parquet');
    await duck(
      `COPY (SELECT lpad(i::VARCHAR, 5, '0') AS zip, 'u' || i || '@example.com' AS email, i::BIGINT * 1000 AS n, (i % 2 = 0) AS even, NULL::VARCHAR AS empty
             FROM range(2500) t(i)) TO '${p}' (FORMAT parquet, ROW_GROUP_SIZE 1000, COMPRESSION zstd)`,
    );
    const source = (await openSource(await settled({ path: p }))) as ParquetTableSource;
    expect(source.columns.map((c) => c.kind)).toEqual(['string', 'string', 'scalar', 'scalar', 'string']);
    const back = await readAll(source);
    expect(back.rows.length).toBe(2500);
    expect(back.rows[7].cells).toEqual(['00007', 'u7@example.com', '7000', 'false', '']);
    expect(back.rows[2499].cells).toEqual(['02499', 'u2499@example.com', '2499000', 'false', '']);
    requireTextColumns(source, ['email', 'zip']);
  });

  it('reads what warehouses write: each codec, v1 and v2 data pages, one big row group, as DuckDB reads it', async () => {
    const n = 30_011;
    const table = `SELECT 'u' || i || '@example.com' AS email, CASE WHEN i % 5 = 0 THEN NULL ELSE 'note ' || (i % 13) END AS note,
                          lpad((i % 100000)::VARCHAR, 5, '0') AS zip FROM range(${n}) t(i)`;
    const expected = (await duck(`SELECT * FROM (${table})`)).rows.map((r) =>
      r.map((v) => (v === null ? '' : String(v))),
    );
    for (const codec of ['snappy', 'zstd', 'gzip', 'uncompressed'])
      for (const version of ['V1', 'V2']) {
        const p = dir.file(`warehouse-${codec}-${version}.parquet`);
        await duck(
          `COPY (${table}) TO '${p}' (FORMAT parquet, ROW_GROUP_SIZE ${n}, COMPRESSION ${codec}, PARQUET_VERSION ${version})`,
        );
        // a Buffer may be a view into a larger pooled ArrayBuffer (Node 24 reads small files so): copy out its own bytes
        const file = readFileSync(p);
        const own = file.buffer.slice(file.byteOffset, file.byteOffset + file.byteLength) as ArrayBuffer;
        expect(parquetMetadata(own).row_groups.length).toBe(1);
        // in slices (as a reading thread that also encodes reads it) and whole: the same rows either way
        for (const reading of [{ wholeGroupBytes: 0 }, {}]) {
          const back = await readAll(await openParquetSource(await settled({ path: p, chunkRows: 4096 }), reading));
          expect(back.rows.map((r) => r.cells)).toEqual(expected);
          expect(back.rows.map((r) => r.line)).toEqual(expected.map((_, i) => i + 1));
        }
      }
  });

  it('a big row group without an offset index, in small pages or in pages longer than a slice, reads back whole', async () => {
    const n = 30_011;
    const emails = Array.from({ length: n }, (_, i) => (i % 97 === 0 ? '' : `user${i}@example.com`));
    const zips = Array.from({ length: n }, (_, i) => String(i % 100_000).padStart(5, '0'));
    const notes = Array.from({ length: n }, (_, i) => (i % 5 === 0 ? null : `note ${i % 13}`));
    const expected = emails.map((e, i) => [e, zips[i], notes[i] ?? '']);
    for (const pageSize of [4096, 64 * 1024 * 1024]) {
      const writer = new ByteWriter();
      const pw = new ParquetWriter({
        writer,
        schema: [
          { name: 'root', num_children: 3 },
          { name: 'email', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
          { name: 'zip', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'REQUIRED' },
          { name: 'note', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
        ],
      });
      pw.write({
        columnData: [
          { name: 'email', data: emails, offsetIndex: false },
          { name: 'zip', data: zips, offsetIndex: false },
          { name: 'note', data: notes, offsetIndex: false },
        ],
        rowGroupSize: n,
        pageSize,
      });
      pw.finish();
      const bytes = new Uint8Array(writer.getBuffer());
      const p = dir.file(`no-index-${pageSize}.parquet`, bytes);
      expect(
        parquetMetadata(bytes.buffer).row_groups[0].columns.every((c) => c.offset_index_offset === undefined),
      ).toBe(true);
      for (const reading of [{ wholeGroupBytes: 0 }, {}]) {
        const back = await readAll(await openParquetSource(await settled({ path: p, chunkRows: 3000 }), reading));
        expect(back.rows.map((r) => r.cells)).toEqual(expected);
        expect(back.rows.map((r) => r.line)).toEqual(expected.map((_, i) => i + 1));
        const cells: string[][] = [];
        for await (const chunk of (
          await openParquetSource(await settled({ path: p, chunkRows: 3000 }), reading)
        ).utf8Chunks()) {
          const columns = chunk.columns.map(columnCells);
          for (let r = 0; r < chunk.rows; r++) cells.push(columns.map((c) => c[r]));
        }
        expect(cells).toEqual(expected);
      }
    }
  });
});

describe('Parquet bad input: one InputError naming the file, no cell value in it', () => {
  it('an identifier column that is INT64', async () => {
    const p = dir.file('int-phone.parquet');
    await duck(`COPY (SELECT 16175550102::BIGINT AS phone, 'x' AS name) TO '${p}' (FORMAT parquet)`);
    const source = await openParquetSource(await settled({ path: p }));
    const err = await inputError(async () => requireTextColumns(source, ['phone']));
    expect(err.message).toBe(
      `${p}: identifier column 'phone' is of type INT64 INT_64, not a string column; identifiers must be stored as strings: cast the column to VARCHAR/STRING when exporting`,
    );
  });

  it('a valid INTERVAL column, alone or inside a struct: an unsupported type, not a corrupt file', async () => {
    const p = dir.file('interval.parquet');
    await duck(
      `COPY (SELECT 'a@example.com' AS email, INTERVAL 3 MONTH AS wait, {'since': INTERVAL 1 DAY} AS s) TO '${p}' (FORMAT parquet)`,
    );
    const err = await inputError(async () => openParquetSource(await settled({ path: p })));
    expect(err.message).toMatch(/unsupported type INTERVAL in column 'wait'/);
    expect(err.message).toMatch(/CAST/);
    expect(err.message).not.toMatch(/corrupt/);
    const nested = dir.file('interval-nested.parquet');
    await duck(
      `COPY (SELECT 'a@example.com' AS email, {'since': INTERVAL 1 DAY} AS s) TO '${nested}' (FORMAT parquet)`,
    );
    expect((await inputError(async () => openSource(await settled({ path: nested })))).message).toMatch(
      /unsupported type INTERVAL in column 's'/,
    );
  });

  it('an identifier column that is nested', async () => {
    const p = dir.file('nested.parquet');
    await duck(
      `COPY (SELECT {'address': 'a@example.com'} AS email, ['b@example.com'] AS emails) TO '${p}' (FORMAT parquet)`,
    );
    const source = await openParquetSource(await settled({ path: p }));
    expect(source.columns.map((c) => c.kind)).toEqual(['nested', 'nested']);
    expect((await inputError(async () => requireTextColumns(source, ['email']))).message).toContain(
      "identifier column 'email' is a nested column (group), not a string column",
    );
    expect((await inputError(async () => requireTextColumns(source, ['emails']))).message).toContain(
      "identifier column 'emails' is a nested column (LIST)",
    );
    const back = await readAll(source);
    expect(back.rows[0].cells).toEqual(['{"address":"a@example.com"}', '["b@example.com"]']);
  });

  it('no identifier column: the usual column error, with the columns there are', async () => {
    const p = dir.file('no-id.parquet');
    await duck(`COPY (SELECT 1 AS id, 'x' AS name) TO '${p}' (FORMAT parquet)`);
    const source = await openSource(await settled({ path: p }));
    expect(() => resolveIdentifierColumns(source.header, {})).toThrow(ColumnError);
  });

  it('a corrupt or truncated footer', async () => {
    const good = readFileSync(dir.file('out.parquet'));
    const truncated = dir.file('truncated.parquet', good.subarray(0, good.length - 100));
    const err = await inputError(async () => openSource(await settled({ path: truncated })));
    expect(err.message).toBe(
      `${truncated}: not a readable Parquet file (its footer is missing or corrupt: a truncated copy?); copy or export it again`,
    );
    // the footer's first bytes (its schema), whatever the writer put at its end (free text such as created_by)
    const garbled = Buffer.from(good);
    const footerStart = garbled.length - 8 - garbled.readUInt32LE(garbled.length - 8);
    garbled.fill(0x41, footerStart, footerStart + 52);
    const corrupt = dir.file('corrupt-footer.parquet', garbled);
    expect((await inputError(async () => openSource(await settled({ path: corrupt })))).message).toContain(
      'not a readable Parquet file',
    );
  });

  it('corrupt data inside a row group', async () => {
    const good = Buffer.from(readFileSync(dir.file('out.parquet')));
    good.fill(0x7f, 200, 4000);
    const p = dir.file('corrupt-data.parquet', good);
    const err = await inputError(async () => readAll(await openSource(await settled({ path: p }))));
    expect(err.message).toMatch(
      /: the row group holding rows 1 to 1000 cannot be decoded \(corrupt data\?\); export it again/,
    );
  });

  it('an empty row group is skipped, the others read', async () => {
    const writer = new ByteWriter();
    const pw = new ParquetWriter({
      writer,
      schema: [
        { name: 'root', num_children: 1 },
        { name: 'email', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
      ],
    });
    pw.write({ columnData: [{ name: 'email', data: ['a@example.com'] }] });
    // a row group that claims no rows, as some writers leave after a flush with nothing in it
    pw.row_groups.push({ ...pw.row_groups[0], num_rows: 0n });
    pw.write({ columnData: [{ name: 'email', data: ['b@example.com'] }] });
    pw.finish();
    const p = dir.file('empty-group.parquet', new Uint8Array(writer.getBuffer()));
    const back = await readAll(await openSource(await settled({ path: p })));
    expect(back.rows).toEqual([
      { line: 1, cells: ['a@example.com'] },
      { line: 2, cells: ['b@example.com'] },
    ]);
  });

  it('a file with no row group at all is an empty table', async () => {
    const p = dir.file('empty.parquet');
    await duck(`COPY (SELECT 'a@example.com' AS email WHERE false) TO '${p}' (FORMAT parquet)`);
    const back = await readAll(await openSource(await settled({ path: p })));
    expect(back).toEqual({ header: ['email'], rows: [] });
  });

  it('Parquet from stdin, or missing', async () => {
    expect((await inputError(async () => openSource(await settled({ path: '-', format: 'parquet' })))).message).toBe(
      '<stdin>: Parquet cannot be read from stdin (its index is at the end of the file); give the file name instead of -',
    );
    expect(
      (await inputError(async () => openSource(await settled({ path: dir.file('nope.parquet') })))).message,
    ).toMatch(/nope\.parquet: no such file$/);
  });
});

describe('Parquet output refusals', () => {
  it('stdout and gzip are refused in one line; nothing is left behind on abort', async () => {
    await expect(openSink({ path: '-', format: 'parquet', header: ['a'] })).rejects.toThrow(OutputError);
    await expect(
      openSink({ path: dir.file('x.parquet'), format: 'parquet', header: ['a'], compress: 'gzip' }),
    ).rejects.toThrow(/Parquet is not gzipped as a whole/);
    const p = dir.file('aborted.parquet');
    const sink = await openSink({ path: p, format: 'parquet', header: ['a'] });
    await sink.writeRows([['x']]);
    await sink.abort();
    expect(() => readFileSync(p)).toThrow();
    writeFileSync(p, 'old');
    const again = await openSink({ path: p, format: 'parquet', header: ['a'] });
    await again.writeRows([['x']]);
    await again.abort();
    expect(readFileSync(p, 'utf8')).toBe('old');
  });
});

describe('map output as Parquet', () => {
  it("the rows of a CSV run, typed by map's output columns, read back the same and load typed in DuckDB", async () => {
    const columns = [{ name: 'email' }, { name: 'phone' }];
    const { header, types } = outputColumns(['id', 'email', 'phone'], columns);
    expect(header.length).toBe(types.length);
    expect(header.filter((_, i) => types[i] === 'unix_time')).toEqual(['email_refresh_from', 'phone_refresh_from']);
    const rows = [
      ['007', 'a@example.com', '', 'U'.repeat(44), '', '1801785600', 'mapped', '', '', '', '', 'missing', ''],
      [
        '008',
        'broken',
        '+16175550102',
        '',
        '',
        '',
        'invalid',
        'invalid email',
        'P'.repeat(44),
        'Q'.repeat(44),
        '1801785601',
        'mapped',
        '',
      ],
    ];
    const path = dir.file('map-out.parquet');
    const sink = await openSink({ path, format: 'parquet', header, types });
    await sink.writeRows(rows.map((r) => r.slice()));
    await sink.commit();
    expect((await readAll(await openSource(await settled({ path })))).rows.map((r) => r.cells)).toEqual(rows);
    const got = await duck(
      `SELECT id, phone, email_refresh_from, email_reason, phone_refresh_from, phone_status FROM read_parquet('${path}')`,
    );
    expect(got.rows).toEqual([
      ['007', '', 1801785600n, null, null, 'missing'],
      ['008', '+16175550102', null, 'invalid email', 1801785601n, 'mapped'],
    ]);
  });
});

describe('requireTextColumns on any input', () => {
  it('checks nothing for a CSV source, which has no column types', async () => {
    const p = dir.file('plain.csv', 'phone\n16175550102\n');
    const source = await openSource(await settled({ path: p }));
    expect(() => requireTextColumns(source, ['phone'])).not.toThrow();
  });
});
