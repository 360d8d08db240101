/** Writes the output table as a Parquet file, one row group at a time, with typed result columns. */
import { rename, unlink, type FileHandle } from 'node:fs/promises';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import { fileFailure, finalModeFor, openOutputTemp } from './output-file.js';
import { OutputError, type OpenSinkOptions, type TableSink } from './table.js';
import type { ColumnType } from './typed-cells.js';

/** Rows held before they are written as one row group: big enough for good compression, small for memory. */
export const PARQUET_ROW_GROUP_ROWS = 50_000;

type SchemaElement = ConstructorParameters<typeof ParquetWriter>[0]['schema'][number];
type Cell = string | bigint | boolean | null;

/**
 * Parquet output, typed by the column types (typed-cells.ts): input cells as UTF-8 strings exactly as read ('' too);
 * the tool's own columns as what they hold: strings, INT64 ('integer', and 'unix_time' in seconds), BOOLEAN, and
 * 'iso_time' as a UTC TIMESTAMP in milliseconds; an empty cell of the tool's own columns as null. Rows wait in
 * column arrays until a row group is full, so memory is bounded by one row group whatever the output's size.
 * Like the CSV sink, the file is written beside the target and renamed into place only by commit().
 */
export async function openParquetSink(
  opts: OpenSinkOptions,
  rowGroupRows = PARQUET_ROW_GROUP_ROWS,
): Promise<TableSink> {
  if (opts.path === undefined || opts.path === '-') {
    throw new OutputError(
      '<stdout>',
      'Parquet cannot be written to stdout (its index is written at the end of the file)',
      'give a file name with -o, e.g. -o out.parquet',
    );
  }
  if (opts.compress === 'gzip') {
    throw new OutputError(
      opts.path,
      'Parquet is not gzipped as a whole (it compresses its own pages)',
      'drop --compress gzip, or write CSV or JSONL',
    );
  }
  if (opts.compress === undefined && /\.gz$/i.test(opts.path)) {
    throw new OutputError(
      opts.path,
      'a Parquet file is not gzipped as a whole (it compresses its own pages), so it should not be named .gz',
      'name it .parquet, or write CSV or JSONL to a .gz name',
    );
  }
  const types = opts.types ?? [];
  if (types.length > opts.header.length) throw new Error('more column types than columns');
  return ParquetSink.create(
    opts.path,
    opts.header,
    opts.header.map((_, i): ColumnType => types[i] ?? 'input'),
    opts.mode,
    rowGroupRows,
  );
}

class ParquetSink implements TableSink {
  private columns: Cell[][];
  private buffered = 0;
  private finished = false;
  private lastIso = '';
  private lastIsoMs = 0n;

  private constructor(
    private readonly target: string,
    private readonly tmp: string,
    private readonly handle: FileHandle,
    private readonly out: FileWriter,
    private readonly parquet: ParquetWriter,
    private readonly header: readonly string[],
    private readonly types: readonly ColumnType[],
    private readonly rowGroupRows: number,
    private readonly mode: number,
  ) {
    this.columns = header.map(() => []);
  }

  static async create(
    target: string,
    header: readonly string[],
    types: readonly ColumnType[],
    mode = 0o666,
    rowGroupRows: number,
  ): Promise<ParquetSink> {
    const { target: final, tmp, handle } = await openOutputTemp(target);
    const out = new FileWriter(handle);
    const schema: SchemaElement[] = [
      { name: 'root', num_children: header.length },
      ...header.map((name, i) => schemaElement(name, types[i])),
    ];
    const parquet = new ParquetWriter({ writer: out, schema, codec: 'SNAPPY', createdBy: 'uid2-batch' });
    return new ParquetSink(final, tmp, handle, out, parquet, header, types, Math.max(1, rowGroupRows), mode);
  }

  async writeRows(rows: string[][]): Promise<void> {
    if (this.finished) throw new Error('write after the output was committed or aborted');
    const width = this.header.length;
    for (const row of rows) {
      for (let c = 0; c < width; c++) this.columns[c].push(this.cellValue(c, row[c] ?? ''));
      this.buffered++;
      if (this.buffered >= this.rowGroupRows) await this.writeGroup();
    }
  }

  async writeEncoded(): Promise<void> {
    throw new Error('Parquet output takes rows, not encoded text: open the run without output encoding threads');
  }

