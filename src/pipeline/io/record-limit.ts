/** Longest record (CSV) or line (JSONL) accepted; beyond it the file is almost surely mis-parsed. */
export const MAX_RECORD_BYTES = 16 * 1024 * 1024;
