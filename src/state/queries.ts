/**
 * The SQL of the state store, in one place so that tests can EXPLAIN exactly what runs. Statements that read
 * many rows are written so that one index serves both the filter and the order (no table scan, no sort).
 */

/** Ids (or first keys) read per statement from a list of them: one JSON array parameter (id-lists.ts idList). */
export const LIST_PAGE = 5_000;

/**
 * Many entries' records in one row: their count and their records joined into one blob (`||` and group_concat
 * join a blob's bytes as they are, and the CAST gives them back as a blob). A record says its own length
 * (entry-record.ts), so the blob reads as the records one after the other, in the order the rows were read. One
 * row instead of one per entry: a row handed to JavaScript costs more than reading its entry.
 */
const JOINED_RECORDS = "count(*), CAST(group_concat(record, '') AS BLOB)";

export const SQL = {
  // a change row carries the checksum of its JSON (checksum.ts)
  insertPendingChange: 'INSERT INTO pending_changes (run_id, kind, row, sum, created_at) VALUES (?, ?, ?, ?, ?)',
  pendingChanges: 'SELECT id, row, sum FROM pending_changes WHERE kind = ? AND id > ? ORDER BY id LIMIT ?',
  pendingChangeCounts: 'SELECT kind, COUNT(*) FROM pending_changes GROUP BY kind',
  lastPendingChange: 'SELECT max(id) FROM pending_changes WHERE kind = ?',
  ackChanges: 'DELETE FROM pending_changes WHERE kind = ? AND id <= ?',
  // the records of an id range joined (JOINED_RECORDS), in id order
  joinedRecordsInRange: `SELECT ${JOINED_RECORDS} FROM entries WHERE id >= ? AND id <= ?`,
  // the records of an id range joined, with the range's first and last id: the walks of the whole table (the tail,
  // the opt-out sweep, counts, v2 salt buckets, export) read consecutive ids this way. A range of the table's key is
  // read in key order, so the records are joined in id order (no sort); a range whose ids are not all there is read
  // again row by row (recordRangeRows)
  recordRange:
    "SELECT count(*), min(id), max(id), CAST(group_concat(record, '') AS BLOB) FROM entries WHERE id > ? AND id <= ?",
  recordRangeRows: 'SELECT id, record FROM entries WHERE id > ? AND id <= ? ORDER BY id',
  lastId: 'SELECT max(id) FROM entries',
  // an entry not stored yet is appended (n rows per statement: one call into SQLite per n rows); a stored one gets
  // its new record by id
  insertEntries: (n: number) => `INSERT INTO entries (record) VALUES ${new Array<string>(n).fill('(?)').join(', ')}`,
  updateRecord: 'UPDATE entries SET record = ? WHERE id = ?',

  // the due lists (schema.ts): the first day with a list in a range, and a day's pieces in order
  dueListNextDay: 'SELECT day FROM due_lists WHERE day > ? AND day <= ? ORDER BY day LIMIT 1',
  dueListPieces: 'SELECT piece, ids FROM due_lists WHERE day = ? AND piece > ? ORDER BY piece',
  dueListLastPiece: 'SELECT max(piece) FROM due_lists WHERE day = ?',
  insertDueListPiece: 'INSERT INTO due_lists (day, piece, ids) VALUES (?, ?, ?)',
  deleteDueListPieces: 'DELETE FROM due_lists WHERE day = ? AND piece <= ?',
  // listed entries by id: the ids come as one JSON array (ascending), which SQLite walks in its order and joins to
  // the table by rowid (one parameter instead of an IN (...) list of many); their records joined (JOINED_RECORDS) in the
  // array's order, or row by row
  listedRecords: `SELECT ${JOINED_RECORDS} FROM json_each(?) AS j CROSS JOIN entries AS e ON e.id = j.value`,
  listedRecordRows: 'SELECT e.id, e.record FROM json_each(?) AS j CROSS JOIN entries AS e ON e.id = j.value',

  // meta rows carry the checksum of their key and value (meta-values.ts)
  metaAll: 'SELECT key, value, sum FROM meta',
  metaGet: 'SELECT value, sum FROM meta WHERE key = ?',
  metaSet:
    'INSERT INTO meta (key, value, sum) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value, sum = excluded.sum',

  // a run's wall-clock start and the time it was told to use (--now; the same when it was not given)
  startRun: 'INSERT INTO runs (command, args, pid, started_at, now) VALUES (?, ?, ?, ?, ?)',
  finishRun: 'UPDATE runs SET finished_at = ?, summary = ?, exit_code = ? WHERE id = ?',
} as const;
