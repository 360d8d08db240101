/** Reads the parts of one table (the files of one export) one after another, as one table with one header. */
import { InputPartsError } from './input-parts.js';
import { openSource } from './source.js';
import {
  InputError,
  type InputRow,
  type OpenSourceOptions,
  type PartReading,
  type SourceProblemCounts,
  type TableSource,
} from './table.js';

/** A table read from several parts: the parts in reading order; each row says which part it came from. */
export interface PartsSource extends TableSource {
  readonly parts: readonly string[];
  /**
   * For each part read to its end so far (in `parts` order, empty parts too): the number of rows read from the
   * first part to the end of that part. Rows reach an output in reading order, so an output per part can tell
   * from these where one part's rows end.
   */
  partEnds(): readonly number[];
}

export function isPartsSource(source: object): source is PartsSource {
  return 'parts' in source && 'partEnds' in source;
}

/** One part of a run's input: where it is, and its format (as asked, else by its own name). */
export interface InputPart {
  path: string;
  format: PartReading['format'];
}

/** How the parts are read: everything but the path and format (a stream is for one input only: stdin). */
export type PartOptions = Omit<OpenSourceOptions, 'path' | 'format'>;

interface Part extends InputPart {
  /** Where the part is in the list of all parts (empty ones included). */
  index: number;
  /** JSON Lines: where each of the part's columns goes in the first part's header (absent: the same columns). */
  mapping?: number[];
  totalBytes: number | undefined;
}

/**
 * Opens the parts of one run. One path is opened as it is. With several, every part's header is read before any
 * row, so that a part that does not fit is said before anything is sent: CSV and Parquet parts must have the
 * first part's columns in the same order; a JSON Lines part may leave columns out (its objects' keys are placed
 * by name) but not bring one the first part lacks. An empty part (no header at all) is passed over. Rows keep
 * their own part's line numbers and carry the part's path in `file`; problems with a part name that part.
 */
export async function openParts(
  parts: readonly InputPart[],
  options: PartOptions,
  /** Under --shard: whether the part at this index is this runner's to read (every header is checked all the same). */
  share: (index: number) => boolean = () => true,
): Promise<TableSource> {
  if (parts.length === 0) throw new InputPartsError('no input given');
  if (parts.length === 1) return openSource({ ...options, ...parts[0] });
  if (options.stream !== undefined)
    throw new InputPartsError('a stream is one input: it cannot be read with other parts');
  const plan: Part[] = [];
  let first: TableSource | undefined;
  try {
    for (const [index, { path, format }] of parts.entries()) {
      const source = await openSource({ ...options, path, format });
      if (source.header.length === 0) {
        source.close?.();
        continue;
      }
      if (first === undefined) {
        first = source;
        plan.push({ path, format, index, totalBytes: source.totalBytes });
        continue;
      }
      source.close?.();
      const mapping = columnMapping(first, source, format === 'jsonl');
      plan.push({ path, format, index, totalBytes: source.totalBytes, ...(mapping !== undefined ? { mapping } : {}) });
    }
  } catch (err) {
    first?.close?.();
    throw err;
  }
  // every part is empty: the run reads an empty table
  if (first === undefined) return openSource({ ...options, ...parts[0] });
  return new PartsTable(
    parts.map((part) => part.path),
    plan,
    first,
    options,
    share,
  );
}

/** Where each column of `part` goes in `first`'s header; undefined when they are the same. Throws when they cannot agree. */
function columnMapping(first: TableSource, part: TableSource, byName: boolean): number[] | undefined {
  const want = first.header;
  const got = part.header;
  if (got.length === want.length && got.every((name, i) => name === want[i])) return undefined;
  const differs = (detail: string) =>
    new InputPartsError(
      `${part.name}: ${detail}; every part of one run must have the columns of the first part (${first.name}): ` +
        'export the parts alike, or read them in separate runs',
    );
  if (byName) {
    const index = new Map(want.map((name, i) => [name, i]));
    return got.map((name) => {
      const at = index.get(name);
      if (at === undefined) throw differs(`it has a key ${shown(name)} that the first part does not have`);
      return at;
    });
  }
  if (got.length !== want.length) throw differs(`it has ${got.length} columns where the first part has ${want.length}`);
  const i = got.findIndex((name, k) => name !== want[k]);
  throw differs(`its column ${i + 1} is ${shown(got[i])} where the first part has ${shown(want[i])}`);
}

/** A column name for a message: quoted, and cut short when long (a header line can hold anything). */
function shown(name: string): string {
  return `'${name.length > 60 ? `${name.slice(0, 57)}...` : name}'`;
}

