// The Arrow IPC streams we write, read by apache-arrow (the oracle) and by the Parquet writer.
import {
  Bool,
  type DataType,
  Field,
  Int64,
  makeData,
  RecordBatch,
  Schema,
  Struct,
  Table,
  TimestampMillisecond,
  tableFromIPC,
  tableToIPC,
  Utf8,
  vectorFromArray,
} from 'apache-arrow';
import { Compression, Table as WasmTable, WriterPropertiesBuilder, writeParquet } from 'parquet-wasm';
import { describe, expect, it } from 'vitest';
import {
  type ArrowColumn,
  type ArrowField,
  ArrowIpcWriter,
  type ArrowType,
} from '../../src/pipeline/io/parquet/arrow-ipc.js';

type Cell = string | bigint | boolean | number | null;

/** A small seeded generator (mulberry32), so a failure can be run again. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PIECES = ['a', 'Z', '0', ' ', ',', '"', 'é', 'ß', '中', '😀', '\n', '\u0000'];

function randomCell(type: ArrowType, random: () => number): Cell {
  if (random() < 0.2) return null;
  switch (type) {
    case 'utf8': {
      const pick = random();
      // empty, short, or long (several kilobytes) texts, ASCII and not
      const length = pick < 0.1 ? 0 : pick < 0.95 ? Math.floor(random() * 12) : 2000 + Math.floor(random() * 3000);
      let text = '';
      for (let k = 0; k < length; k++) text += PIECES[Math.floor(random() * PIECES.length)];
      return text;
    }
    case 'int64': {
      const pick = random();
      if (pick < 0.1) return 2n ** 63n - 1n;
      if (pick < 0.2) return -(2n ** 63n);
      return BigInt(Math.floor((random() - 0.5) * 2 ** 53));
    }
    case 'bool':
      return random() < 0.5;
    case 'timestamp-ms-utc':
      return Math.floor((random() - 0.3) * 4e12);
  }
}

function arrowType(type: ArrowType): DataType {
  switch (type) {
    case 'utf8':
      return new Utf8();
    case 'int64':
      return new Int64();
    case 'bool':
      return new Bool();
    case 'timestamp-ms-utc':
      return new TimestampMillisecond('UTC');
  }
}

/** The column's buffers as the Arrow format lays them out, made from its cells here (not by apache-arrow). */
function ourColumn(type: ArrowType, cells: readonly Cell[]): ArrowColumn {
  const rows = cells.length;
  const validity = new Uint8Array((rows + 7) >> 3);
  let nullCount = 0;
  cells.forEach((cell, r) => {
    if (cell === null) nullCount++;
    else validity[r >> 3] |= 1 << (r & 7);
  });
  if (type === 'utf8') {
    const parts = cells.map((cell) => Buffer.from((cell as string | null) ?? '', 'utf8'));
    const offsets = new Int32Array(rows + 1);
    parts.forEach((part, r) => {
      offsets[r + 1] = offsets[r] + part.length;
    });
    // the bytes given in several parts, as the encoder gives the runs of its blocks
    const all = Buffer.concat(parts);
    const cut = Math.floor(all.length / 3);
    return { nullCount, validity, offsets, data: [all.subarray(0, cut), all.subarray(cut)] };
  }
  if (type === 'bool') {
    const bits = new Uint8Array((rows + 7) >> 3);
    cells.forEach((cell, r) => {
      if (cell === true) bits[r >> 3] |= 1 << (r & 7);
    });
    return { nullCount, validity, data: [bits] };
  }
  const values = new BigInt64Array(rows);
  cells.forEach((cell, r) => {
    if (cell !== null) values[r] = BigInt(cell as bigint | number);
  });
  return { nullCount, validity, data: [values] };
}

/** The same rows as apache-arrow builds them from the cells. */
function oracleTable(fields: readonly ArrowField[], columns: readonly Cell[][], rows: number): Table {
  const schema = new Schema(fields.map((f) => new Field(f.name, arrowType(f.type), true)));
  const children = fields.map((f, c) => {
    const vector = vectorFromArray(columns[c] as unknown[], arrowType(f.type));
    expect(vector.data.length).toBe(1);
    return vector.data[0];
  });
  const data = makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children });
  return new Table(new RecordBatch(schema, data));
}

/** Columns of every type, then of random types; some names not ASCII. */
function randomFields(random: () => number, width: number): ArrowField[] {
  const types: ArrowType[] = ['utf8', 'int64', 'bool', 'timestamp-ms-utc'];
  return Array.from({ length: width }, (_, c) => ({
    name: c % 5 === 4 ? `colonne_${c}_é` : `c${c}`,
    type: types[c < types.length ? c : Math.floor(random() * types.length)],
  }));
}

function randomColumns(random: () => number, fields: readonly ArrowField[], rows: number): Cell[][] {
  return fields.map((f) => Array.from({ length: rows }, () => randomCell(f.type, random)));
}

