// A state file as a process killed while it wrote leaves it: pages written into it and a hot rollback journal.
import { copyFileSync, writeFileSync } from 'node:fs';
import Database from './sqlite-driver.js';

/**
 * Writes `path` and `path-journal` as a killed writer leaves them, by copying a file and its journal while a
 * transaction that has spilled pages into the file is still open (`scratch`: the file that transaction runs on).
 */
export function writeWithHotJournal(scratch: string, path: string): void {
  writeFileSync(scratch, '');
  const db = new Database(scratch);
  try {
    db.pragma('cache_size = 2');
    db.exec('BEGIN; CREATE TABLE t (a)');
    const insert = db.prepare('INSERT INTO t VALUES (?)');
    for (let i = 0; i < 200; i++) insert.run(Buffer.alloc(2_000, i));
    copyFileSync(scratch, path);
    copyFileSync(`${scratch}-journal`, `${path}-journal`);
    db.exec('ROLLBACK');
  } finally {
    db.close();
  }
}
