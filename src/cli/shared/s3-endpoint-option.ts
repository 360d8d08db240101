// --s3-endpoint: the S3-compatible store of a command that reads or writes s3:// locations.
import type { Command } from 'commander';
import { chooseS3Endpoint } from '../../pipeline/io/s3/s3-endpoint.js';
import { UserError } from './exit-codes.js';

/** Adds --s3-endpoint; `what` names the command's arguments that may be s3:// locations, for the help. */
export function addS3EndpointOption(cmd: Command, what: string): void {
  cmd.option(
    '--s3-endpoint <url>',
    `an S3-compatible store (MinIO, R2) for ${what}, addressed by path (default: AWS_ENDPOINT_URL, else AWS)`,
    parseS3Endpoint,
  );
}

/** Checked as the flags are read, so that a bad URL is a usage error before anything is read. */
function parseS3Endpoint(value: string): string {
  const problem = chooseS3Endpoint(value);
  if (problem !== undefined) throw new UserError(problem);
  return value;
}
