/** The S3-compatible store a run talks to: `--s3-endpoint`, else the AWS endpoint variables, else AWS itself. */

let given: string | undefined;

/**
 * `--s3-endpoint URL` for this process, checked: an http(s) URL with a host. Returns a problem for one line when it
 * is not one (the value is not quoted back: a URL may carry a user and password).
 */
export function chooseS3Endpoint(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return '--s3-endpoint must be a URL such as http://127.0.0.1:9000 or https://ACCOUNT.r2.cloudflarestorage.com';
  }
  if ((parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.host === '')
    return '--s3-endpoint must be an http:// or https:// URL with a host, such as http://127.0.0.1:9000';
  given = url;
  return undefined;
}

/** The endpoint as messages show it: scheme, host and port only (a URL may carry a user and password). */
export function shownEndpoint(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const endpoint = s3Endpoint(env);
  if (endpoint === undefined) return undefined;
  try {
    return new URL(endpoint).origin;
  } catch {
    return 'the endpoint given';
  }
}

/** The endpoint of an S3-compatible store (MinIO, R2, GCS interoperability); undefined: AWS itself. */
export function s3Endpoint(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const chosen = given ?? env.AWS_ENDPOINT_URL_S3 ?? env.AWS_ENDPOINT_URL;
  return chosen === undefined || chosen === '' ? undefined : chosen;
}
