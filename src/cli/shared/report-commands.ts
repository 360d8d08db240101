// Which commands write their --summary-json and --metrics-file to s3:// objects: those whose outputs may be there.
import { isS3Url } from '../../pipeline/io/s3/s3-url.js';

/** The commands whose outputs may be s3:// locations (refuseOverlappingPaths' s3Outputs): their reports too. */
export const S3_REPORT_COMMANDS: ReadonlySet<string> = new Set(['map', 'hash', 'optout-check', 'remap-due']);

/** Whether the report at `path` of a run of `command` may be written: a local path, or an object it may write. */
export function mayWriteReportAt(command: string, path: string): boolean {
  return !isS3Url(path) || S3_REPORT_COMMANDS.has(command);
}
