/** A state kept in a PostgreSQL schema, behind the StateBackend interface: every method one round trip or one transaction. */
import type { Writable } from 'node:stream';
import type postgres from 'postgres';
import type { DiiType } from '../../identity/index.js';
import {
  checkUpdate,
  type StateBackend,
  type StateKind,
  type StateLockScope,
  type StateRecord,
  type StateRun,
} from '../backend.js';
import { ChecksumError, checksumOf } from '../checksum.js';
import { StateDamagedError, StateFormatError, StateReadonlyError } from '../errors.js';
import { checkedMetaValue, metaSumOf } from '../meta-values.js';
import type { EntryTally } from '../types.js';
import { IDENTITY_META_KEYS, META_KEYS, STATUS_CODE, statusOfCode, TYPE_CODE, TYPE_OF_CODE } from '../schema.js';
import type {
  ChangeJournalRows,
  DueCursor,
  EntryStatus,
  DueDay,
  DueEntry,
  EntryUpdate,
  ExportedEntry,
  OptedOutRawUid,
  OptoutCandidate,
  OptoutCursor,
  PendingChange,
  StateMeta,
  StoredEntries,
} from '../types.js';
import { NEW_ENTRY_COLUMNS, copyRowsOf } from './copy-rows.js';
import { answered } from './entry-update.js';
import { keyOrder } from './key-order.js';
import {
  codeOf,
  connectionFault,
  StateConnectionError,
  StateShareCountError,
  StateShareLockedError,
} from './errors.js';
import { NULL_BYTES, readLookupLines } from './lookup-lines.js';
import { entrySumOf } from './schema.js';
import { HASH_BYTES, hashOfKey, RAW_UID_BYTES, sentOf, textOfSent } from './stored-bytes.js';

type Sql = postgres.Sql;
type Query = Pick<Sql, 'unsafe'>;
type Row = unknown[];

const DAY_S = 86_400;
const LAST_ID = Number.MAX_SAFE_INTEGER;
// keys per statement of a lookup, at most, and the sessions its statements are spread over (open.ts opens them)
const LOOKUP_PART = 1_024;
export const LOOKUP_SESSIONS = 2;
// the sessions map's commits run on at once (open.ts opens them): while one batch's commit waits for its WAL to
// reach the disk, another's rows are sent and inserted
export const COMMIT_SESSIONS = 3;
// the bytes of the key of an entry whose hash is canonical base64: its type's code, then the hash's bytes
const KEY_BYTES = 1 + HASH_BYTES;
// rows per page of a walk in id order (entries(), and what a copy asks for is the caller's)
const WALK_PAGE = 5_000;
// ids a statement of the due walk covers at most: however few entries are due, each statement stays short
export const DUE_RANGE = 100_000;
// a deadlock or serialization failure between concurrent committers: the transaction is run again
const RETRY_CODES = new Set(['40P01', '40001']);
const RETRIES = 5;
// rows of a COPY encoded at a time (about 80 kB)
const COPY_CHUNK_ROWS = 500;

/** The server refused a COPY of new entries (`refusal`): the batch is upserted instead. */
class CopyRefused extends Error {
  constructor(readonly refusal: unknown) {
    super('the server refused the COPY of new entries');
  }
}

/** A stored entry with its id and its checksum. */
interface StoredRecord {
  id: number;
  sum: number;
  rec: StateRecord;
  /** Where a commit read the row (its ctid), to write it there. */
  tid?: string;
}

/** A key of a batch being committed: its answers, in batch order, and the entry they make of it when it is new. */
interface Pending {
  type: DiiType;
  hash: string;
  made: StateRecord;
  updates: EntryUpdate[];
}

/** A key of a batch as an insert's RETURNING gives it back: the type's code and the hash as sent (sentOf). */
function sentKeyOf(f: Pending): string {
  return `${TYPE_CODE[f.type]}\u0000${sentOf(f.hash, HASH_BYTES)}`;
}

// the file's status codes read back: an unknown one is damage, not an error of the code
const STATUS_OF_CODE = new Map(Object.entries(STATUS_CODE).map(([status, code]) => [code, status as EntryStatus]));

function pageLimit(limit: number): number {
  return Number.isFinite(limit) ? Math.max(0, Math.floor(limit)) : 0;
}

/** A raw UID of valuesText. */
function rawUidOf(v: string): string | null {
  return v === NULL_BYTES ? null : textOfSent(v, RAW_UID_BYTES);
}

/**
 * The record of an entry read as valuesText (`v[o...]`, split at its commas) with its bucket id, whose key is
 * (type, hash), its checksum checked: ChecksumError naming the entry when it fails or the status is a code no build
 * writes.
 */
function recordOf(v: readonly string[], o: number, bucketId: string | null, type: DiiType, hash: string): StateRecord {
  const status = STATUS_OF_CODE.get(Number(v[o]));
  const rec: StateRecord = {
    type,
    hash,
    status: status ?? 'invalid',
    due: v[o + 1] === '1',
    u: rawUidOf(v[o + 8]),
    p: rawUidOf(v[o + 9]),
    r: num(v[o + 2]),
    bucketId,
    lastMappedS: num(v[o + 3]),
    lastOptoutCheckS: num(v[o + 4]),
    optedOutSinceMs: num(v[o + 5]),
  };
  if (status === undefined || entrySumOf(rec) !== Number(v[o + 6])) throw new ChecksumError(`entry ${v[o + 7]}`);
  return rec;
}

/** A number read back, or null (in valuesText, an empty text; the server spells NaN and the infinities as Number does). */
function num(v: unknown): number | null {
  return v === null || v === undefined || v === '' ? null : Number(v);
}

function utcDay(seconds: number): string {
  return new Date(seconds * 1000).toISOString().slice(0, 10);
}

// Arrays are sent as the text of array literals made here: the driver's own serializer escapes every element
// with regular expressions, and the base64 and numbers sent here have nothing to escape.

/** An array literal of texts with no quote or backslash (base64), or null. */
function plainTexts(values: readonly (string | null)[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    out += `${i === 0 ? '' : ','}${v === null ? 'NULL' : `"${v}"`}`;
  }
  return `${out}}`;
}

