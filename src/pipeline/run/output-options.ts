/** What a run writes and says: the output options every command shares. */
import type { OutputFormatName } from '../io/format-names.js';
import type { HashEncoding } from '../io/output/hash-cells.js';
import type { TimeFormat } from '../io/typed-cells.js';

export type OutputFormat = OutputFormatName;

export interface OutputFlags {
  /** File to write; undefined or '-' means stdout. */
  output?: string;
  format: OutputFormat;
  summaryJson?: string;
  /** --metrics-file: written by the CLI when the run has ended; here so that it is checked with the other outputs. */
  metricsFile?: string;
  quiet?: boolean;
  /** How the tool writes its own times (refresh_from, opted_out_since); absent: unix. */
  timeFormat?: TimeFormat;
  /** How the tool writes the hashes it outputs (map --emit-hash, hash, changes files, state export); absent: base64. */
  hashEncoding?: HashEncoding;
  /** --compress: gzip the output or not; absent: gzip when -o ends in .gz. */
  compress?: OutputCompression;
}

export type OutputCompression = 'gzip' | 'none';

/** The sink option --compress sets: nothing when it is absent, so the sink decides by the -o name. */
export function sinkCompression(output: { compress?: OutputCompression | undefined }): {
  compress?: OutputCompression;
} {
  return output.compress === undefined ? {} : { compress: output.compress };
}
