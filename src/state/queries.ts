/**
 * The SQL of the state store, in one place so that tests can EXPLAIN exactly what runs. Statements that read
 * many rows are written so that one index serves both the filter and the order (no table scan, no sort).
 */

/** Column order of every entry read; rows are read raw (arrays) and decoded by position. */
export const ENTRY_COLUMNS =
  'id, type, hash, status, u, p, r, bucket_id, last_mapped, last_optout_check, opted_out_since, due';
/** Column order of an entry as a map run reads it: the first three as in ENTRY_COLUMNS. */
export const ANSWER_COLUMNS = 'id, type, hash, status, u, p, r, bucket_id, due';
/**
 * A map run's answers packed by the statement (store.ts readPackedAnswers): per entry two numbers, a code and r,
 * in one list, and the bytes of its values one after the other in one blob. Both aggregates read the same rows in
 * the same order, so the list says where each entry's values are in the blob. The code folds type, status and due
 * (checked to be integers in range, or the code is empty) and one size per value, as digits of mixed radix: 0 for NULL,
 * 2n + 1 for a BLOB of n bytes, 2n + 2 for a TEXT of n characters (bytes for bucket_id). A value's kind is read
 * by comparison (every BLOB sorts after every TEXT), and length() counts a BLOB's bytes without reading it. A text
 * whose bytes outnumber its characters, or a size too big for its digit, makes the sizes come short of the blob,
 * and the reader then reads the rows one by one. `||` joins a blob's bytes as they are, and the CAST gives the
 * joined bytes back as a blob, never decoded as text.
 */
const valueSize = (column: string): string =>
  `CASE WHEN ${column} IS NULL THEN 0 WHEN ${column} >= x'' THEN length(${column}) * 2 + 1 ` +
  `ELSE length(${column}) * 2 + 2 END`;
const BUCKET_SIZE =
  "CASE WHEN bucket_id IS NULL THEN 0 ELSE length(CAST(bucket_id AS BLOB)) * 2 + (bucket_id < x'') + 1 END";
/** The radix of each value's size in a packed code, and what type, status and due take below them. */
export const PACKED_SIZE_RADIX = 4096;
export const PACKED_FLAGS = 16;
const PACKED_ANSWERS =
  'count(*), group_concat(iif(type IN (0, 1) AND status IN (0, 1, 2, 3) AND due IN (0, 1), ' +
  `type + 2 * status + 8 * due + ${PACKED_FLAGS} * (${valueSize('hash')} + ${PACKED_SIZE_RADIX} * ` +
  `(${valueSize('u')} + ${PACKED_SIZE_RADIX} * (${valueSize('p')} + ${PACKED_SIZE_RADIX} * ${BUCKET_SIZE}))), '') ` +
  "|| ',' || ifnull(r, ''), ','), " +
  "CAST(group_concat(hash || ifnull(u, '') || ifnull(p, '') || ifnull(bucket_id, ''), '') AS BLOB)";
/** Column order of a due entry. */
export const DUE_COLUMNS = 'id, type, hash, u, p, r, bucket_id';

/** Sizes of the IN (...) lists that are prepared once: a list is padded up to the next size. */
export const IN_LIST_SIZES = [16, 128, 1024, 5000] as const;

function placeholders(n: number): string {
  return new Array<string>(n).fill('?').join(',');
}

