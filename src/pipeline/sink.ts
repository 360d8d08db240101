import type { OpenSinkOptions, TableSink } from './table.js';

/** Opens a CSV or JSONL output (implementation in progress; the signature is final). */
export async function openSink(opts: OpenSinkOptions): Promise<TableSink> {
  throw new Error(`openSink not implemented yet (${opts.path ?? '-'})`);
}