function randomCase(seed: number, rows: number, width: number) {
  const random = seeded(seed);
  const fields = randomFields(random, width);
  return { fields, columns: randomColumns(random, fields, rows) };
}

/** A table's schema and cells, comparable with toEqual. */
function contents(table: Table) {
  return {
    fields: table.schema.fields.map((f) => ({ name: f.name, type: String(f.type), nullable: f.nullable })),
    rows: table.numRows,
    columns: table.schema.fields.map((f) => [...(table.getChild(f.name) ?? [])]),
  };
}

function parquetOf(ipc: Uint8Array): Uint8Array {
  const props = new WriterPropertiesBuilder()
    .setCompression(Compression.SNAPPY)
    .setMaxRowGroupSize(1000)
    .setCreatedBy('uid2-batch')
    .build();
  // the writer takes the table (and frees it)
  return writeParquet(WasmTable.fromIPCStream(ipc), props);
}

describe('Arrow IPC streams', () => {
  it.each([
    [1, 0, 4],
    [2, 1, 4],
    [3, 7, 6],
    [4, 9, 9],
    [5, 500, 12],
    [6, 20_000, 5],
  ])('seed %i: %i rows of %i columns read back by apache-arrow as it builds them', (seed, rows, width) => {
    const { fields, columns } = randomCase(seed, rows, width);
    const ipc = new ArrowIpcWriter(fields).stream(
      rows,
      fields.map((f, c) => ourColumn(f.type, columns[c])),
    );
    const ours = tableFromIPC(ipc);
    const oracle = oracleTable(fields, columns, rows);
    expect(contents(ours)).toEqual(contents(oracle));
    // and the cells are the generated ones, not merely the same on both sides
    if (rows > 0) expect(contents(ours).columns[0]).toEqual(columns[0]);
  });

  it('one writer writes stream after stream, each whole', () => {
    const random = seeded(7);
    const fields = randomFields(random, 6);
    const writer = new ArrowIpcWriter(fields);
    for (let batch = 0; batch < 20; batch++) {
      const rows = 1 + batch * 37;
      const columns = randomColumns(random, fields, rows);
      const ours = tableFromIPC(
        writer.stream(
          rows,
          fields.map((f, c) => ourColumn(f.type, columns[c])),
        ),
      );
      expect(contents(ours)).toEqual(contents(oracleTable(fields, columns, rows)));
    }
  });

  it('the Parquet writer makes the same file of our stream as of the stream apache-arrow writes', () => {
    const rows = 3000;
    const { fields, columns } = randomCase(11, rows, 10);
    const ours = new ArrowIpcWriter(fields).stream(
      rows,
      fields.map((f, c) => ourColumn(f.type, columns[c])),
    );
    const theirs = tableToIPC(oracleTable(fields, columns, rows), 'stream');
    const file = parquetOf(ours);
    expect(file.length).toBeGreaterThan(rows);
    expect(Buffer.from(file).equals(Buffer.from(parquetOf(theirs)))).toBe(true);
  });

  it('every message and buffer starts on an 8-byte boundary, and the stream ends with the end marker', () => {
    const { fields, columns } = randomCase(12, 13, 5);
    const ipc = new ArrowIpcWriter(fields).stream(
      13,
      fields.map((f, c) => ourColumn(f.type, columns[c])),
    );
    const view = new DataView(ipc.buffer, ipc.byteOffset, ipc.byteLength);
    // the schema: marker, metadata length, metadata, no body
    expect(view.getUint32(0, true)).toBe(0xffffffff);
    const schemaLength = view.getInt32(4, true);
    expect(schemaLength % 8).toBe(0);
    // the record batch: marker, metadata length, metadata, then its body up to the end marker
    const batch = 8 + schemaLength;
    expect(view.getUint32(batch, true)).toBe(0xffffffff);
    const batchLength = view.getInt32(batch + 4, true);
    expect(batchLength % 8).toBe(0);
    const body = batch + 8 + batchLength;
    expect((ipc.length - 8 - body) % 8).toBe(0);
    expect(ipc.length - 8 - body).toBeGreaterThan(0);
    expect([...ipc.subarray(ipc.length - 8)]).toEqual([255, 255, 255, 255, 0, 0, 0, 0]);
  });

  it('refuses a column with nulls and no bitmap, or offsets of the wrong length', () => {
    const writer = new ArrowIpcWriter([{ name: 's', type: 'utf8' }]);
    expect(() => writer.stream(2, [{ nullCount: 1, offsets: new Int32Array(3), data: [] }])).toThrow(/validity/);
    expect(() => writer.stream(2, [{ nullCount: 0, offsets: new Int32Array(2), data: [] }])).toThrow(/offsets/);
    expect(() => writer.stream(2, [])).toThrow(/0 columns for a schema of 1/);
  });
});
