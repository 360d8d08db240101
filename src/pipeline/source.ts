import type { OpenSourceOptions, TableSource } from './table.js';

/** Opens a CSV or JSONL table (implementation in progress; the signature is final). */
export async function openSource(opts: OpenSourceOptions): Promise<TableSource> {
  throw new Error(`openSource not implemented yet (${opts.path})`);
}
