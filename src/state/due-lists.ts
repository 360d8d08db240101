/** The per-day due lists (schema.ts): appended by each commit, read in (day, id) order, rewritten without stale ids. */
import type { Database } from 'better-sqlite3';
import { type EntryView, orNull } from './entry-record.js';
import { TYPE_OF_CODE } from './schema.js';
import { dayOf, decodeIds, encodeIds, firstAbove, sortedUnique } from './id-lists.js';
import { LIST_PAGE, prepared, SQL } from './queries.js';
import type { RecordWalker } from './record-walk.js';
import type { CopiedEntry, DueCursor, DueDay, DueEntry, EntryUpdate } from './types.js';

const DAY_S = 86_400;
// a piece is read whole: a big day is rewritten in several
const DUE_PIECE_IDS = 65_536;
// a day's due list is rewritten when at least half its ids are stale, or when it has this many pieces
const DUE_LIST_MAX_PIECES = 64;
const NO_DAY = Number.MIN_SAFE_INTEGER;

export class DueLists {
  constructor(
    private readonly db: Database,
    private readonly walker: RecordWalker,
    private readonly readonly: boolean,
  ) {}

  /** Per UTC day of r among the batch's mapped answers, one piece of their ids (readers skip a stale day's). */
  append(
    updates: readonly { outcome: (EntryUpdate | CopiedEntry)['outcome'] }[],
    idOf: (update: number) => number,
  ): void {
    const byDay = new Map<number, number[]>();
    for (let i = 0; i < updates.length; i++) {
      const o = updates[i].outcome;
      if ((o.kind !== 'mapped' && o.kind !== 'record') || typeof o.r !== 'number' || !Number.isFinite(o.r)) continue;
      const day = dayOf(o.r);
      const ids = byDay.get(day);
      if (ids === undefined) byDay.set(day, [idOf(i)]);
      else ids.push(idOf(i));
    }
    for (const [day, ids] of byDay) {
      const last = prepared(this.db, SQL.dueListLastPiece).pluck().get(day) as number | null;
      prepared(this.db, SQL.insertDueListPiece).run(day, (last ?? 0) + 1, encodeIds(sortedUnique(ids)));
    }
  }

  byDay(nowS: number, days: number): DueDay[] {
    const now = Math.floor(nowS);
    const n = Math.max(0, Math.floor(days));
    if (n === 0) return [];
    const counts = new Array<number>(n).fill(0);
    this.forEachListed(dayOf(now + (n - 1) * DAY_S), (r) => {
      const i = r <= now ? 0 : Math.ceil((r - now) / DAY_S);
      if (i < n) counts[i]++;
    });
    return counts.map((count, i) => ({ day: new Date((now + i * DAY_S) * 1000).toISOString().slice(0, 10), count }));
  }

  /**
   * Pages in (UTC day of r, id) order up to today's, from the cursor. An id is kept only while its entry's r is
   * still on that day and due, so a stale id is skipped and no entry is given twice. Inside a read transaction.
   */
  select(nowS: number, after: DueCursor | null, limit: number): DueEntry[] {
    const now = Math.floor(nowS);
    const n = pageLimit(limit);
    if (n === 0) return [];
    const out: DueEntry[] = [];
    const lastDay = dayOf(now);
    const resume = after !== null && after.r !== null && Number.isFinite(after.r);
    let day: number | undefined = resume ? dayOf(after.r as number) : this.nextListedDay(NO_DAY, lastDay);
    let afterId = resume ? after.id : 0;
    while (day !== undefined && day <= lastDay && out.length < n) {
      const { ids } = this.readDueList(day);
      let i = firstAbove(ids, afterId);
      while (i < ids.length && out.length < n) {
        const end = Math.min(ids.length, i + Math.min(LIST_PAGE, Math.max(16, n - out.length)));
        const [from, to] = [day * DAY_S, (day + 1) * DAY_S];
        this.walker.listed(ids.subarray(i, end), (id, e) => {
          if (out.length < n && e.r >= from && e.r < to && e.r <= now) out.push(decodeDue(id, e));
        });
        i = end;
      }
      day = this.nextListedDay(day, lastDay);
      afterId = 0;
    }
    return out;
  }

  private nextListedDay(day: number, lastDay: number): number | undefined {
    return prepared(this.db, SQL.dueListNextDay).pluck().get(day, lastDay) as number | undefined;
  }

  /** The ids of a day's pieces, ascending and each once, with the last piece read. */
  private readDueList(day: number): { ids: Float64Array; lastPiece: number; pieces: number } {
    const rows = prepared(this.db, SQL.dueListPieces).raw().all(day) as [number, Buffer][];
    const ids: number[] = [];
    const onId = (id: number): void => void ids.push(id);
    for (const [, bytes] of rows) decodeIds(bytes, onId);
    const lastPiece = rows.length > 0 ? rows[rows.length - 1][0] : 0;
    return { ids: rows.length === 1 ? Float64Array.from(ids) : sortedUnique(ids), lastPiece, pieces: rows.length };
  }

  /**
   * Gives `onLive` the r of each live entry of the days' lists up to `lastDay` (one whose r is still on the day of
   * its list). A writing connection rewrites a day that is mostly stale or in many pieces, in the same transaction.
   */
  private forEachListed(lastDay: number, onLive: (r: number) => void): void {
    const walk = (rewrite: boolean): void => {
      for (let day = this.nextListedDay(NO_DAY, lastDay); day !== undefined; day = this.nextListedDay(day, lastDay)) {
        const list = this.readDueList(day);
        const [from, to] = [day * DAY_S, (day + 1) * DAY_S];
        const live: number[] = [];
        this.walker.listed(list.ids, (id, e) => {
          if (!(e.r >= from && e.r < to)) return;
          live.push(id);
          onLive(e.r);
        });
        const stale = list.ids.length - live.length;
        if (rewrite && (stale * 2 >= list.ids.length || list.pieces > DUE_LIST_MAX_PIECES)) {
          this.rewriteDueList(day, list.lastPiece, live);
        }
      }
    };
    if (this.readonly || this.db.inTransaction) {
      walk(!this.readonly);
      return;
    }
    try {
      this.db.transaction(walk).immediate(true);
    } catch (err) {
      // another connection is writing: count without rewriting (a later count does it)
      if ((err as { code?: unknown }).code !== 'SQLITE_BUSY') throw err;
      this.db.transaction(walk)(false);
    }
  }

  private rewriteDueList(day: number, lastPiece: number, live: readonly number[]): void {
    prepared(this.db, SQL.deleteDueListPieces).run(day, lastPiece);
    let piece = lastPiece;
    for (let start = 0; start < live.length; start += DUE_PIECE_IDS) {
      const ids = live.slice(start, start + DUE_PIECE_IDS);
      prepared(this.db, SQL.insertDueListPiece).run(day, ++piece, encodeIds(ids));
    }
  }
}

export function pageLimit(limit: number): number {
  return Number.isFinite(limit) ? Math.max(0, Math.floor(limit)) : 0;
}

/** Read field by field rather than picked from EntryView.record(): a remap reads every due entry. */
export function decodeDue(id: number, e: EntryView): DueEntry {
  return {
    id,
    type: TYPE_OF_CODE[e.type],
    hash: e.text(e.hashStart, e.hashSize) ?? '',
    u: e.text(e.uStart, e.uSize),
    p: e.text(e.pStart, e.pSize),
    r: orNull(e.r),
    bucketId: e.text(e.bucketStart, e.bucketSize),
  };
}
