/** Writes the Arrow IPC stream the Parquet writer reads: a schema and one record batch of the column types we write. */

/**
 * The Parquet writer (parquet-wasm) takes its rows only as an Arrow IPC stream. The stream is the Arrow columnar
 * format's: each message is a continuation marker (0xFFFFFFFF), the length of its metadata, the metadata (a
 * flatbuffer, padded to 8 bytes), then its body; the stream ends with a marker and a length of 0. Only what the
 * tool writes is encoded here: nullable UTF-8, 64-bit integer, boolean and UTC millisecond timestamp columns, in
 * one record batch without compression or dictionaries. The flatbuffers are laid out front to back (each table's
 * vtable just before it, what it refers to just after it), every scalar at an address aligned to its size, as the
 * reader's verifier requires.
 */

/** The column types of a stream. */
export type ArrowType = 'utf8' | 'int64' | 'bool' | 'timestamp-ms-utc';

/** A column of the schema; every column is nullable. */
export interface ArrowField {
  name: string;
  type: ArrowType;
}

/** One column of a record batch, its buffers as the Arrow columnar format lays them out. */
export interface ArrowColumn {
  nullCount: number;
  /** A bit per row (least significant first), set where the row holds a value; not written when nullCount is 0. */
  validity?: Uint8Array;
  /** utf8 only: the rows + 1 offsets of the cells in `data`. */
  offsets?: Int32Array;
  /** utf8: the cells' bytes, in parts written one after the other; int64 and timestamp: 8 bytes a row; bool: a bit a row. */
  data: readonly ArrayBufferView[];
}

// enumerations of the Arrow format's Schema.fbs and Message.fbs
const METADATA_V5 = 4;
const HEADER_SCHEMA = 1;
const HEADER_RECORD_BATCH = 3;
const TYPE_INT = 2;
const TYPE_UTF8 = 5;
const TYPE_BOOL = 6;
const TYPE_TIMESTAMP = 10;
const TIME_UNIT_MILLISECOND = 1;

const CONTINUATION = 0xffffffff;

/** A stream writer for one schema: its schema message is encoded once. */
export class ArrowIpcWriter {
  private readonly schemaMessage: Uint8Array;

  constructor(private readonly fields: readonly ArrowField[]) {
    const schema = table([i16(0), ref(tables(fields.map(fieldTable)))]); // endianness little, fields
    this.schemaMessage = message(HEADER_SCHEMA, schema, 0);
  }

  /** The stream of one record batch of `rows` rows: schema, batch, end of stream. */
  stream(rows: number, columns: readonly ArrowColumn[]): Uint8Array {
    if (columns.length !== this.fields.length)
      throw new Error(`${columns.length} columns for a schema of ${this.fields.length}`);
    const nodes: number[] = [];
    const buffers: number[] = [];
    const parts: (readonly ArrayBufferView[])[] = [];
    let body = 0;
    const add = (views: readonly ArrayBufferView[]): void => {
      let length = 0;
      for (const view of views) length += view.byteLength;
      buffers.push(body, length);
      parts.push(views);
      body += padded(length);
    };
    columns.forEach((column, c) => {
      nodes.push(rows, column.nullCount);
      const validity = column.nullCount > 0 ? column.validity : undefined;
      if (column.nullCount > 0 && (validity === undefined || validity.byteLength < (rows + 7) >> 3))
        throw new Error(`column ${c} has ${column.nullCount} nulls and no validity bitmap for ${rows} rows`);
      add(validity === undefined ? [] : [validity]);
      if (this.fields[c].type === 'utf8') {
        if (column.offsets === undefined || column.offsets.length !== rows + 1)
          throw new Error(`utf8 column ${c} without ${rows + 1} offsets`);
        add([column.offsets]);
      }
      add(column.data);
    });
    const batch = table([i64(rows), ref(structs(nodes)), ref(structs(buffers))]);
    const batchMessage = message(HEADER_RECORD_BATCH, batch, body);
    const out = new Uint8Array(this.schemaMessage.length + batchMessage.length + body + 8);
    out.set(this.schemaMessage, 0);
    let at = this.schemaMessage.length;
    out.set(batchMessage, at);
    at += batchMessage.length;
    for (const views of parts) {
      let end = at;
      for (const view of views) {
        out.set(new Uint8Array(view.buffer, view.byteOffset, view.byteLength), end);
        end += view.byteLength;
      }
      at += padded(end - at);
    }
    new DataView(out.buffer).setUint32(at, CONTINUATION, true); // end of stream: the marker and a length of 0
    return out;
  }
}

