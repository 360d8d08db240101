/**
 * The state file: per (DII type, hash) the raw UIDs, refresh time and status of the last answer, so that a
 * re-run sends only what is missing and a nightly remap sends only what is due. Never a raw email or phone.
 */
export type { StateFile, StateStore } from './store.js';
export { openState, openStateReader, stateFileSizes, type StateReader } from './open.js';
export { StateAccessError } from './access.js';
export * from './errors.js';
export { META_KEYS, SCHEMA_VERSION } from './schema.js';
export type * from './types.js';