/** An array literal of any texts, or null. */
function texts(values: readonly (string | null)[]): string {
  return plainTexts(values.map((v) => (v === null ? null : v.replace(/[\\"]/g, '\\$&'))));
}

/** An array literal of numbers (NaN and the infinities as the server spells them), or null. */
function numbers(values: readonly (number | null)[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    out += `${i === 0 ? '' : ','}${v === null ? 'NULL' : String(v)}`;
  }
  return `${out}}`;
}

/**
 * The keys of hashes[from, to) as one bytea of KEY_BYTES each, with the hashes' characters as bytes (44 each, where
 * their checksums read them), or null when one is not the canonical base64 of a hash. All are decoded in one call:
 * each closing '=' read as 'A' makes 33 bytes a hash, its own then a zero where the next key's type goes (non-zero
 * for a hash whose last bits are not zero), and encoding them back finds any character no base64 holds.
 */
function keysOf(typeCode: number, hashes: readonly string[], from: number, to: number): [Buffer, Buffer] | null {
  for (let i = from; i < to; i++) if (hashes[i].length !== 44 || hashes[i].indexOf('=') !== 43) return null;
  const joined = hashes.slice(from, to).join('');
  const spelled = joined.replaceAll('=', 'A');
  const decoded = Buffer.from(spelled, 'base64');
  if (decoded.toString('base64') !== spelled) return null;
  const keys = Buffer.allocUnsafe(decoded.length);
  decoded.copy(keys, 1, 0, decoded.length - 1);
  for (let at = 0; at < keys.length; at += KEY_BYTES) {
    if (decoded[at + HASH_BYTES] !== 0) return null;
    keys[at] = typeCode;
  }
  return [keys, Buffer.from(joined, 'latin1')];
}

/** A raw UID as sent, or null. */
function sentRawUid(text: string | null): string | null {
  return text === null ? null : sentOf(text, RAW_UID_BYTES);
}

/**
 * The columns of records as the array literals an unnest of them takes, in the order of UNNEST_RECORDS, with their
 * sums; without the keys (type and hash) when `keys` is false (an update by id).
 */
function columnsOf(records: readonly StateRecord[], keys = true): string[] {
  const n = records.length;
  const cols: (string | number | null)[][] = Array.from({ length: 12 }, (_, c) => new Array(c < 2 && !keys ? 0 : n));
  for (let i = 0; i < n; i++) {
    const e = records[i];
    if (keys) {
      cols[0][i] = TYPE_CODE[e.type];
      cols[1][i] = sentOf(e.hash, HASH_BYTES);
    }
    cols[2][i] = STATUS_CODE[e.status];
    cols[3][i] = e.due ? 1 : 0;
    cols[4][i] = sentRawUid(e.u);
    cols[5][i] = sentRawUid(e.p);
    cols[6][i] = e.r;
    cols[7][i] = e.bucketId;
    cols[8][i] = e.lastMappedS;
    cols[9][i] = e.lastOptoutCheckS;
    cols[10][i] = e.optedOutSinceMs;
    cols[11][i] = entrySumOf(e);
  }
  return cols.map((col, c) =>
    c === 1 || c === 4 || c === 5
      ? plainTexts(col as (string | null)[])
      : c === 7
        ? texts(col as (string | null)[])
        : numbers(col as (number | null)[]),
  );
}

/** The key column of a type's code and a hash as sent (SQL expressions). */
const keyOfSent = (type: string, hash: string): string =>
  `set_byte('\\x00'::bytea, 0, ${type}) || decode(${hash}, 'base64')`;

const UNNEST_RECORDS =
  'unnest($1::int2[], $2::text[], $3::int2[], $4::int2[], $5::text[], $6::text[], $7::float8[], $8::text[], ' +
  '$9::float8[], $10::float8[], $11::float8[], $12::int4[]) ' +
  'AS v(type, hash, status, due, u, p, r, bucket_id, last_mapped, last_optout_check, opted_out_since, sum)';
// the same with the entries' ids last
const UNNEST_RECORDS_WITH_IDS = UNNEST_RECORDS.replace(') AS v(', ', $13::int8[], $14::int4[]) AS v(').replace(
  /sum\)$/,
  'sum, id, before)',
);
// an update's values: those of UNNEST_RECORDS as `v`
const SET_VALUES =
  "SET status = v.status, due = v.due <> 0, u = decode(v.u, 'base64'), p = decode(v.p, 'base64'), r = v.r, " +
  'bucket_id = v.bucket_id, last_mapped = v.last_mapped, last_optout_check = v.last_optout_check, ' +
  'opted_out_since = v.opted_out_since, sum = v.sum';
const SELECT_RECORDS =
  `SELECT ${keyOfSent('v.type', 'v.hash')}, v.status, v.due <> 0, decode(v.u, 'base64'), decode(v.p, 'base64'), ` +
  `v.r, v.bucket_id, v.last_mapped, v.last_optout_check, v.opted_out_since, v.sum FROM ${UNNEST_RECORDS}`;
// raw UIDs sent as $1, as the bytes they are stored as
const RAW_UIDS = "ARRAY(SELECT decode(x, 'base64') FROM unnest($1::text[]) AS x)";
// the values that may be null, never null as concat_ws gets them: a number as nothing, a raw UID as NULL_BYTES
const NUMBER_TEXTS = ['r', 'last_mapped', 'last_optout_check', 'opted_out_since'].map(
  (c) => `coalesce(${c}::text, '')`,
);
const RAW_UID_TEXTS = ['u', 'p'].map((c) => `coalesce(encode(${c}, 'base64'), '${NULL_BYTES}')`);
/**
 * An entry's values as one text in the order recordOf reads them (numbers and base64 hold no comma), `first` before
 * and `last` after, made by one concat_ws call: it leaves out an argument that is null, as `last` may be.
 */
const valuesText = (first = '', last = '') =>
  `concat_ws(',', ${first}status, due::int, ${NUMBER_TEXTS.join(', ')}, sum, id, ${RAW_UID_TEXTS.join(', ')}${last})`;
// what a lookup reads of an entry: its key's ordinal, the values, then its bucket id after a comma when it has
// one, its backslashes and line ends escaped (lookup-lines.ts reads it back), so that the entries a statement finds
// are one text of a line each: the driver reads one value a statement rather than a row an entry
const LOOKUP_VALUES = `${valuesText('k.i, ', ", replace(replace(bucket_id, '\\', '\\\\'), E'\\x01', '\\1')")} AS v`;
// what a commit reads of the entries it finds stored: the values, the bucket id (any text), and where the row is
const STORED_VALUES = `${valuesText()} AS v, bucket_id, ctid`;
// a whole entry row, as every walk reads it (rowOf): its id, key, values and bucket id
const ENTRY_COLUMNS = `id, key, ${valuesText()} AS v, bucket_id`;
// the key's hash index, an exclusion constraint (a hash index cannot be unique): ON CONFLICT names it, DO NOTHING only
const ON_KEY_CONFLICT = 'ON CONFLICT ON CONSTRAINT entries_key';

export interface PostgresStateParts {
  sql: Sql;
  /** The sessions lookups read on (lookupStored), apart from `sql`'s. */
  lookups: Sql;
  /** The sessions commits of batches without journal rows run on (commitBatch), apart from `sql`'s. */
  commits: Sql;
  schema: string;
  where: string;
  readonly: boolean;
}

export class PostgresState implements StateBackend {
  readonly kind: StateKind = 'postgres';
  readonly where: string;
  readonly readonly: boolean;
  private readonly sql: Sql;
  private readonly lookups: Sql;
  private readonly commits: Sql;
  private readonly s: string;
  private damagedCount = 0;
  private closed = false;
  /** The fault that ended the session: every later call fails with it (a re-run opens a new one and resumes). */
  private lost: StateConnectionError | undefined;
  /** Whether most keys of the last commit were new (a first map) rather than stored (a remap): the next is alike. */
  private mostlyNewLast = true;
  /** Whether every key of the last commit was new: the next is sent as a COPY (copyNew). */
  private allNewLast = true;
  // a lookup: the entry of each key, by its ordinal among the keys asked, one probe of the key's index per key
  private readonly lookupStatement: string;
  // the same, of keys sent as one bytea of KEY_BYTES each (every hash canonical base64)
  private readonly lookupKeysStatement: string;

  constructor(parts: PostgresStateParts) {
    this.sql = parts.sql;
    this.lookups = parts.lookups;
    this.commits = parts.commits;
    this.s = parts.schema;
    this.lookupStatement =
      "SELECT string_agg(e.v, E'\\x01') FROM unnest($2::text[]) WITH ORDINALITY AS k(hash, i) " +
      `CROSS JOIN LATERAL (${this.keyProbe(LOOKUP_VALUES, keyOfSent('$1::int4', 'k.hash'))}) e`;
    this.lookupKeysStatement =
      `SELECT string_agg(e.v, E'\\x01') FROM generate_series(1, length($1::bytea) / ${KEY_BYTES}) AS k(i) ` +
      `CROSS JOIN LATERAL (${this.keyProbe(LOOKUP_VALUES, `substr($1::bytea, k.i * ${KEY_BYTES} - ${HASH_BYTES}, ${KEY_BYTES})`)}) e`;
    this.where = parts.where;
    this.readonly = parts.readonly;
  }

  // ---- the connection: each call's faults as StateErrors

  /** The rows of a statement, each value as its text (or, `raw`, as the bytes the server sent). */
  private async q(text: string, params: unknown[] = [], on: Query = this.sql, raw = false): Promise<Row[]> {
    if (this.lost !== undefined) throw this.lost;
    try {
      const query = on.unsafe(text, params as never[], { prepare: true });
      return (await (raw ? query.raw() : query.values())) as unknown as Row[];
    } catch (err) {
      throw this.fault(err);
    }
  }

  /**
   * One transaction; a deadlock or serialization failure between concurrent writers runs it again. On a session
   * of its own, ended by hand: after a lost connection the server has rolled it back, and nothing more is sent.
   */
  private async tx<T>(fn: (t: Query) => Promise<T>, on: Sql = this.sql): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      if (this.lost !== undefined) throw this.lost;
      let conn: postgres.ReservedSql | undefined;
      try {
        conn = await on.reserve();
        await conn.unsafe('BEGIN');
        const out = await fn(conn);
        await conn.unsafe('COMMIT');
        return out;
      } catch (err) {
        const fault = this.fault(err);
        if (conn !== undefined && this.lost === undefined) await conn.unsafe('ROLLBACK').catch(() => {});
        if (attempt < RETRIES && RETRY_CODES.has(codeOf(err) ?? '')) continue;
        throw fault;
      } finally {
        conn?.release();
      }
    }
  }

  private fault(err: unknown): unknown {
    if (err instanceof ChecksumError) return new StateDamagedError(this.where, err.what);
    if (err instanceof StateConnectionError) return err;
    const fault = connectionFault(err, this.where, true);
    if (fault === undefined) return err;
    if (fault.exitCode === 1) this.lost = fault;
    return fault;
  }

  private writable(what: string): void {
    if (this.readonly) throw new StateReadonlyError(this.where, what);
  }

  /** A whole entry row as selected by ENTRY_COLUMNS, its checksum checked (ChecksumError when it fails). */
  private rowOf(row: Row): StoredRecord {
    const key = row[1] as Buffer;
    const type = TYPE_OF_CODE[key[0]];
    if (type === undefined) throw new ChecksumError(`entry ${row[0]}`);
    const v = (row[2] as string).split(',');
    return {
      id: Number(row[0]),
      sum: Number(v[6]),
      rec: recordOf(v, 0, row[3] as string | null, type, hashOfKey(key)),
    };
  }

  /**
   * The entry of one key, as a subquery that a LATERAL join runs once per key asked: LIMIT 1 (the key is unique)
   * keeps the planner from flattening it into a join whose plan depends on the table's statistics, which after a
   * bulk load are stale and make it scan a whole type (or the whole table) instead of probing the key's index.
   */
  private keyProbe(columns: string, key: string): string {
    return `SELECT ${columns} FROM ${this.s}.entries WHERE key = ${key} LIMIT 1`;
  }

  /** rowOf, or null (counted in damaged()) for a row that fails its checksum. */
  private rowOrSkip(row: Row): StoredRecord | null {
    try {
      return this.rowOf(row);
    } catch (err) {
      if (!(err instanceof ChecksumError)) throw err;
      this.damagedCount++;
      return null;
    }
  }

  // ---- metadata

  async meta(): Promise<StateMeta> {
    const values = new Map<string, string>();
    for (const [key, value, sum] of await this.q(`SELECT key, value, sum FROM ${this.s}.meta`)) {
      try {
        values.set(key as string, checkedMetaValue(key as string, [value, Number(sum)]) ?? '');
      } catch (err) {
        throw this.fault(err);
      }
    }
    const api = values.get(META_KEYS.api);
    return {
      schemaVersion: Number(values.get(META_KEYS.schemaVersion)),
      envFingerprint: values.get(META_KEYS.envFingerprint) ?? '',
      api: api === 'v2' ? 'v2' : 'v3',
      createdAt: values.get(META_KEYS.createdAt) ?? '',
    };
  }

  async getMeta(key: string): Promise<string | null> {
    const rows = await this.q(`SELECT value, sum FROM ${this.s}.meta WHERE key = $1`, [key]);
    try {
      return checkedMetaValue(key, rows.length === 0 ? undefined : [rows[0][0], Number(rows[0][1])]) ?? null;
    } catch (err) {
      throw this.fault(err);
    }
  }

  async setMeta(key: string, value: string): Promise<void> {
    this.writable(`set ${key}`);
    if (IDENTITY_META_KEYS.has(key))
      throw new StateFormatError(
        `state ${this.where}: '${key}' says what the state is and cannot be changed`,
        this.where,
      );
    if (key === META_KEYS.api && value !== 'v2' && value !== 'v3')
      throw new StateFormatError(`state ${this.where}: api must be v2 or v3, not '${value}'`, this.where);
    await this.putMeta(this.sql, key, value);
  }

  private async putMeta(on: Query, key: string, value: string): Promise<void> {
    await this.q(
      `INSERT INTO ${this.s}.meta (key, value, sum) VALUES ($1, $2, $3) ON CONFLICT (key) DO UPDATE SET value = excluded.value, sum = excluded.sum`,
      [key, value, metaSumOf(key, value)],
      on,
    );
  }

  // ---- lookups and commits

  async lookupStored(type: DiiType, hashes: readonly string[]): Promise<StoredEntries> {
    // per hash, the last position it is asked at (the file answers a hash asked twice there too)
    const position = new Map<string, number>();
    for (let i = 0; i < hashes.length; i++) position.set(hashes[i], i);
    const asked = [...position.keys()];
    const atOf = Int32Array.from(position.values());
    const n = asked.length;
    // in parts of one size sent at once, as many as the lookup sessions or a multiple (a few keys in one): the
    // server looks parts up on each session while this process reads the rows of others
    const size =
      n <= LOOKUP_PART / 2 ? n : Math.ceil(n / (LOOKUP_SESSIONS * Math.ceil(n / (LOOKUP_SESSIONS * LOOKUP_PART))));
    const [at, status, due, r] = [new Int32Array(n), new Uint8Array(n), new Uint8Array(n), new Float64Array(n)];
    const out = { at, status, due, r, u: [], p: [], bucketId: [] };
    const parts: Promise<void>[] = [];
    for (let from = 0; from < n; from += size) {
      const to = Math.min(n, from + size);
      const keys = keysOf(TYPE_CODE[type], asked, from, to);
      const ask =
        keys !== null
          ? this.q(this.lookupKeysStatement, [keys[0]], this.lookups, true)
          : this.q(
              this.lookupStatement,
              [TYPE_CODE[type], plainTexts(asked.slice(from, to).map((h) => sentOf(h, HASH_BYTES)))],
              this.lookups,
              true,
            );
      parts.push(
        ask.then((rows) => {
          const lines = rows[0]?.[0] as Buffer | null | undefined;
          if (lines === null || lines === undefined) return;
          try {
            readLookupLines(lines, keys?.[1] ?? null, type, hashes, atOf.subarray(from, to), out);
          } catch (err) {
            throw this.fault(err);
          }
        }),
      );
    }
    await Promise.all(parts);
    const found = out.u.length;
    return {
      ...out,
      at: at.slice(0, found),
      status: status.slice(0, found),
      due: due.slice(0, found),
      r: r.slice(0, found),
    };
  }

  /**
   * One transaction: the answers of each entry applied in batch order; the new entries inserted in key order, then
   * the ones already stored (or stored by another run meanwhile) updated from the values they had where those are
   * still stored, so that no answer is lost; concurrent committers of overlapping keys wait for each other (a
   * deadlock between them runs the batch again). After a batch of keys all new, the next is sent as a COPY of new
   * entries (copyNew): a key stored meanwhile makes the server refuse it, and the batch is upserted instead.
   */
  async commitBatch(updates: readonly EntryUpdate[], nowS: number, journal?: ChangeJournalRows): Promise<void> {
    this.writable('commit a batch');
    updates.forEach(checkUpdate);
    // each key's answers and the entry they make when new, in key order (the order every committer writes in):
    // every outcome's kind checked before the transaction, so that a malformed one fails the batch first
    const order = keyOrder(updates);
    const firsts: Pending[] = [];
    for (let k = 0; k < order.length; ) {
      const first = updates[order[k]];
      const group = [first];
      let made = answered(null, first, nowS);
      for (k++; k < order.length; k++) {
        const u = updates[order[k]];
        if (u.hash !== first.hash || u.type !== first.type) break;
        made = answered(made, u, nowS);
        group.push(u);
      }
      firsts.push({ type: first.type, hash: first.hash, made, updates: group });
    }
    if (firsts.length === 0 && journal === undefined) return;
    // batches without journal rows commit side by side on the commit sessions; those with rows one after another
    // on the first session, so that the journal's ids are committed in the order they are read back
    const on = journal === undefined ? this.commits : this.sql;
    if (this.allNewLast && firsts.length > 0) {
      const made = firsts.map((f) => f.made);
      const copied = await this.tx(async (t) => {
        await this.copyNew(t, made);
        if (journal !== undefined) await this.insertJournal(t, journal, nowS);
        return true;
      }, on).catch((err: unknown) => {
        if (err instanceof CopyRefused) return false;
        throw err;
      });
      if (copied) return;
    }
    await this.upsertBatch(firsts, nowS, on, journal);
  }

  /**
   * The new entries in one binary COPY, sent in chunks so that the server inserts the first rows while the next
   * are encoded. CopyRefused when the server refused a row (a key stored meanwhile, or a deadlock with another
   * committer): the transaction is aborted then, to be rolled back and the batch upserted.
   */
  private async copyNew(t: Query, records: readonly StateRecord[]): Promise<void> {
    if (this.lost !== undefined) throw this.lost;
    const refused = (err: unknown): CopyRefused | unknown =>
      // a lost connection is the run's fault, not the batch's
      connectionFault(err, this.where, true) === undefined ? new CopyRefused(err) : err;
    let stream: Writable;
    try {
      stream = (await t
        .unsafe(`COPY ${this.s}.entries (${NEW_ENTRY_COLUMNS}) FROM STDIN (FORMAT binary)`)
        .writable()) as unknown as Writable;
    } catch (err) {
      throw refused(err);
    }
    let failed: unknown;
    stream.on('error', (err) => {
      failed ??= err;
    });
    for (let from = 0; from < records.length && failed === undefined; from += COPY_CHUNK_ROWS) {
      const to = Math.min(records.length, from + COPY_CHUNK_ROWS);
      const chunk = copyRowsOf(records, from, to, from === 0, to === records.length);
      // handed to the socket before the next chunk is encoded
      await new Promise<void>((resolve) => stream.write(chunk, () => resolve()));
    }
    if (failed !== undefined) throw refused(failed);
    // with no write pending, the end is sent now, and the driver takes statements again
    stream.end();
    // the driver reports a refusal that comes after the rows' end to no one: a statement behind the COPY fails
    // then, in the transaction the refusal aborted
    try {
      await t.unsafe('SELECT 1');
    } catch (err) {
      throw refused(failed ?? err);
    }
    if (failed !== undefined) throw refused(failed);
  }

  /** commitBatch's transaction of upserts: the stored entries read, the new inserted, both in key order. */
  private async upsertBatch(
    batch: readonly Pending[],
    nowS: number,
    on: Sql,
    journal?: ChangeJournalRows,
  ): Promise<void> {
    await this.tx(async (t) => {
      let pending = batch;
      let insertedAll = 0;
      for (let pass = 0; pending.length > 0; pass++) {
        // the stored ones read first, so that a batch of remaps sends no insert that would only conflict; but
        // not on the first pass after a batch of mostly new keys (a first map), whose inserts the index refuses
        // for the few stored ones, read on the next pass
        const stored = pass === 0 && this.mostlyNewLast ? [] : await this.storedByKey(t, pending);
        // the new entries, as their answers make them: one statement for a batch of new keys
        const made: StateRecord[] = [];
        for (let i = 0; i < pending.length; i++) if (stored[i] === undefined) made.push(pending[i].made);
        // the count inserted, and which keys only when some were refused: a batch of new keys sends none back
        const inserted = new Set<string>();
        let insertedEvery = false;
        if (made.length > 0) {
          for (const [count, type, hash] of await this.q(
            `WITH ins AS (INSERT INTO ${this.s}.entries (${NEW_ENTRY_COLUMNS}) ${SELECT_RECORDS} ${ON_KEY_CONFLICT} ` +
              'DO NOTHING RETURNING key), n AS (SELECT count(*) AS n FROM ins) SELECT n, NULL, NULL FROM n UNION ALL ' +
              "SELECT NULL, get_byte(key, 0), encode(substr(key, 2), 'base64') FROM ins, n WHERE n < $13::int8",
            [...columnsOf(made), made.length],
            t,
          )) {
            if (count !== null) {
              insertedAll += Number(count);
              insertedEvery = Number(count) === made.length;
            } else {
              inserted.add(`${type}\u0000${(hash as string).replace(/\n/g, '')}`);
            }
          }
        }
        // the stored ones: each answer applied to the values read, written only where they are still those (a
        // row another run changed since is read and answered again), so no row is locked twice
        const changed: StoredRecord[] = [];
        for (let i = 0; i < pending.length; i++) {
          const old = stored[i];
          if (old === undefined) continue;
          const f = pending[i];
          let rec = old.rec;
          for (const u of f.updates) rec = answered(rec, u, nowS);
          changed.push({ id: old.id, sum: old.sum, rec, tid: old.tid });
        }
        const written = changed.length > 0 ? await this.updateRecords(t, changed, true) : () => false;
        // a key another run inserted but had not committed when ours was refused, or changed since it was read
        pending = pending.filter((f, i) => {
          const old = stored[i];
          return old === undefined ? !(insertedEvery || inserted.has(sentKeyOf(f))) : !written(old.id);
        });
      }
      this.mostlyNewLast = insertedAll * 2 >= batch.length;
      this.allNewLast = insertedAll === batch.length;
      if (journal !== undefined) await this.insertJournal(t, journal, nowS);
    }, on);
  }

  /** The stored entries of these keys, each at its key's position (none where a key is not stored). */
  private async storedByKey(t: Query, keys: readonly Pending[]): Promise<(StoredRecord | undefined)[]> {
    // each row says which key it is by its ordinal: no key is sent back or decoded
    const rows = await this.q(
      `SELECT k.i, e.v, e.bucket_id, e.ctid FROM unnest($1::int2[], $2::text[]) WITH ORDINALITY AS k(type, hash, i) ` +
        `CROSS JOIN LATERAL (${this.keyProbe(STORED_VALUES, keyOfSent('k.type', 'k.hash'))}) e`,
      [numbers(keys.map((k) => TYPE_CODE[k.type])), plainTexts(keys.map((k) => sentOf(k.hash, HASH_BYTES)))],
      t,
    );
    const out = new Array<StoredRecord | undefined>(keys.length);
    for (const row of rows) {
      const at = Number(row[0]) - 1;
      const f = keys[at];
      const v = (row[1] as string).split(',');
      const rec = recordOf(v, 0, row[2] as string | null, f.type, f.hash);
      out[at] = { id: Number(v[7]), sum: Number(v[6]), rec, tid: row[3] as string };
    }
    return out;
  }

  /**
   * Writes these entries' values over the stored ones, by id; with `unchanged`, only over rows that still hold
   * the values each was read with (their checksums, `sum`), found where they were read (`tid`). Whether an id was
   * written: the ids come back only when some were not, so a batch that wrote every row reads back one count.
   */
  private async updateRecords(
    t: Query,
    records: readonly StoredRecord[],
    unchanged = false,
  ): Promise<(id: number) => boolean> {
    const values = records.map((r) => r.rec);
    const params: unknown[] = [...columnsOf(values, false), numbers(records.map((r) => r.id))];
    params.push(numbers(records.map((r) => r.sum)));
    // the rows by where they were read, with no index probe: a row another run has changed since has moved (or
    // holds other values), is not written and is read again; else id = ANY besides the join, so that the pkey is
    // probed for just these rows, whatever the statistics say of the table
    if (unchanged) params.push(plainTexts(records.map((r) => r.tid ?? null)));
    const which = unchanged
      ? 'e.ctid = ANY($15::tid[]) AND e.id = v.id AND e.sum = v.before'
      : 'e.id = ANY($13::int8[]) AND e.id = v.id';
    params.push(records.length);
    const rows = await this.q(
      `WITH upd AS (UPDATE ${this.s}.entries e ${SET_VALUES} FROM ${UNNEST_RECORDS_WITH_IDS} WHERE ${which} ` +
        'RETURNING e.id), n AS (SELECT count(*) AS n FROM upd) ' +
        `SELECT n, NULL FROM n UNION ALL SELECT NULL, id FROM upd, n WHERE n < $${params.length}::int8`,
      params,
      t,
    );
    const ids = new Set<number>();
    let every = false;
    for (const [count, id] of rows) {
      if (count !== null) every = Number(count) === records.length;
      else ids.add(Number(id));
    }
    return (id) => every || ids.has(id);
  }

  // ---- the change journal

  private async insertJournal(t: Query, journal: ChangeJournalRows, nowS: number): Promise<void> {
    if (journal.rows.length === 0) return;
    await this.q(
      `INSERT INTO ${this.s}.pending_changes (run_id, kind, row, sum, created_at) ` +
        'SELECT $1, $2, v.row, v.sum, $3 FROM unnest($4::text[], $5::int8[]) AS v(row, sum)',
      [journal.runId, journal.channel, Math.floor(nowS), journal.rows, journal.rows.map((r) => checksumOf(r))],
      t,
    );
  }

  async pendingChanges(channel: string, afterId = 0, limit = 5_000): Promise<PendingChange[]> {
    const n = pageLimit(limit);
    if (n === 0) return [];
    const rows = await this.q(
      `SELECT id, row, sum FROM ${this.s}.pending_changes WHERE kind = $1 AND id > $2 ORDER BY id LIMIT $3`,
      [channel, afterId, n],
    );
    return rows.map(([id, row, sum]) => {
      if (Number(sum) !== checksumOf(row as string)) throw this.fault(new ChecksumError('a pending change row'));
      return { id: Number(id), row: row as string };
    });
  }

  async lastPendingChangeId(channel: string): Promise<number | null> {
    return num((await this.q(`SELECT max(id) FROM ${this.s}.pending_changes WHERE kind = $1`, [channel]))[0][0]);
  }

  async ackChanges(channel: string, upToId: number): Promise<number> {
    this.writable('acknowledge delivered changes');
    const rows = await this.q(
      `WITH d AS (DELETE FROM ${this.s}.pending_changes WHERE kind = $1 AND id <= $2 RETURNING 1) SELECT count(*) FROM d`,
      [channel, upToId],
    );
    return Number(rows[0][0]);
  }

  async pendingChangeCounts(): Promise<Record<string, number>> {
    const rows = await this.q(`SELECT kind, count(*) FROM ${this.s}.pending_changes GROUP BY kind`);
    return Object.fromEntries(rows.map(([channel, count]) => [channel as string, Number(count)]));
  }

  // ---- due by refresh time: no index holds r (an update that moves r stays heap-only), so each is one pass

  async countDue(nowS: number): Promise<number> {
    return (await this.dueByDay(nowS, 1))[0].count;
  }

  async dueByDay(nowS: number, days: number): Promise<DueDay[]> {
    const now = Math.floor(nowS);
    const n = Math.max(0, Math.floor(days));
    if (n === 0) return [];
    const counts = new Array<number>(n).fill(0);
    const rows = await this.q(
      `SELECT CASE WHEN r <= $1 THEN 0 ELSE ceil((r - $1) / ${DAY_S}) END AS day, count(*) FROM ${this.s}.entries ` +
        `WHERE r IS NOT NULL AND r <= $2 GROUP BY 1`,
      [now, now + (n - 1) * DAY_S],
    );
    for (const [day, count] of rows) counts[Number(day)] += Number(count);
    return counts.map((count, i) => ({ day: utcDay(now + i * DAY_S), count }));
  }

  /**
   * Due entries (r <= nowS) after `after` in id order, at most `limit` (fewer only at the end): a walk of the primary
   * key, range by range of ids, so that a run reads the table once whatever share of it is due.
   */
  async selectDue(nowS: number, after: DueCursor | null, limit: number): Promise<DueEntry[]> {
    const n = pageLimit(limit);
    if (n === 0) return [];
    const due: DueEntry[] = [];
    const last = Number((await this.q(`SELECT coalesce(max(id), 0) FROM ${this.s}.entries`))[0][0]);
    for (let from = after?.id ?? 0; due.length < n && from < last; from += DUE_RANGE) {
      const rows = await this.q(
        `SELECT ${ENTRY_COLUMNS} FROM ${this.s}.entries WHERE id > $1 AND id <= $2 AND r <= $3 ORDER BY id LIMIT $4`,
        [from, Math.min(from + DUE_RANGE, last), Math.floor(nowS), n - due.length],
      );
      for (const row of rows) {
        const { id, rec } = this.checked(row);
        due.push({ id, type: rec.type, hash: rec.hash, u: rec.u, p: rec.p, r: rec.r, bucketId: rec.bucketId });
      }
    }
    return due;
  }

  /** The day of the earliest r after `afterS` (null when none): one pass, for a run that finds nothing due soon. */
  async firstDueDay(afterS: number): Promise<number | null> {
    const r = num((await this.q(`SELECT min(r) FROM ${this.s}.entries WHERE r > $1`, [afterS]))[0][0]);
    return r === null ? null : Math.floor(r / DAY_S) * DAY_S;
  }

  private checked(row: Row): StoredRecord {
    try {
      return this.rowOf(row);
    } catch (err) {
      throw this.fault(err);
    }
  }

  // ---- the opt-out sweep

  async selectForOptoutCheck(limit: number, after: OptoutCursor | null, upTo = LAST_ID): Promise<OptoutCandidate[]> {
    const n = pageLimit(limit);
    if (n === 0) return [];
    const rows = await this.q(
      `SELECT ${ENTRY_COLUMNS} FROM ${this.s}.entries WHERE id > $1 AND id <= $2 ` +
        'AND (u IS NOT NULL OR p IS NOT NULL) ORDER BY id LIMIT $3',
      [after?.id ?? 0, upTo, n],
    );
    return rows.map((row) => {
      const { id, rec } = this.checked(row);
      return { id, type: rec.type, hash: rec.hash, u: rec.u, p: rec.p, lastOptoutCheckS: rec.lastOptoutCheckS };
    });
  }

  async sweepCursor(): Promise<OptoutCursor> {
    const id = Number((await this.getMeta(META_KEYS.sweepAfter)) ?? 0);
    return { id: Number.isSafeInteger(id) && id > 0 ? id : 0 };
  }

  async countWithRawUid(): Promise<number> {
    const rows = await this.q(`SELECT count(*) FROM ${this.s}.entries WHERE u IS NOT NULL OR p IS NOT NULL`);
    return Number(rows[0][0]);
  }

  async recordOptoutChecks(ids: readonly number[], nowS: number, cursor?: OptoutCursor): Promise<void> {
    this.writable('record opt-out checks');
    if (ids.length === 0 && cursor === undefined) return;
    const now = Math.floor(nowS);
    await this.tx(async (t) => {
      const stored = await this.lockedById(t, ids);
      if (stored.length > 0) {
        const checked = stored.map((s) => ({ ...s, rec: { ...s.rec, lastOptoutCheckS: now } }));
        await this.updateRecords(t, checked);
      }
      if (cursor !== undefined) await this.putMeta(t, META_KEYS.sweepAfter, String(cursor.id));
    });
  }

  /** The entries of these ids, locked for update in id order. */
  private async lockedById(t: Query, ids: readonly number[]): Promise<StoredRecord[]> {
    if (ids.length === 0) return [];
    const rows = await this.q(
      `SELECT ${ENTRY_COLUMNS} FROM ${this.s}.entries WHERE id = ANY($1::int8[]) ORDER BY id FOR UPDATE`,
      [[...ids]],
      t,
    );
    return rows.map((row) => this.rowOf(row));
  }

  async tombstoneByRawUid(
    optedOut: readonly OptedOutRawUid[],
    nowS: number,
    within?: readonly number[],
    journal?: ChangeJournalRows,
  ): Promise<number> {
    this.writable('tombstone opted-out entries');
    if (optedOut.length === 0) return 0;
    const now = Math.floor(nowS);
    // per opted-out raw UID, when it opted out (the last one given for a raw UID listed twice)
    const since = new Map<string, number>();
    for (const o of optedOut) since.set(o.rawUid, o.optedOutSinceMs);
    return this.tx(async (t) => {
      // the ids whose raw UIDs were sent, or the entries holding one of the raw UIDs
      const stored =
        within !== undefined
          ? await this.lockedById(t, within)
          : (
              await this.q(
                `SELECT ${ENTRY_COLUMNS} FROM ${this.s}.entries WHERE u = ANY(${RAW_UIDS}) OR p = ANY(${RAW_UIDS}) ` +
                  'ORDER BY id FOR UPDATE',
                [plainTexts([...since.keys()].map((u) => sentOf(u, RAW_UID_BYTES)))],
                t,
              )
            ).map((row) => this.rowOf(row));
      const changed: StoredRecord[] = [];
      for (const s of stored) {
        const rec = s.rec;
        const sinceMs =
          (rec.u !== null ? since.get(rec.u) : undefined) ?? (rec.p !== null ? since.get(rec.p) : undefined);
        if (sinceMs === undefined) continue;
        changed.push({
          ...s,
          rec: {
            ...rec,
            status: 'optout',
            u: null,
            p: null,
            r: null,
            bucketId: null,
            due: false,
            optedOutSinceMs: Number.isFinite(sinceMs) ? sinceMs : null,
            lastOptoutCheckS: now,
          },
        });
      }
      if (changed.length > 0) await this.updateRecords(t, changed);
      if (journal !== undefined) await this.insertJournal(t, journal, now);
      return changed.length;
    });
  }

  // ---- runs

  async startRun(command: string, argsJson: string, nowS: number): Promise<number> {
    this.writable('record a run');
    const rows = await this.q(
      `INSERT INTO ${this.s}.runs (command, args, pid, started_at, now) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
      [command, argsJson, process.pid, Math.floor(Date.now() / 1000), Math.floor(nowS)],
    );
    return Number(rows[0][0]);
  }

  async finishRun(id: number, summaryJson: string, exitCode: number, nowS: number): Promise<void> {
    this.writable('record a run');
    await this.q(`UPDATE ${this.s}.runs SET finished_at = $1, summary = $2, exit_code = $3 WHERE id = $4`, [
      Math.floor(nowS),
      summaryJson,
      exitCode,
      id,
    ]);
  }

  async lastRun(): Promise<StateRun | null> {
    const rows = await this.q(
      `SELECT command, started_at, now, finished_at, exit_code FROM ${this.s}.runs ORDER BY id DESC LIMIT 1`,
    );
    if (rows.length === 0) return null;
    const [command, startedAtS, nowS, finishedAtS, exitCode] = rows[0];
    return {
      command: command as string,
      startedAtS: Number(startedAtS),
      nowS: Number(nowS),
      finishedAtS: num(finishedAtS),
      exitCode: num(exitCode),
    };
  }

  // ---- locks

  /**
   * map: nothing (its commits are upserts). A sweep: session advisory locks of (schema, command), held until close:
   * a whole sweep holds it alone; a shard holds it shared, its share count shared and its share's alone, so shards
   * of one N go side by side and a shard of another N (whose share would overlap theirs) is refused.
   */
  async lock(scope: StateLockScope): Promise<void> {
    if (scope.kind === 'map') return;
    const key = (on: string): number => checksumOf(`${scope.command}\u0000${on}`) | 0;
    const space = checksumOf(`uid2-batch\u0000${this.s}`) | 0;
    const take = async (fn: string, on: string): Promise<boolean> =>
      (await this.q(`SELECT pg_${fn}($1::int4, $2::int4)`, [space, key(on)]))[0][0] === true;
    const refused = (doing: string) => new StateShareLockedError(this.where, `${scope.command} (${doing})`);
    if (scope.shard === undefined) {
      if (await take('try_advisory_lock', 'all')) return;
      throw refused((await take('try_advisory_xact_lock_shared', 'all')) ? 'its shards' : 'shard all');
    }
    const { count } = scope.shard;
    const share = `${scope.shard.index - 1}/${count}`;
    if (!(await take('try_advisory_lock_shared', 'all'))) throw refused('shard all');
    // the share counts held, keyed by the count itself in a space of the command's own
    const counts = checksumOf(`uid2-batch\u0000${this.s}\u0000${scope.command}\u0000share counts`) | 0;
    const heldCount = await this.takeShareCount(counts, key('share counts'), space, count);
    if (heldCount !== null) {
      await take('advisory_unlock_shared', 'all');
      throw new StateShareCountError(this.where, scope.command, count, heldCount);
    }
    if (await take('try_advisory_lock', share)) return;
    await this.q('SELECT pg_advisory_unlock_shared($1::int4, $2::int4)', [counts, count]);
    await take('advisory_unlock_shared', 'all');
    throw refused(`shard ${share}`);
  }

  /**
   * Takes the lock of share count `count` shared unless another session holds another count's; returns that count
   * then (null when taken). The look and the take are one step under a short lock (`gate` in `space`), so two
   * shards of different counts starting at once never both go.
   */
  private async takeShareCount(counts: number, gate: number, space: number, count: number): Promise<number | null> {
    return this.tx(async (t) => {
      await this.q('SELECT pg_advisory_xact_lock($1::int4, $2::int4)', [space, gate], t);
      const held = await this.q(
        "SELECT objid::int8 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 " +
          'AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) ' +
          'AND classid = $1::int4::oid AND objid <> $2::int4::oid AND pid <> pg_backend_pid() LIMIT 1',
        [counts, count],
        t,
      );
      if (held.length > 0) return Number(held[0][0]);
      await this.q('SELECT pg_advisory_lock_shared($1::int4, $2::int4)', [counts, count], t);
      return null;
    });
  }

  // ---- walks: exports, tallies, copies

  async *entries(): AsyncIterable<ExportedEntry> {
    let after = 0;
    for (;;) {
      const rows = await this.rowsAfter(after, WALK_PAGE);
      if (rows.length === 0) return;
      after = Number(rows[rows.length - 1][0]);
      for (const row of rows) {
        const s = this.rowOrSkip(row);
        if (s === null) continue;
        const { type, hash, status, u, p, r } = s.rec;
        yield { type, hash, status, u, p, r };
      }
    }
  }

  /** Up to `n` whole entry rows in id order after the id `after`. */
  private rowsAfter(after: number, n: number): Promise<Row[]> {
    return this.q(`SELECT ${ENTRY_COLUMNS} FROM ${this.s}.entries WHERE id > $1 ORDER BY id LIMIT $2`, [after, n]);
  }

  damaged(): number {
    return this.damagedCount;
  }

  /** One pass: the counts by status, and per bound those with r at most it (no index holds r). */
  async tally(bounds: readonly number[]): Promise<EntryTally> {
    const byStatus: EntryTally['byStatus'] = { mapped: 0, optout: 0, invalid: 0 };
    let withoutR = 0;
    const atMost = bounds.map(() => 0);
    const perBound = bounds.map((_, i) => `, count(*) FILTER (WHERE r <= $${i + 1}::float8)`).join('');
    for (const [status, count, noR, ...under] of await this.q(
      `SELECT status, count(*), count(*) FILTER (WHERE r IS NULL)${perBound} FROM ${this.s}.entries GROUP BY status`,
      [...bounds],
    )) {
      byStatus[statusOfCode(status as number)] += Number(count);
      withoutR += Number(noR);
      for (let i = 0; i < under.length; i++) atMost[i] += Number(under[i]);
    }
    return { byStatus, withoutR, atMost };
  }

  async readRecords(after: number, limit: number): Promise<{ records: StateRecord[]; last: number }> {
    const n = pageLimit(limit);
    if (n === 0) return { records: [], last: after };
    const rows = await this.rowsAfter(after, n);
    const records = rows.map((row) => this.checked(row).rec);
    return { records, last: rows.length === 0 ? after : Number(rows[rows.length - 1][0]) };
  }

  async writeRecords(records: readonly StateRecord[]): Promise<void> {
    this.writable('write records');
    if (records.length === 0) return;
    // the stored written over by key, then the rest inserted (ON_KEY_CONFLICT takes no DO UPDATE): a key another
    // run stores in between keeps its values, as if this write had come first
    const columns = columnsOf(records);
    await this.tx(async (t) => {
      const key = keyOfSent('v.type', 'v.hash');
      await this.q(`UPDATE ${this.s}.entries e ${SET_VALUES} FROM ${UNNEST_RECORDS} WHERE e.key = ${key}`, columns, t);
      const insert = `INSERT INTO ${this.s}.entries (${NEW_ENTRY_COLUMNS}) ${SELECT_RECORDS} ${ON_KEY_CONFLICT}`;
      await this.q(`${insert} DO NOTHING`, columns, t);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // ending the session releases its advisory locks
    const timeout = this.lost === undefined ? 5 : 0;
    await Promise.all([this.sql.end({ timeout }), this.lookups.end({ timeout }), this.commits.end({ timeout })]);
  }
}