function fieldTable(field: ArrowField): Obj {
  let typeId: number;
  let type: Obj;
  switch (field.type) {
    case 'utf8':
      [typeId, type] = [TYPE_UTF8, table([])];
      break;
    case 'bool':
      [typeId, type] = [TYPE_BOOL, table([])];
      break;
    case 'int64':
      [typeId, type] = [TYPE_INT, table([i32(64), u8(1)])]; // bit width, signed
      break;
    case 'timestamp-ms-utc':
      [typeId, type] = [TYPE_TIMESTAMP, table([i16(TIME_UNIT_MILLISECOND), ref(text('UTC'))])];
      break;
  }
  // name, nullable, type's kind, type, dictionary (none), children (none)
  return table([ref(text(field.name)), u8(1), u8(typeId), ref(type), undefined, ref(tables([]))]);
}

/** An encapsulated message: marker, metadata length, the Message flatbuffer padded to 8 bytes (its body follows). */
function message(headerType: number, header: Obj, bodyLength: number): Uint8Array {
  const flat = flatbuffer(table([i16(METADATA_V5), u8(headerType), ref(header), i64(bodyLength)]));
  const out = new Uint8Array(8 + flat.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, CONTINUATION, true);
  view.setInt32(4, flat.length, true);
  out.set(flat, 8);
  return out;
}

function padded(length: number): number {
  return (length + 7) & ~7;
}

// ---- a flatbuffer writer for the few shapes above ----

/** A scalar field of a table, of 1, 2, 4 or 8 bytes. */
interface Scalar {
  size: 1 | 2 | 4 | 8;
  value: number;
}
/** A field of a table: a scalar, an offset to an object, or absent. */
type Slot = Scalar | { ref: Obj } | undefined;
/** What an offset points at. */
type Obj =
  | { table: readonly Slot[] }
  | { text: string }
  /** A vector of structs of two 64-bit integers (FieldNode, Buffer): the integers in order. */
  | { structs: readonly number[] }
  | { tables: readonly Obj[] };

const u8 = (value: number): Scalar => ({ size: 1, value });
const i16 = (value: number): Scalar => ({ size: 2, value });
const i32 = (value: number): Scalar => ({ size: 4, value });
const i64 = (value: number): Scalar => ({ size: 8, value });
const ref = (obj: Obj): Slot => ({ ref: obj });
const table = (slots: readonly Slot[]): Obj => ({ table: slots });
const text = (value: string): Obj => ({ text: value });
const structs = (values: readonly number[]): Obj => ({ structs: values });
const tables = (objs: readonly Obj[]): Obj => ({ tables: objs });

/** The bytes of a flatbuffer whose root is `root`, padded to 8 bytes. */
function flatbuffer(root: Obj): Uint8Array {
  const out = new FlatOut();
  out.end = 4;
  out.offsetAt(0, out.place(root));
  out.align(8);
  return out.bytes.slice(0, out.end);
}

class FlatOut {
  bytes = new Uint8Array(512);
  view = new DataView(this.bytes.buffer);
  end = 0;

  /** Moves the end (over zero bytes) until end + phase is a multiple of `to`. */
  align(to: number, phase = 0): void {
    this.room((to - ((this.end + phase) % to)) % to);
    this.end += (to - ((this.end + phase) % to)) % to;
  }

