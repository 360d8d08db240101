// The SQLite driver for tests that read or shape a state file directly: the one src/state loads on this Node.
import { sqliteDriver } from '../../src/state/sqlite-driver.js';

/** Used as better-sqlite3's default export is: `new Database(path, options)`. */
const Database = sqliteDriver();
export default Database;
