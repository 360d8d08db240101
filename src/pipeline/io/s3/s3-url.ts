/** Reads an `s3://bucket/key` location: which arguments name one, and its bucket and key. */

/** Whether an input or output argument names an object store location rather than a local path. */
export function isS3Url(path: string | undefined): boolean {
  return path !== undefined && /^s3:\/\//i.test(path);
}

export interface S3Location {
  bucket: string;
  key: string;
}

/** Bucket names as S3 allows them: 3 to 63 lower-case letters, digits, dots and hyphens. */
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** The bucket and key of `url`, or a problem (what is wrong and how to write it) when it cannot name an object. */
export function parseS3Url(url: string): S3Location | { problem: string } {
  const rest = url.slice('s3://'.length);
  const slash = rest.indexOf('/');
  const bucket = slash === -1 ? rest : rest.slice(0, slash);
  const key = slash === -1 ? '' : rest.slice(slash + 1);
  if (!BUCKET.test(bucket))
    return {
      problem: `'${bucket}' is not a bucket name; write s3://BUCKET/KEY, e.g. s3://my-bucket/exports/users.csv`,
    };
  if (key === '' || key.endsWith('/'))
    return {
      problem: 'names no object; write s3://BUCKET/KEY with the object key, e.g. s3://my-bucket/exports/users.csv',
    };
  return { bucket, key };
}
