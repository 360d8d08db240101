/** A batch of answers written inside the commit's transaction: an update per stored entry, an append per new one. */
import type { Database } from 'better-sqlite3';
import { checkUpdate } from './backend.js';
import type { DueLists } from './due-lists.js';
import { type EntryValues, EntryView, RecordWriter, storedOf } from './entry-record.js';
import type { KeyIndex } from './key-index.js';
import { keyOf } from './lookup-key.js';
import { prepared, SQL } from './queries.js';
import { STATUS_CODE, TYPE_CODE } from './schema.js';
import type { CopiedEntry, EntryUpdate } from './types.js';

const INSERT_ROWS = 64;

/** One answer of a batch as the file keeps it (entry-record.ts storedOf), with its lookup key and place in the batch. */
export interface EncodedUpdate {
  type: number;
  hash: string;
  stored: Buffer | string;
  storedU: Buffer | string | null;
  storedP: Buffer | string | null;
  key: number;
  index: number;
  /** r (after every r when there is none): a day's due list piece is then mostly consecutive ids. */
  appendOrder: number;
  outcome: (EntryUpdate | CopiedEntry)['outcome'];
}

/** Checked before the transaction, so that a malformed update fails the batch first. */
export function encodeUpdates(updates: readonly (EntryUpdate | CopiedEntry)[]): EncodedUpdate[] {
  const encoded = new Array<EncodedUpdate>(updates.length);
  for (let i = 0; i < updates.length; i++) {
    checkUpdate(updates[i], i);
    const { type, hash, outcome } = updates[i];
    const code = TYPE_CODE[type];
    // a copied entry keeps its place: a copy's export lists the entries in the order of its source
    const appendOrder =
      outcome.kind === 'record' ? i : outcome.kind === 'mapped' && typeof outcome.r === 'number' ? outcome.r : Infinity;
    const mapped = outcome.kind === 'mapped' || outcome.kind === 'record';
    encoded[i] = {
      type: code,
      hash,
      stored: storedOf(hash),
      storedU: mapped && typeof outcome.u === 'string' ? storedOf(outcome.u) : null,
      storedP: mapped && typeof outcome.p === 'string' ? storedOf(outcome.p) : null,
      key: keyOf(code, hash),
      index: i,
      appendOrder,
      outcome,
    };
  }
  return encoded;
}

/** Per lookup key, its last request; per request, the one before it with the same key (-1: none). */
export function requestsByKey(lookupKeys: readonly number[]): { lastWith: Map<number, number>; before: Int32Array } {
  const lastWith = new Map<number, number>();
  const before = new Int32Array(lookupKeys.length);
  for (let i = 0; i < lookupKeys.length; i++) {
    before[i] = lastWith.get(lookupKeys[i]) ?? -1;
    lastWith.set(lookupKeys[i], i);
  }
  return { lastWith, before };
}

export class BatchWriter {
  constructor(
    private readonly db: Database,
    private readonly path: string,
    private readonly keys: KeyIndex,
    private readonly due: DueLists,
    /** Gives each stored entry of these keys with the request it answers (store.ts forEachStored). */
    private readonly matchRows: (
      lookupKeys: readonly number[],
      hashOf: (request: number) => string,
      onMatch: (request: number, id: number, e: EntryView) => void,
    ) => void,
  ) {}

  write(updates: readonly EncodedUpdate[], nowS: number): void {
    this.keys.catchUp();
    const n = updates.length;
    // per update, the first one of the batch with its type and hash, found among the updates of its lookup key
    const { before } = requestsByKey(updates.map((u) => u.key));
    const firstOf = new Int32Array(n);
    const uniqueKeys: number[] = [];
    const uniqueAt: number[] = [];
    for (let i = 0; i < n; i++) {
      let same = before[i];
      while (same >= 0 && updates[same].hash !== updates[i].hash) same = before[same];
      firstOf[i] = same >= 0 ? firstOf[same] : i;
      if (same >= 0) continue;
      uniqueKeys.push(updates[i].key);
      uniqueAt.push(i);
    }
    // per first update, the id of its entry (0 until known), and per id the entry's values
    const idOf = new Float64Array(n);
    const valuesOf = new Map<number, EntryValues>();
    this.matchRows(
      uniqueKeys,
      (j) => updates[uniqueAt[j]].hash,
      (j, id, e) => {
        idOf[uniqueAt[j]] = id;
        valuesOf.set(id, e.values());
      },
    );
    const writer = new RecordWriter(n * 80);
    const update = (id: number, u: EncodedUpdate): void => {
      const old = valuesOf.get(id);
      if (old === undefined) throw new Error(`state file ${this.path}: entry ${id} was not read before its update`);
      const values = updatedValues(old, u, nowS);
      prepared(this.db, SQL.updateRecord).run(writer.write(values), id);
      valuesOf.set(id, values);
    };
    // a hash the batch names again is appended once; its later answers update it afterwards, in batch order
    const appended: EncodedUpdate[] = [];
    const again: number[] = [];
    for (let i = 0; i < n; i++) {
      const first = firstOf[i];
      if (idOf[first] > 0) update(idOf[first], updates[i]);
      else if (first === i) appended.push(updates[i]);
      else again.push(i);
    }
    this.appendEntries(appended, writer, nowS, (u, id, values) => {
      idOf[u.index] = id;
      valuesOf.set(id, values);
    });
    for (const i of again) update(idOf[firstOf[i]], updates[i]);
    this.due.append(updates, (i) => idOf[firstOf[i]]);
  }

