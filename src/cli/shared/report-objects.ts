// --summary-json and --metrics-file naming s3:// objects: what is there is checked before the run.
import { isS3Url } from '../../pipeline/io/s3/s3-url.js';
import { refusedMetricsPath } from './metrics-file.js';
import { OverlappingOutputError } from './output-paths.js';
import { S3_REPORT_COMMANDS } from './report-commands.js';
import { mayHoldSummaryObject } from './summary-file.js';

/**
 * Refuses, before the run starts, an s3:// --summary-json or --metrics-file whose object holds something else, as
 * a local file is refused (an input named by mistake is never replaced); an object of ours is replaced. Other
 * commands refuse an s3:// report when they check their outputs, without asking S3.
 */
export async function refuseReportObjects(
  command: string,
  summaryPath: string | undefined,
  metricsPath: string | undefined,
): Promise<void> {
  if (!S3_REPORT_COMMANDS.has(command)) return;
  if (isS3Url(summaryPath) && !(await mayHoldSummaryObject(summaryPath as string)))
    throw new OverlappingOutputError(
      `--summary-json '${summaryPath}' exists and is not a run summary: it would be replaced; choose another --summary-json key (or remove the object)`,
    );
  const metricsRefused = isS3Url(metricsPath) ? await refusedMetricsPath(metricsPath as string) : undefined;
  if (metricsRefused !== undefined) throw new OverlappingOutputError(metricsRefused);
}
