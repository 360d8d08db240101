/** `state export`: every entry of a state as CSV or JSONL rows: hashes, raw UIDs, r and status. */
import { openStateBackend } from '../../state/open-backend.js';
import type { ExportedEntry } from '../../state/types.js';
import { type HashEncoding, hashCell } from '../io/output/hash-cells.js';
import { openSink } from '../io/output/sink.js';

/** hash_type and hash as map --emit-hash and the remap-due changes file name them, so the three join. */
export const EXPORT_HEADER = ['hash_type', 'hash', 'status', 'raw_uid', 'prev_raw_uid', 'refresh_from'] as const;

/** Rows written per sink call: big enough to keep the sink busy, small enough to keep memory flat. */
const ROWS_PER_WRITE = 5_000;

export interface StateExportOptions {
  /** The file to write; undefined or '-': `stdout`. */
  output?: string | undefined;
  format: 'csv' | 'jsonl';
  /** Absent: gzip when `output` ends in .gz. */
  compress?: 'gzip' | 'none' | undefined;
  hashEncoding?: HashEncoding | undefined;
}

/**
 * Writes every entry of the state `spec` names (a file or a database URL); returns how many, and how many were skipped because their record fails its checksum (a
 * damaged file: the caller then ends with exit 1). Never an email or phone: the state file holds none.
 */
export async function exportState(
  spec: string,
  options: StateExportOptions,
  stdout: NodeJS.WritableStream,
): Promise<{ exported: number; damaged: number }> {
  // read as it is, of any environment
  const file = await openStateBackend(spec, { envFingerprint: '', anyEnvironment: true, readonly: true });
  try {
    const sink = await openSink({
      path: options.output,
      format: options.format,
      ...(options.compress === undefined ? {} : { compress: options.compress }),
      header: [...EXPORT_HEADER],
      stream: stdout,
    });
    let n = 0;
    try {
      let rows: string[][] = [];
      // true when a page of rows is ready to write
      const add = (e: ExportedEntry): boolean =>
        rows.push([
          e.type,
          hashCell(e.hash, options.hashEncoding),
          e.status,
          e.u ?? '',
          e.p ?? '',
          e.r === null ? '' : String(e.r),
        ]) === ROWS_PER_WRITE;
      const flush = async (): Promise<void> => {
        await sink.writeRows(rows);
        n += rows.length;
        rows = [];
      };
      const entries = file.entries();
      // a file's entries come at once: read without a promise per entry
      if (Symbol.iterator in entries) {
        for (const e of entries) if (add(e)) await flush();
      } else {
        for await (const e of entries) if (add(e)) await flush();
      }
      await sink.writeRows(rows);
      n += rows.length;
      await sink.commit();
    } catch (err) {
      await sink.abort();
      throw err;
    }
    return { exported: n, damaged: file.damaged() };
  } finally {
    await file.close();
  }
}