class PartsTable implements PartsSource {
  readonly header: string[];
  readonly notes: string[];
  readonly name: string;
  readonly totalBytes: number | undefined;
  private readonly counts: SourceProblemCounts = { shortRows: 0, longRows: 0, extraKeys: 0 };
  private current: TableSource | undefined;
  /** Bytes of the parts read to their end. */
  private doneBytes = 0;
  private readonly ends: number[] = [];
  private rowsRead = 0;
  private iterated = false;

  constructor(
    readonly parts: readonly string[],
    private readonly plan: readonly Part[],
    private readonly first: TableSource,
    private readonly options: PartOptions,
    private readonly share: (index: number) => boolean,
  ) {
    this.header = first.header;
    this.notes = first.notes;
    this.name = `${parts[0]} and ${parts.length - 1} more part${parts.length === 2 ? '' : 's'}`;
    this.totalBytes = plan.every((p) => p.totalBytes !== undefined)
      ? plan.reduce((sum, p) => sum + (p.totalBytes ?? 0), 0)
      : undefined;
    // a Parquet input also says its columns' types (for the identifier column checks)
    const typed = first as TableSource & { columns?: unknown };
    if (typed.columns !== undefined) Object.assign(this, { columns: typed.columns });
  }

  bytesRead(): number {
    return this.doneBytes + (this.current?.bytesRead() ?? 0);
  }

  problems(): SourceProblemCounts {
    const now = this.current?.problems();
    if (now === undefined) return { ...this.counts };
    return {
      shortRows: this.counts.shortRows + now.shortRows,
      longRows: this.counts.longRows + now.longRows,
      extraKeys: this.counts.extraKeys + now.extraKeys,
      ...(this.counts.badRows !== undefined || now.badRows !== undefined
        ? { badRows: (this.counts.badRows ?? 0) + (now.badRows ?? 0) }
        : {}),
    };
  }

  close(): void {
    if (!this.iterated) this.first.close?.();
  }

  partEnds(): readonly number[] {
    return this.ends;
  }

  /** Parts before `index` not yet ended (empty ones, passed over) end where the rows read so far end. */
  private endPartsBefore(index: number): void {
    while (this.ends.length < index) this.ends.push(this.rowsRead);
  }

  rows(): AsyncIterable<InputRow[]> {
    if (this.iterated) throw new Error(`${this.name}: rows() can be iterated only once`);
    this.iterated = true;
    return this.chunks();
  }

  private async *chunks(): AsyncGenerator<InputRow[]> {
    for (let i = 0; i < this.plan.length; i++) {
      const part = this.plan[i];
      if (!this.share(part.index)) {
        // another runner's part: its header was checked, its rows are not read here
        if (i === 0) this.first.close?.();
        this.endPartsBefore(part.index + 1);
        this.doneBytes += part.totalBytes ?? 0;
        continue;
      }
      const source = i === 0 ? this.first : await this.reopen(part);
      this.current = source;
      this.endPartsBefore(part.index);
      const width = this.header.length;
      for await (const chunk of source.rows()) {
        for (const row of chunk) {
          row.file = part.path;
          if (part.mapping !== undefined) row.cells = placed(row.cells, part.mapping, width);
        }
        this.rowsRead += chunk.length;
        yield chunk;
      }
      this.endPartsBefore(part.index + 1);
      const p = source.problems();
      this.counts.shortRows += p.shortRows;
      this.counts.longRows += p.longRows;
      this.counts.extraKeys += p.extraKeys;
      if (p.badRows !== undefined) this.counts.badRows = (this.counts.badRows ?? 0) + p.badRows;
      this.doneBytes += part.totalBytes ?? source.bytesRead();
      this.current = undefined;
    }
    this.endPartsBefore(this.parts.length);
  }

  /** A part opened again to read its rows; its header was checked up front, and must not have changed since. */
  private async reopen(part: Part): Promise<TableSource> {
    const source = await openSource({ ...this.options, path: part.path, format: part.format });
    const same =
      part.mapping !== undefined ||
      (source.header.length === this.header.length && source.header.every((n, k) => n === this.header[k]));
    if (!same) {
      source.close?.();
      throw new InputError(part.path, undefined, 'its header changed while the run was reading the parts before it');
    }
    return source;
  }
}

function placed(cells: string[], mapping: readonly number[], width: number): string[] {
  const out = new Array<string>(width).fill('');
  for (let j = 0; j < mapping.length; j++) out[mapping[j]] = cells[j];
  return out;
}
