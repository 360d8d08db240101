import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { ByteInput } from '../../src/pipeline/io/byte-input.js';
import { downloadOf } from '../../src/pipeline/io/s3/s3-read.js';
import { InputError } from '../../src/pipeline/io/table.js';
import { s3Problem } from '../../src/pipeline/io/s3/s3-client.js';
import { chooseS3Endpoint, s3Endpoint } from '../../src/pipeline/io/s3/s3-endpoint.js';
import { isS3Url, parseS3Url } from '../../src/pipeline/io/s3/s3-url.js';
import { settled } from '../helpers/settled-reading.js';

describe('s3:// locations', () => {
  it('tells s3:// arguments from local paths, whatever the case of the scheme', () => {
    expect(isS3Url('s3://b/k.csv')).toBe(true);
    expect(isS3Url('S3://b/k.csv')).toBe(true);
    expect(isS3Url('./s3://b/k.csv')).toBe(false);
    expect(isS3Url('s3:/b/k.csv')).toBe(false);
    expect(isS3Url(undefined)).toBe(false);
  });

  it('reads the bucket and the key, keeping the key as it is', () => {
    expect(parseS3Url('s3://my-bucket/unload/data_*.csv.gz')).toEqual({
      bucket: 'my-bucket',
      key: 'unload/data_*.csv.gz',
    });
  });

  it.each([['s3://my-bucket'], ['s3://my-bucket/'], ['s3://my-bucket/exports/'], ['s3://My_Bucket/k'], ['s3:///k']])(
    '%s names no object: a problem with how to write one',
    (url) => {
      const at = parseS3Url(url);
      expect('problem' in at && at.problem).toMatch(/s3:\/\/BUCKET\/KEY/);
    },
  );
});

describe('S3 failures as one line', () => {
  const failure = (name: string, status?: number, message = 'AKIDSECRETKEY in the request') =>
    Object.assign(new Error(message), {
      name,
      ...(status !== undefined ? { $metadata: { httpStatusCode: status } } : {}),
    });

  it.each([
    ['NoSuchBucket', 404, "the bucket 'b' does not exist"],
    ['NoSuchKey', 404, 'no such object'],
    ['AccessDenied', 403, 'access denied'],
    ['Forbidden', 403, 'access denied'],
    ['CredentialsProviderError', undefined, 'no AWS credentials found'],
    ['InvalidAccessKeyId', 403, 'the AWS credentials were refused'],
    ['ExpiredToken', 400, 'the AWS credentials were refused'],
    ['SlowDown', 503, 'S3 answered SlowDown (HTTP 503)'],
  ])('%s (HTTP %s): %s, never the error text', (name, status, problem) => {
    const said = s3Problem(failure(name, status), 'b');
    expect(said.problem).toBe(problem);
    expect(`${said.problem} ${said.hint}`).not.toContain('AKIDSECRETKEY');
  });

  it('no region: says which variable sets it', () => {
    expect(s3Problem(new Error('Region is missing'), 'b')).toEqual({
      problem: 'no AWS region set',
      hint: "set AWS_REGION, or give the profile's region in ~/.aws/config",
    });
  });

  it('an unreachable store names the network error, the address without its password, and where it comes from', () => {
    const saved = process.env.AWS_ENDPOINT_URL;
    process.env.AWS_ENDPOINT_URL = 'http://user:pw-secret@127.0.0.1:9/base';
    try {
      const said = s3Problem(Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }), 'b');
      expect(said).toEqual({
        problem: 'the object store at http://127.0.0.1:9 cannot be reached (ECONNREFUSED)',
        hint: 'check --s3-endpoint (else AWS_ENDPOINT_URL) and the network',
      });
      delete process.env.AWS_ENDPOINT_URL;
      expect(s3Problem(Object.assign(new Error('dns'), { code: 'ENOTFOUND' }), 'b')).toEqual({
        problem: 'S3 cannot be reached (ENOTFOUND)',
        hint: 'check the network and the region (AWS_REGION)',
      });
    } finally {
      if (saved === undefined) delete process.env.AWS_ENDPOINT_URL;
      else process.env.AWS_ENDPOINT_URL = saved;
    }
  });
});

describe('the S3 endpoint', () => {
  it('comes from AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL; empty is none', () => {
    expect(s3Endpoint({ AWS_ENDPOINT_URL: 'http://a:9000', AWS_ENDPOINT_URL_S3: 'http://s3:9000' })).toBe(
      'http://s3:9000',
    );
    expect(s3Endpoint({ AWS_ENDPOINT_URL: 'http://a:9000' })).toBe('http://a:9000');
    expect(s3Endpoint({ AWS_ENDPOINT_URL: '' })).toBeUndefined();
  });

  it('--s3-endpoint is refused unless it is an http(s) URL, without quoting it back', () => {
    const problem = chooseS3Endpoint('ftp://user:hunter2@host/');
    expect(problem).toMatch(/^--s3-endpoint must be an http:\/\/ or https:\/\/ URL/);
    expect(problem).not.toContain('hunter2');
    expect(chooseS3Endpoint('not a url')).toMatch(/^--s3-endpoint must be a URL/);
    expect(chooseS3Endpoint('http://127.0.0.1:9000')).toBeUndefined();
    expect(s3Endpoint({ AWS_ENDPOINT_URL: 'http://a:9000' })).toBe('http://127.0.0.1:9000');
  });
});

describe('a download that breaks off', () => {
  const url = 's3://unload/exports/data_0.csv.gz';

  async function readAll(input: ByteInput): Promise<number> {
    let bytes = 0;
    for (let next = await input.next(); next !== null; next = await input.next()) bytes += next.buf.length;
    return bytes;
  }

  it.each([
    ['s3://unload/exports/data_0.csv', Buffer.from(`email\n${'a@example.com\n'.repeat(2000)}`)],
    ['s3://unload/exports/data_0.csv.gz', gzipSync(`email\n${'a@example.com\n'.repeat(2000)}`)],
  ])('%s: one line naming the object, whatever was read before', async (url, bytes) => {
    const body = new Readable({ read() {} });
    body.push(bytes.subarray(0, 1000));
    const input = await ByteInput.open(await settled({ path: url, stream: downloadOf(body, url) }));
    setImmediate(() => body.destroy(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })));
    await expect(readAll(input)).rejects.toThrow(
      new InputError(
        url,
        undefined,
        'the download broke off (ECONNRESET)',
        'run the same command again (with --state, rows already mapped are not sent again)',
      ),
    );
  });

  it('a whole download reads as its bytes', async () => {
    const text = `email\n${'a@example.com\n'.repeat(2000)}`;
    const body = Readable.from([Buffer.from(text)]);
    const input = await ByteInput.open(await settled({ path: url.replace('.gz', ''), stream: downloadOf(body, url) }));
    expect(await readAll(input)).toBe(text.length);
  });
});
