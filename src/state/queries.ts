/** The SQL of the state store, in one place so that tests can EXPLAIN exactly what runs, prepared once per connection. */
import type { Database, Statement } from 'better-sqlite3';

const statements = new WeakMap<Database, Map<string, Statement>>();

/** The connection's statement of `sql`, prepared on first use; a reader sets its mode (raw, pluck) as it reads. */
export function prepared(db: Database, sql: string): Statement {
  let bySql = statements.get(db);
  if (bySql === undefined) {
    bySql = new Map();
    statements.set(db, bySql);
  }
  let statement = bySql.get(sql);
  if (statement === undefined) {
    statement = db.prepare(sql);
    bySql.set(sql, statement);
  }
  return statement;
}

/** Ids (or first keys) read per statement from a list of them, given as one JSON array (id-lists.ts idList). */
export const LIST_PAGE = 5_000;

export const SQL = {
  insertPendingChange: 'INSERT INTO pending_changes (run_id, kind, row, sum, created_at) VALUES (?, ?, ?, ?, ?)',
  pendingChanges: 'SELECT id, row, sum FROM pending_changes WHERE kind = ? AND id > ? ORDER BY id LIMIT ?',
  pendingChangeCounts: 'SELECT kind, COUNT(*) FROM pending_changes GROUP BY kind',
  lastPendingChange: 'SELECT max(id) FROM pending_changes WHERE kind = ?',
  ackChanges: 'DELETE FROM pending_changes WHERE kind = ? AND id <= ?',

  // with the range's first and last id, to tell whether its ids are all there
  recordRange:
    "SELECT count(*), min(id), max(id), CAST(group_concat(record, '') AS BLOB) FROM entries WHERE id > ? AND id <= ?",
  recordRangeRows: 'SELECT id, record FROM entries WHERE id > ? AND id <= ? ORDER BY id',
  lastId: 'SELECT max(id) FROM entries',
  insertEntries: (n: number) => `INSERT INTO entries (record) VALUES ${new Array<string>(n).fill('(?)').join(', ')}`,
  updateRecord: 'UPDATE entries SET record = ? WHERE id = ?',

  dueListNextDay: 'SELECT day FROM due_lists WHERE day > ? AND day <= ? ORDER BY day LIMIT 1',
  dueListPieces: 'SELECT piece, ids FROM due_lists WHERE day = ? ORDER BY piece',
  dueListLastPiece: 'SELECT max(piece) FROM due_lists WHERE day = ?',
  insertDueListPiece: 'INSERT INTO due_lists (day, piece, ids) VALUES (?, ?, ?)',
  deleteDueListPieces: 'DELETE FROM due_lists WHERE day = ? AND piece <= ?',
  // the ids as one JSON array, walked in its order and joined to the table by rowid
  listedRecords:
    "SELECT count(*), CAST(group_concat(record, '') AS BLOB) FROM json_each(?) AS j CROSS JOIN entries AS e ON e.id = j.value",
  listedRecordRows: 'SELECT e.id, e.record FROM json_each(?) AS j CROSS JOIN entries AS e ON e.id = j.value',

  metaGet: 'SELECT value, sum FROM meta WHERE key = ?',
  metaSet:
    'INSERT INTO meta (key, value, sum) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value, sum = excluded.sum',

  // a run's wall-clock start, and the time it was told to use (--now)
  startRun: 'INSERT INTO runs (command, args, pid, started_at, now) VALUES (?, ?, ?, ?, ?)',
  finishRun: 'UPDATE runs SET finished_at = ?, summary = ?, exit_code = ? WHERE id = ?',
  lastRun:
    'SELECT command, started_at AS startedAtS, now AS nowS, finished_at AS finishedAtS, exit_code AS exitCode FROM runs ORDER BY id DESC LIMIT 1',
} as const;