  room(more: number): void {
    if (this.end + more <= this.bytes.length) return;
    const bigger = new Uint8Array(Math.max(this.bytes.length * 2, this.end + more));
    bigger.set(this.bytes);
    this.bytes = bigger;
    this.view = new DataView(bigger.buffer);
  }

  /** Writes at `at` the unsigned offset from `at` forward to `target`. */
  offsetAt(at: number, target: number): void {
    if (target <= at) throw new Error('a flatbuffer offset that points backwards');
    this.view.setUint32(at, target - at, true);
  }

  /** Writes an object at the end; returns where an offset to it points. */
  place(obj: Obj): number {
    if ('table' in obj) return this.placeTable(obj.table);
    if ('text' in obj) {
      const bytes = Buffer.from(obj.text, 'utf8');
      this.align(4);
      const at = this.end;
      this.room(4 + bytes.length + 1);
      this.view.setUint32(at, bytes.length, true);
      this.bytes.set(bytes, at + 4);
      this.end = at + 4 + bytes.length + 1; // and a NUL after the text
      return at;
    }
    if ('structs' in obj) {
      const values = obj.structs;
      this.align(8, 4); // the elements after the length are 8-byte aligned
      const at = this.end;
      this.room(4 + 8 * values.length);
      this.view.setUint32(at, values.length / 2, true);
      for (let k = 0; k < values.length; k++) this.setInt64(at + 4 + 8 * k, values[k]);
      this.end = at + 4 + 8 * values.length;
      return at;
    }
    const objs = obj.tables;
    this.align(4);
    const at = this.end;
    this.room(4 + 4 * objs.length);
    this.view.setUint32(at, objs.length, true);
    this.end = at + 4 + 4 * objs.length;
    for (let k = 0; k < objs.length; k++) this.offsetAt(at + 4 + 4 * k, this.place(objs[k]));
    return at;
  }

  /**
   * A table: its vtable, then the table (an offset back to the vtable, then its fields, largest first so each is
   * aligned), then the objects its fields refer to.
   */
  private placeTable(slots: readonly Slot[]): number {
    const order = slots
      .map((slot, index) => ({ slot, index, size: slot === undefined ? 0 : 'ref' in slot ? 4 : slot.size }))
      .filter((f) => f.slot !== undefined)
      .sort((a, b) => b.size - a.size || a.index - b.index);
    const inline = 4 + order.reduce((n, f) => n + f.size, 0);
    const vtableSize = 4 + 2 * slots.length;
    this.align(2);
    const vtable = this.end;
    this.end += vtableSize;
    // with 8-byte fields the table starts 4 bytes before an 8-byte boundary: its fields then follow aligned
    this.align(order[0]?.size === 8 ? 8 : 4, order[0]?.size === 8 ? 4 : 0);
    const start = this.end;
    this.room(inline);
    this.view.setUint16(vtable, vtableSize, true);
    this.view.setUint16(vtable + 2, inline, true);
    this.view.setInt32(start, start - vtable, true);
    let at = start + 4;
    const refs: { at: number; obj: Obj }[] = [];
    for (const { slot, index, size } of order) {
      this.view.setUint16(vtable + 4 + 2 * index, at - start, true);
      const field = slot as Scalar | { ref: Obj };
      if ('ref' in field) refs.push({ at, obj: field.ref });
      else if (size === 1) this.view.setUint8(at, field.value);
      else if (size === 2) this.view.setInt16(at, field.value, true);
      else if (size === 4) this.view.setInt32(at, field.value, true);
      else this.setInt64(at, field.value);
      at += size;
    }
    this.end = start + inline;
    for (const { at: slot, obj } of refs) this.offsetAt(slot, this.place(obj));
    return start;
  }

  private setInt64(at: number, value: number): void {
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`not a length or count: ${value}`);
    this.view.setUint32(at, value % 4294967296, true);
    this.view.setUint32(at + 4, Math.floor(value / 4294967296), true);
  }
}
