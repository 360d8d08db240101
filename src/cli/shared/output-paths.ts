// Refuses, before anything is read, an output path that is an input or another output of the same run.
import { statSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileIdentity, sameFile, writeThroughTarget, type FileIdentity } from '../../pipeline/io/output/output-file.js';
import { isS3Url } from '../../pipeline/io/s3/s3-url.js';
import { EXIT, UserError } from './exit-codes.js';
import { mayHoldSummary } from './summary-file.js';
import { quoted } from './user-values.js';

/** A file a run reads or writes, and how the user named it: `-o`, `--rejects`, `--state`, `the input`. */
export interface RunFile {
  /** How messages name it. */
  flag: string;
  /** undefined or '-' (stdin/stdout) is no file and is skipped. */
  path: string | undefined;
  /** --summary-json: an existing file is replaced only when it is a run summary (summary-file.ts). */
  summary?: boolean;
}

interface Known extends RunFile {
  path: string;
  id: FileIdentity;
}

function known(files: readonly RunFile[]): Known[] {
  return files
    .filter((f): f is RunFile & { path: string } => f.path !== undefined && f.path !== '' && f.path !== '-')
    .map((f) => ({ ...f, id: fileIdentity(f.path) }));
}

function named(f: Known): string {
  return f.flag === 'the input' ? `the input ${quoted(f.path)}` : `${f.flag} ${quoted(f.path)}`;
}

/**
 * Outputs that overlap the input or each other, or a --summary-json that would replace a file that is not a
 * summary: nothing may be written, not even the summary JSON.
 */
export class OverlappingOutputError extends UserError {
  constructor(message: string) {
    super(message, EXIT.usage);
    this.name = 'OverlappingOutputError';
  }
}

/**
 * Throws a usage error (exit 2) when an output is one of the files the run reads (the input, the state file) or
 * the same file as another output: `map in.csv -o in.csv` would replace its own input, and two outputs in one
 * file would leave one of them. Paths are compared by real path (symlinks and `..` resolved) and, for files that
 * exist, by device and inode (hard links). Also refuses an output whose directory does not exist, so that the
 * run does not find out after reading everything, and a --summary-json that exists and is not a summary.
 */
export function refuseOverlappingPaths(
  reads: readonly RunFile[],
  writes: readonly RunFile[],
  /** Whether this command's outputs may be s3:// locations (-o, --rejects, --bad-rows: they go through one sink). */
  s3Outputs = false,
): void {
  const inputs = known(reads);
  const outputs = known(writes);
  outputs.forEach((out, i) => {
    const input = inputs.find((r) => sameFile(r.id, out.id));
    if (input !== undefined) {
      throw new OverlappingOutputError(
        `${named(out)} is the same file as ${named(input)}: the run would overwrite what it reads; choose another ${out.flag} path`,
      );
    }
    const earlier = outputs.slice(0, i).find((o) => sameFile(o.id, out.id));
    if (earlier !== undefined) {
      throw new OverlappingOutputError(
        `${named(out)} is the same file as ${named(earlier)}: give each output its own file`,
      );
    }
    if (out.summary === true && !mayHoldSummary(out.path)) {
      throw new OverlappingOutputError(
        `${named(out)} exists and is not a run summary: it would be replaced; choose another ${out.flag} path (or remove the file)`,
      );
    }
    // an s3:// output's bucket and key are checked when the run opens it, before anything is sent
    if (isS3Url(out.path)) {
      if (s3Outputs && S3_OUTPUT_FLAGS.has(out.flag)) return;
      // not even a failed run's summary may be written where this command writes no object
      throw new OverlappingOutputError(
        `${named(out)}: this output takes a local path, not an s3:// location; write it locally and copy it (aws s3 cp)`,
      );
    }
    const dir = dirname(writeThroughTarget(out.path));
    let isDir: boolean;
    try {
      isDir = statSync(dir).isDirectory();
    } catch {
      isDir = false;
    }
    if (!isDir)
      throw new UserError(
        `${named(out)}: the directory ${quoted(dir)} does not exist; create it first or choose another path`,
        EXIT.usage,
      );
    // found now, not by the rename at the end of a run that has read and sent everything
    if (isDirectory(writeThroughTarget(out.path)))
      throw new UserError(`${named(out)} is a directory: give a file name for ${out.flag}`, EXIT.usage);
  });
}

/**
 * The outputs that may be s3:// locations: sinks of rows, uploaded as they are written, and the run's reports, put
 * whole at its end (an object there that is not a report of this tool is refused before, report-objects.ts).
 */
const S3_OUTPUT_FLAGS = new Set(['-o', '--rejects', '--bad-rows', '--summary-json', '--metrics-file']);

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** The files every batch command may write: -o, --summary-json and --metrics-file. */
export function standardOutputs(output: {
  output?: string | undefined;
  summaryJson?: string | undefined;
  metricsFile?: string | undefined;
}): RunFile[] {
  return [
    { flag: '-o', path: output.output },
    { flag: '--summary-json', path: output.summaryJson, summary: true },
    { flag: '--metrics-file', path: output.metricsFile },
  ];
}