  /**
   * Appends entries not stored yet, in r order, INSERT_ROWS to a statement. A statement of n rows that ends at id
   * `last` gave them last - n + 1 to last (the largest id plus one each), checked against the ids before it.
   */
  private appendEntries(
    appended: EncodedUpdate[],
    writer: RecordWriter,
    nowS: number,
    onAppended: (u: EncodedUpdate, id: number, values: EntryValues) => void,
  ): void {
    // two entries without r (Infinity) compare as NaN, which sort takes as equal
    appended.sort((a, b) => a.appendOrder - b.appendOrder);
    const params: Buffer[] = [];
    const values: EntryValues[] = [];
    for (let start = 0; start < appended.length; start += INSERT_ROWS) {
      const end = Math.min(appended.length, start + INSERT_ROWS);
      params.length = 0;
      values.length = 0;
      for (let i = start; i < end; i++) {
        values.push(
          updatedValues({ ...NEW_ENTRY, type: appended[i].type, hash: appended[i].stored }, appended[i], nowS),
        );
        params.push(writer.write(values[values.length - 1]));
      }
      const insert = prepared(this.db, SQL.insertEntries(end - start));
      const last = Number(insert.run(params).lastInsertRowid);
      if (last !== this.keys.seen + (end - start)) {
        throw new Error(
          `state file ${this.path}: appended entries did not get consecutive ids after ${this.keys.seen}`,
        );
      }
      for (let i = start; i < end; i++) {
        const newId = last - (end - 1 - i);
        onAppended(appended[i], newId, values[i - start]);
        this.keys.add(appended[i].key, newId);
      }
    }
  }
}

/** What an opted-out entry becomes (status 2): it keeps its hash and times, and loses every raw UID. */
export const TOMBSTONE = { status: 2, u: null, p: null, r: null, bucketId: null, due: false } as const;

export function timeOrNull(t: unknown): number | null {
  return typeof t === 'number' && Number.isFinite(t) ? t : null;
}

/** A new entry before its first answer, as EntryView.values gives it: one shape for every values object written. */
const NEW_ENTRY: EntryValues = new EntryView().values();

/**
 * An entry's values after an answer. An opted-out or invalid entry keeps its hash and times and loses every raw
 * UID; an opted-out one keeps its opted_out_since when the answer does not say.
 */
function updatedValues(old: EntryValues, u: EncodedUpdate, nowS: number): EntryValues {
  const o = u.outcome;
  switch (o.kind) {
    case 'mapped':
      return {
        ...old,
        status: 1,
        u: u.storedU,
        p: u.storedP,
        r: timeOrNull(o.r),
        bucketId: typeof o.bucketId === 'string' ? o.bucketId : null,
        lastMappedS: nowS,
        optedOutSinceMs: null,
        due: false,
      };
    case 'optout':
      return { ...old, ...TOMBSTONE, optedOutSinceMs: timeOrNull(o.optedOutSinceMs) ?? old.optedOutSinceMs };
    case 'record': {
      // every value as the copy gives it, in old's order (its raw UIDs as stored bytes)
      const { kind, ...values } = o;
      return { ...old, ...values, status: STATUS_CODE[o.status], u: u.storedU, p: u.storedP };
    }
    case 'invalid':
      return { ...old, ...TOMBSTONE, status: 3 };
    default:
      throw new TypeError(`commitBatch: unknown outcome '${(o as { kind: unknown }).kind}'`);
  }
}
