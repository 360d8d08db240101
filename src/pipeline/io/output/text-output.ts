/** A small text output written whole (a run's summary, its metrics): a local file by rename, or an S3 object. */
import { isS3Url } from '../s3/s3-url.js';
import { writeTextAtomically } from './output-file.js';

/** Writes `text` at `path`: a local file is renamed into place, an s3:// object put whole (the client loaded then). */
export async function writeTextOutput(path: string, text: string): Promise<void> {
  if (isS3Url(path)) await (await import('../s3/s3-text.js')).putS3Text(path, text);
  else await writeTextAtomically(path, text);
}
