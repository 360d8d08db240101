/** Walks of the entries table in id order: ranges of ids, each read as one row of its records joined. */
import type { Database } from 'better-sqlite3';
import { ChecksumError } from './checksum.js';
import { EntryView, RecordFormatError } from './entry-record.js';
import { idList } from './id-lists.js';
import { LIST_PAGE, prepared, SQL } from './queries.js';

export const WALK_PAGE = 10_000;

/**
 * Reads entries by id, their records joined in one row per statement (a row costs more than its entry); read
 * again row by row when the ids are not all there or the records do not add up to the blob.
 */
export class RecordWalker {
  constructor(private readonly db: Database) {}

  /**
   * Gives the entries of a list of ids (ascending, each once) in its order. A page is read whole before its
   * entries are given, so `onRecord` may write the entry it is given.
   */
  listed(ids: ArrayLike<number>, onRecord: (id: number, e: EntryView) => void): void {
    const view = new EntryView();
    for (let start = 0; start < ids.length; start += LIST_PAGE) {
      const page = Array.prototype.slice.call(ids, start, start + LIST_PAGE) as number[];
      const list = idList(page);
      const [count, bytes] = prepared(this.db, SQL.listedRecords).raw().get(list) as [number, Buffer | null];
      const joined =
        count === page.length &&
        forEachJoined(bytes, count, view, (i, e) => {
          onRecord(page[i], e);
          return true;
        });
      if (joined) continue;
      for (const [id, record] of prepared(this.db, SQL.listedRecordRows).raw().all(list) as [number, Buffer][]) {
        view.read(record, 0);
        onRecord(id, view);
      }
    }
  }

  lastId(): number {
    return (prepared(this.db, SQL.lastId).pluck().get() as number | null) ?? 0;
  }

  /**
   * Gives every entry with an id in (after, upto] in id order until `onRecord` returns false; as `listed`, it may
   * write the entry. The view is reused: nothing of it may be kept but its record's bytes. With `onDamaged`, a
   * damaged record is skipped and told to it (an export saves what is readable) instead of thrown.
   */
  walk(
    after: number,
    upto: number,
    onRecord: (id: number, e: EntryView) => unknown,
    page = WALK_PAGE,
    onDamaged?: () => void,
  ): void {
    // a range of one page needs no end of the table
    const end = upto - after <= page ? upto : Math.min(upto, this.lastId());

    const view = new EntryView();
    for (let from = after; from < end; ) {
      const to = Math.min(end, from + page);
      const [count, first, last, bytes] = prepared(this.db, SQL.recordRange).raw().get(from, to) as [
        number,
        number | null,
        number | null,
        Buffer | null,
      ];
      if (count === 0 || first === null || last === null) {
        from = to;
        continue;
      }
      let stopped = false;
      const give = (id: number, e: EntryView): boolean => {
        stopped = onRecord(id, e) === false;
        return !stopped;
      };
      const whole = last - first + 1 === count;
      if (!(whole && forEachJoined(bytes, count, view, (i, e) => give(first + i, e), onDamaged !== undefined))) {
        for (const [id, record] of prepared(this.db, SQL.recordRangeRows).raw().all(from, to) as [number, Buffer][]) {
          if (read(view, record, onDamaged) && !give(id, view)) break;
        }
      }
      if (stopped) return;
      from = to;
    }
  }
}

/**
 * Gives each of the `count` records joined in `bytes` to `onRecord` until it returns false; true then. False,
 * having given none, when the records do not add up to the blob exactly.
 */
function forEachJoined(
  bytes: Buffer | null,
  count: number,
  view: EntryView,
  onRecord: (i: number, e: EntryView) => boolean,
  damageSkipped = false,
): boolean {
  if (bytes === null || !wholeRecords(bytes, count, view, damageSkipped)) return false;
  for (let at = 0, i = 0; i < count; i++) {
    at = view.read(bytes, at, false);
    if (!onRecord(i, view)) break;
  }
  return true;
}

/** Whether a blob holds exactly `count` records, each checked (a failed check: false when `damageSkipped`). */
function wholeRecords(bytes: Buffer, count: number, view: EntryView, damageSkipped: boolean): boolean {
  let at = 0;
  try {
    for (let i = 0; i < count; i++) at = view.read(bytes, at);
  } catch (err) {
    if (err instanceof RecordFormatError || (damageSkipped && err instanceof ChecksumError)) return false;
    throw err;
  }
  return at === bytes.length;
}

/** Reads one record into the view; with `onDamaged`, a damaged one is told to it and gives false. */
function read(view: EntryView, record: Buffer, onDamaged?: () => void): boolean {
  try {
    view.read(record, 0);
    return true;
  } catch (err) {
    if (onDamaged === undefined || !(err instanceof ChecksumError || err instanceof RecordFormatError)) throw err;
    onDamaged();
    return false;
  }
}