export const SQL = {
  insertPendingChange: 'INSERT INTO pending_changes (run_id, kind, row, created_at) VALUES (?, ?, ?, ?)',
  pendingChanges: 'SELECT id, row FROM pending_changes WHERE kind = ? AND id > ? ORDER BY id LIMIT ?',
  lastPendingChange: 'SELECT max(id) FROM pending_changes WHERE kind = ?',
  ackChanges: 'DELETE FROM pending_changes WHERE kind = ? AND id <= ?',
  // given sorted ids, the rows are read in table order
  entriesByIds: (n: number) => `SELECT ${ENTRY_COLUMNS} FROM entries WHERE id IN (${placeholders(n)})`,
  // what a commit reads of its stored entries, by id: enough to match them to its hashes
  keyRowsByIds: (n: number) => `SELECT id, type, hash FROM entries WHERE id IN (${placeholders(n)})`,
  // what a map run reads of an entry (ANSWER_COLUMNS), by id
  answersByIds: (n: number) => `SELECT ${ANSWER_COLUMNS} FROM entries WHERE id IN (${placeholders(n)})`,
  // packed answers of the entries of an id range (consecutive ids: read in table order, no IN list)
  packedAnswersInRange: `SELECT ${PACKED_ANSWERS} FROM entries WHERE id >= ? AND id <= ?`,
  packedAnswersByIds: (n: number) => `SELECT ${PACKED_ANSWERS} FROM entries WHERE id IN (${placeholders(n)})`,
  rawUidsByIds: (n: number) => `SELECT id, u, p FROM entries WHERE id IN (${placeholders(n)})`,
  // the tail: entries appended after the last merge into the key levels
  tailSince: 'SELECT id, type, hash FROM entries WHERE id > ? AND id <= ? ORDER BY id',
  // a page of the tail as one string: per entry, its type code and the hex of the first 6 bytes of its hash (all a
  // lookup key needs of a hash kept as bytes), in id order; one row instead of one per entry. A hash kept as text
  // gives NULL, which group_concat leaves out: the page is then read row by row.
  tailPrefixes:
    "SELECT count(*), min(id), max(id), group_concat(CASE WHEN typeof(hash) = 'blob' AND length(hash) >= 6 " +
    "THEN type || hex(substr(hash, 1, 6)) END, '' ORDER BY id) " +
    'FROM (SELECT id, type, hash FROM entries WHERE id > ? ORDER BY id LIMIT ?)',
  // an answer for a key not stored yet is appended (n rows per statement: one call into SQLite per n rows); one
  // for a stored entry updates its row by id
  insertEntries: (n: number) =>
    'INSERT INTO entries (type, hash, status, u, p, r, bucket_id, last_mapped, opted_out_since, due) ' +
    `VALUES ${new Array<string>(n).fill('(?, ?, ?, ?, ?, ?, ?, ?, ?, 0)').join(', ')}`,
  updateMapped:
    'UPDATE entries SET status = 1, u = ?, p = ?, r = ?, bucket_id = ?, last_mapped = ?, opted_out_since = NULL, ' +
    'due = 0 WHERE id = ?',
  // a tombstone keeps its hash, last mapped time and last check; it loses every raw UID
  updateOptout:
    'UPDATE entries SET status = 2, u = NULL, p = NULL, r = NULL, bucket_id = NULL, due = 0, ' +
    'opted_out_since = coalesce(?, opted_out_since) WHERE id = ?',
  updateInvalid: 'UPDATE entries SET status = 3, u = NULL, p = NULL, r = NULL, bucket_id = NULL, due = 0 WHERE id = ?',

  // the due lists (schema.ts DUE_LISTS_TABLE): the first day with a list in a range, and a day's pieces in order
  dueListNextDay: 'SELECT day FROM due_lists WHERE day > ? AND day <= ? ORDER BY day LIMIT 1',
  dueListPieces: 'SELECT piece, ids FROM due_lists WHERE day = ? AND piece > ? ORDER BY piece',
  dueListLastPiece: 'SELECT max(piece) FROM due_lists WHERE day = ?',
  insertDueListPiece: 'INSERT INTO due_lists (day, piece, ids) VALUES (?, ?, ?)',
  deleteDueListPieces: 'DELETE FROM due_lists WHERE day = ? AND piece <= ?',
  // listed entries by id: the ids come as one JSON array (ascending), which SQLite walks in its order and joins to
  // the table by rowid (one parameter instead of an IN list of many). An entry is live on a list while its r is
  // in the list's day, [?, ?).
  countListed:
    'SELECT count(*), ifnull(sum(e.r <= ?), 0) FROM json_each(?) AS j CROSS JOIN entries AS e ON e.id = j.value ' +
    'WHERE e.r >= ? AND e.r < ?',
  rOfListed: 'SELECT e.r FROM json_each(?) AS j CROSS JOIN entries AS e ON e.id = j.value WHERE e.r >= ? AND e.r < ?',
  liveListed: 'SELECT e.id FROM json_each(?) AS j CROSS JOIN entries AS e ON e.id = j.value WHERE e.r >= ? AND e.r < ?',
  dueListed:
    `SELECT ${DUE_COLUMNS.split(', ')
      .map((c) => `e.${c}`)
      .join(', ')} FROM json_each(?) AS j CROSS JOIN entries AS e ON e.id = j.value ` +
    'WHERE e.r >= ? AND e.r < ? AND e.r <= ?',

  selectDueV2: `SELECT ${DUE_COLUMNS} FROM entries WHERE due = 1 AND id > ? ORDER BY id LIMIT ?`,
  countDueV2: 'SELECT count(*) FROM entries WHERE due = 1',
  countDueBoth: 'SELECT count(*) FROM entries WHERE due = 1 AND r <= ?',
  // last_mapped is in seconds and last_updated in ms: an entry mapped in the rotation's second counts as before it
  markBucketRotated:
    'UPDATE entries SET due = 1 WHERE bucket_id = ? AND status = 1 AND due = 0 AND (last_mapped IS NULL OR last_mapped * 1000 < ?)',
  markAllMappedDue: 'UPDATE entries SET due = 1 WHERE status = 1 AND due = 0',
  markBucketEntriesDue: 'UPDATE entries SET due = 1 WHERE bucket_id IS NOT NULL AND status = 1 AND due = 0',
  // entries_by_bucket holds exactly these rows (tombstones and invalids have no bucket)
  bucketEntries: 'SELECT count(*), min(last_mapped) FROM entries WHERE bucket_id IS NOT NULL',

  // the sweep walks entries in id order between two ids: a range of the table's own B-tree, never an index
  sweepIdRange:
    'SELECT id, u, p, last_optout_check, type, hash FROM entries NOT INDEXED ' +
    'WHERE id > ? AND id <= ? AND (u IS NOT NULL OR p IS NOT NULL) ORDER BY id LIMIT ?',
  // one read of the table: kept over a count in meta that every write would have to keep true
  countWithRawUid: 'SELECT count(*) FROM entries WHERE (u IS NOT NULL OR p IS NOT NULL)',
  recordOptoutCheck: 'UPDATE entries SET last_optout_check = ? WHERE id = ?',
  tombstoneById:
    'UPDATE entries SET status = 2, u = NULL, p = NULL, r = NULL, bucket_id = NULL, due = 0, ' +
    'opted_out_since = ?, last_optout_check = ? WHERE id = ?',
  createOptoutProbe: 'CREATE TEMP TABLE IF NOT EXISTS optout_probe (raw BLOB PRIMARY KEY, since INTEGER NOT NULL)',
  clearOptoutProbe: 'DELETE FROM temp.optout_probe',
  fillOptoutProbe: 'INSERT OR REPLACE INTO temp.optout_probe (raw, since) VALUES (?, ?)',
  // SET expressions read the row as it was, so the probe still matches the old u and p
  tombstoneByProbe:
    'UPDATE entries SET status = 2, u = NULL, p = NULL, r = NULL, bucket_id = NULL, due = 0, ' +
    'opted_out_since = (SELECT since FROM temp.optout_probe WHERE raw IN (entries.u, entries.p) LIMIT 1), ' +
    'last_optout_check = ? ' +
    'WHERE u IN (SELECT raw FROM temp.optout_probe) OR p IN (SELECT raw FROM temp.optout_probe)',

  // one pass with sums: a GROUP BY here would sort every row in memory first (240 MB at 5M entries)
  countsByStatus: 'SELECT count(*), sum(status = 1), sum(status = 2), sum(status = 3) FROM entries',
  // one pass over the table (for `state info`): there is no index on r
  dueDays: 'SELECT r / 86400 AS day, count(*) FROM entries WHERE r IS NOT NULL GROUP BY day ORDER BY day',
  exportPage: 'SELECT id, type, hash, status, u, p, r FROM entries WHERE id > ? ORDER BY id LIMIT ?',

  metaAll: 'SELECT key, value FROM meta',
  metaGet: 'SELECT value FROM meta WHERE key = ?',
  metaSet: 'INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',

  startRun: 'INSERT INTO runs (command, args, pid, started_at) VALUES (?, ?, ?, ?)',
  finishRun: 'UPDATE runs SET finished_at = ?, summary = ?, exit_code = ? WHERE id = ?',
  listRuns: 'SELECT id, command, args, started_at, finished_at, summary, exit_code FROM runs ORDER BY id DESC LIMIT ?',
} as const;