  async commit(): Promise<void> {
    if (this.finished) throw new Error('commit after the output was committed or aborted');
    try {
      if (this.buffered > 0) await this.writeGroup();
      this.finished = true;
      await this.parquet.finish();
      await this.out.drain();
      await this.handle.sync();
      await this.handle.chmod(finalModeFor(this.target, this.mode));
      await this.handle.close();
      await rename(this.tmp, this.target);
    } catch (err) {
      this.finished = true;
      await this.discard();
      throw err instanceof OutputError ? err : fileFailure(this.target, err as Error);
    }
  }

  async abort(): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    await this.discard();
  }

  private async discard(): Promise<void> {
    await this.handle.close().catch(() => undefined);
    await unlink(this.tmp).catch(() => undefined);
  }

  private cellValue(column: number, cell: string): Cell {
    const type = this.types[column];
    if (type === 'input') return cell;
    if (cell === '') return null;
    switch (type) {
      case 'string':
        return cell;
      case 'boolean':
        if (cell === 'true') return true;
        if (cell === 'false') return false;
        throw this.notA(column, 'boolean (true or false)');
      case 'integer':
      case 'unix_time':
        return this.wholeNumber(column, cell);
      case 'iso_time':
        return this.timestampMs(column, cell);
    }
  }

  private wholeNumber(column: number, cell: string): bigint {
    if (!/^-?\d{1,19}$/.test(cell)) throw this.notA(column, 'whole number');
    return BigInt(cell);
  }

  /** An ISO time cell as UTC milliseconds; the tool writes Unix seconds where no ISO text exists (beyond year 275760). */
  private timestampMs(column: number, cell: string): bigint {
    if (cell === this.lastIso) return this.lastIsoMs;
    const ms = /^-?\d+$/.test(cell) ? this.wholeNumber(column, cell) * 1000n : Date.parse(cell);
    if (typeof ms === 'number' && !Number.isFinite(ms)) throw this.notA(column, 'time');
    // times repeat from row to row (refresh times fall on UTC midnights): the last one is kept
    this.lastIso = cell;
    this.lastIsoMs = BigInt(ms);
    return this.lastIsoMs;
  }

  private notA(column: number, what: string): OutputError {
    return new OutputError(
      this.target,
      `column '${this.header[column]}' holds a value that is not a ${what}`,
      'this is a bug: please report it',
    );
  }

  private async writeGroup(): Promise<void> {
    const columnData = this.header.map((name, c) => ({ name, data: this.columns[c] }));
    this.columns = this.header.map(() => []);
    const rows = this.buffered;
    this.buffered = 0;
    try {
      await this.parquet.write({ columnData, rowGroupSize: rows });
      await this.out.drain();
    } catch (err) {
      throw err instanceof OutputError ? err : fileFailure(this.target, err as Error);
    }
  }
}

function schemaElement(name: string, type: ColumnType): SchemaElement {
  switch (type) {
    case 'integer':
    case 'unix_time':
      return { name, type: 'INT64', repetition_type: 'OPTIONAL' };
    case 'boolean':
      return { name, type: 'BOOLEAN', repetition_type: 'OPTIONAL' };
    case 'iso_time':
      return {
        name,
        type: 'INT64',
        repetition_type: 'OPTIONAL',
        converted_type: 'TIMESTAMP_MILLIS',
        logical_type: { type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MILLIS' },
      };
    default:
      return {
        name,
        type: 'BYTE_ARRAY',
        repetition_type: 'OPTIONAL',
        converted_type: 'UTF8',
        logical_type: { type: 'STRING' },
      };
  }
}

/**
 * The Parquet writer's byte buffer, written to the file whenever the writer flushes (after each row group) and
 * at the end, so the buffer holds at most one row group.
 */
class FileWriter extends ByteWriter {
  private writing: Promise<void> = Promise.resolve();

  constructor(private readonly handle: FileHandle) {
    super(1024 * 1024);
  }

  flush(): Promise<void> {
    if (this.index === 0) return this.writing;
    // copied: the writer reuses its buffer for the next row group while this one is still being written
    const bytes = new Uint8Array(this.buffer, 0, this.index).slice();
    this.index = 0;
    this.writing = this.writing.then(() => writeAll(this.handle, bytes));
    return this.writing;
  }

  override finish(): Promise<void> {
    return this.flush();
  }

  drain(): Promise<void> {
    return this.flush();
  }
}

async function writeAll(handle: FileHandle, bytes: Uint8Array): Promise<void> {
  let done = 0;
  while (done < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, done, bytes.length - done);
    done += bytesWritten;
  }
}
