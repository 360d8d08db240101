/** The one S3 client of a process: region and credentials from the AWS chain, an S3-compatible endpoint if given. */
import { S3Client } from '@aws-sdk/client-s3';
import { s3Endpoint, shownEndpoint } from './s3-endpoint.js';

let client: S3Client | undefined;

/**
 * The client, made on first use. With an endpoint, buckets are addressed by path (`host/bucket/key`), as
 * S3-compatible stores expect; the region defaults to us-east-1 there, since such stores ignore it.
 */
export function s3Client(): S3Client {
  if (client !== undefined) return client;
  // the SDK warns on stderr that its later releases need a newer Node; this tool pins its release, so the notice
  // is not the user's to act on and would break the one-line output of every run on Node 20
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const endpoint = s3Endpoint();
  const region = process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION;
  client = new S3Client({
    ...(endpoint !== undefined ? { endpoint, forcePathStyle: true } : {}),
    ...(region === undefined && endpoint !== undefined ? { region: 'us-east-1' } : {}),
  });
  return client;
}

/**
 * Why an S3 request failed, as a problem and a fix for one line. Only the error's name and HTTP status are used:
 * its message may quote a request, and nothing here may carry a credential.
 */
export function s3Problem(err: unknown, bucket: string): { problem: string; hint: string } {
  const e = err as { name?: string; code?: string; $metadata?: { httpStatusCode?: number } };
  const name = e?.name ?? '';
  const status = e?.$metadata?.httpStatusCode;
  if (name === 'NoSuchBucket')
    return {
      problem: `the bucket '${bucket}' does not exist`,
      hint: 'check the bucket name and the region (AWS_REGION)',
    };
  if (name === 'NoSuchKey' || (status === 404 && name !== 'NoSuchBucket'))
    return { problem: 'no such object', hint: 'check the key (aws s3 ls shows what is there)' };
  if (name === 'InvalidAccessKeyId' || name === 'SignatureDoesNotMatch' || name === 'ExpiredToken')
    return {
      problem: 'the AWS credentials were refused',
      hint: 'check or renew them (AWS_PROFILE, AWS_ACCESS_KEY_ID)',
    };
  if (name === 'AccessDenied' || status === 403)
    return {
      problem: 'access denied',
      hint: 'give the credentials in use s3:GetObject / s3:ListBucket (reading) or s3:PutObject (writing) on it',
    };
  if (name === 'CredentialsProviderError' || /credential/i.test(name))
    return {
      problem: 'no AWS credentials found',
      hint: 'set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run where a role provides them',
    };
  // the SDK's own text, not the service's: it names no request and no credential
  if (err instanceof Error && /^Region is missing/.test(err.message))
    return { problem: 'no AWS region set', hint: "set AWS_REGION, or give the profile's region in ~/.aws/config" };
  const code = e?.code;
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'ETIMEDOUT' || code === 'ECONNRESET') {
    const at = shownEndpoint();
    return at === undefined
      ? { problem: `S3 cannot be reached (${code})`, hint: 'check the network and the region (AWS_REGION)' }
      : {
          problem: `the object store at ${at} cannot be reached (${code})`,
          hint: 'check --s3-endpoint (else AWS_ENDPOINT_URL) and the network',
        };
  }
  return {
    problem: `S3 answered ${name || 'an error'}${status !== undefined ? ` (HTTP ${status})` : ''}`,
    hint: 'run the same command again; if it persists, check the bucket with aws s3 ls',
  };
}
