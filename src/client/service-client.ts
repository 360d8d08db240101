import {
  type BodyMode,
  contentTypeFor,
  decodeBody,
  decodeKey,
  decryptRefreshResponse,
  decryptResponse,
  encodeBody,
  encryptRequest,
  EnvelopeError,
  type MapV2Request,
  type MapV2ResponseBody,
  type MapV3Request,
  type MapV3ResponseBody,
  type MapV3Answers,
  type OptedOutItem,
  PATHS,
  type ResponseJson,
  type SaltBucket,
  type TokenGenerateRequest,
  type TokenGenerateResult,
  type TokenResult,
  type TokenValidateRequest,
  requestJson,
} from '../protocol/index.js';
import { CLIENT_VERSION } from './client-version.js';
import { MalformedAnswerError, RefreshKeyMismatchError } from './errors.js';
import {
  readBucketsBody,
  readMapV2Body,
  readMapV3Body,
  readOptoutStatusBody,
  readResponseJson,
  readTokenGenerateResult,
  readTokenResult,
  readValidateBody,
} from './response-bodies.js';
import { scanMapV3Answer, scanMapV3Answers } from './map-v3-scan.js';
import { NO_PROXY_SETTINGS, type ProxyRoute } from './proxy.js';
import { defaultSleep, RetryPolicy } from './retry.js';
import { Transport, type RawResponse } from './transport.js';
import type { CallOptions, ClientOptions, ClientStats, ServiceClient } from './types.js';

export const CLIENT_DEFAULTS = {
  connections: 20,
  connectTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  maxAttempts: 6,
  backoffBaseMs: 500,
  backoffMaxMs: 30_000,
  bodyMode: 'binary' as BodyMode,
} as const;

/** Answers without credentials; an operator's load balancers probe it too. */
const HEALTHCHECK_PATH = '/ops/healthcheck';

export function createServiceClient(options: ClientOptions): ServiceClient {
  return new UndiciServiceClient(options);
}

interface Credentials {
  apiKey: string;
  secret: Buffer;
}

class UndiciServiceClient implements ServiceClient {
  readonly stats: ClientStats = { requests: 0, retries: 0, http429: 0, http5xx: 0, networkErrors: 0 };
  private serverTime: { serverMs: number; localMs: number } | undefined;
  private readonly transport: Transport;
  private readonly policy: RetryPolicy;
  private readonly now: () => number;
  private readonly bodyMode: BodyMode;
  private readonly apiKey: string | undefined;
  private readonly secret: Buffer | undefined;
  private readonly commonHeaders: Record<string, string>;

  constructor(options: ClientOptions) {
    const connections = positiveInteger('connections', options.connections ?? CLIENT_DEFAULTS.connections);
    const connectTimeoutMs = positiveInteger(
      'connectTimeoutMs',
      options.connectTimeoutMs ?? CLIENT_DEFAULTS.connectTimeoutMs,
    );
    const requestTimeoutMs = positiveInteger(
      'requestTimeoutMs',
      options.requestTimeoutMs ?? CLIENT_DEFAULTS.requestTimeoutMs,
    );
    const maxAttempts = positiveInteger('maxAttempts', options.maxAttempts ?? CLIENT_DEFAULTS.maxAttempts);
    const backoffBaseMs = nonNegative('backoffBaseMs', options.backoffBaseMs ?? CLIENT_DEFAULTS.backoffBaseMs);
    const backoffMaxMs = nonNegative('backoffMaxMs', options.backoffMaxMs ?? CLIENT_DEFAULTS.backoffMaxMs);
    this.now = options.now ?? Date.now;
    this.bodyMode = options.bodyMode ?? CLIENT_DEFAULTS.bodyMode;
    this.apiKey = options.apiKey || undefined;
    this.secret = options.clientSecret ? decodeKey(options.clientSecret, 'client secret') : undefined;
    this.commonHeaders = { 'x-uid2-client-version': CLIENT_VERSION };
    if (options.userAgent) this.commonHeaders['user-agent'] = options.userAgent;
    const proxy = options.proxy ?? NO_PROXY_SETTINGS;
    this.transport = new Transport({
      baseUrl: options.baseUrl,
      connections,
      connectTimeoutMs,
      requestTimeoutMs,
      proxy,
    });
    this.policy = new RetryPolicy(
      this.transport,
      {
        maxAttempts,
        backoffBaseMs,
        backoffMaxMs,
        random: options.random ?? Math.random,
        sleep: options.sleep ?? defaultSleep,
        onRetry: options.onRetry,
        now: this.now,
      },
      this.stats,
    );
  }

  get proxyRoute(): ProxyRoute {
    return this.transport.route;
  }

  get lastServerTime(): { serverMs: number; localMs: number } | undefined {
    return this.serverTime;
  }

  async mapV3(request: MapV3Request, options?: CallOptions): Promise<MapV3ResponseBody> {
    const target = this.target(PATHS.mapV3);
    return this.callEncrypted(
      PATHS.mapV3,
      request,
      ['success'],
      options,
      (answer) => readMapV3Body(target, answer.body, request, this.now()),
      (json) => scanMapV3Answer(json, request, this.now()),
    );
  }

  /**
   * mapV3, with the answers of the usual shape left packed (ScannedAnswers) rather than read into an object per
   * item; the others as mapV3 reads them. Same checks, same errors.
   */
  async mapV3Answers(request: MapV3Request, options?: CallOptions): Promise<MapV3Answers> {
    const target = this.target(PATHS.mapV3);
    return this.callEncrypted<MapV3Answers>(
      PATHS.mapV3,
      request,
      ['success'],
      options,
      (answer) => readMapV3Body(target, answer.body, request, this.now()),
      (json) => scanMapV3Answers(json, request, this.now()),
    );
  }

  async mapV2(request: MapV2Request, options?: CallOptions): Promise<MapV2ResponseBody> {
    const target = this.target(PATHS.mapV2);
    return this.callEncrypted(PATHS.mapV2, request, ['success'], options, (answer) =>
      readMapV2Body(target, answer.body, request),
    );
  }

  async buckets(sinceTimestamp: string, options?: CallOptions): Promise<SaltBucket[]> {
    const target = this.target(PATHS.buckets);
    return this.callEncrypted(PATHS.buckets, { since_timestamp: sinceTimestamp }, ['success'], options, (answer) =>
      readBucketsBody(target, answer.body),
    );
  }

  async optoutStatus(advertisingIds: string[], options?: CallOptions): Promise<OptedOutItem[]> {
    const target = this.target(PATHS.optoutStatus);
    return this.callEncrypted(PATHS.optoutStatus, { advertising_ids: advertisingIds }, ['success'], options, (answer) =>
      readOptoutStatusBody(target, answer.body, advertisingIds, this.now()),
    );
  }

  async tokenGenerate(input: TokenGenerateRequest, options?: CallOptions): Promise<TokenGenerateResult> {
    const target = this.target(PATHS.tokenGenerate);
    const accepted = ['success', 'optout', 'insufficient_user_consent'];
    return this.callEncrypted(PATHS.tokenGenerate, input, accepted, options, (answer) =>
      readTokenGenerateResult(target, answer),
    );
  }

  async tokenValidate(request: TokenValidateRequest, options?: CallOptions): Promise<boolean> {
    const target = this.target(PATHS.tokenValidate);
    return this.callEncrypted(PATHS.tokenValidate, request, ['success'], options, (answer) =>
      readValidateBody(target, answer.body),
    );
  }

  /**
   * The refresh token travels as plain text (no envelope) and the answer is sealed with the refresh_response_key that
   * came with that token, without timestamp or nonce (docs/wire-protocol.md §4).
   */
  async tokenRefresh(refreshToken: string, refreshResponseKey: string, options?: CallOptions): Promise<TokenResult> {
    const path = PATHS.tokenRefresh;
    const key = decodeKey(refreshResponseKey, 'refresh_response_key');
    const token = refreshToken.trim();
    if (token === '') throw new Error('the refresh_token to refresh is empty');
    const headers: Record<string, string> = { ...this.commonHeaders, 'content-type': contentTypeFor('text') };
    // refresh works without a key; with one, the service tells invalid from expired tokens
    // (docs/wire-protocol.md §4.4)
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    const target = this.target(path);
    return this.policy.dispatch(
      path,
      () => ({ request: { body: token, headers }, context: undefined }),
      (response) => {
        const data = this.readBody(path, response);
        let plain: Buffer;
        try {
          plain = decryptRefreshResponse(key, data);
        } catch (err) {
          if (err instanceof EnvelopeError) throw new RefreshKeyMismatchError();
          throw err;
        }
        return readTokenResult(target, readResponseJson(target, plain, ['success', 'optout']));
      },
      options,
    );
  }

  async healthcheck(options?: CallOptions): Promise<{ statusCode: number }> {
    const response = await this.transport.get(HEALTHCHECK_PATH, this.commonHeaders, options?.signal);
    return { statusCode: response.statusCode };
  }

  async close(): Promise<void> {
    await this.transport.close();
  }

  /**
   * JSON -> a fresh envelope per attempt -> first 200 -> decrypted, nonce-checked `{status, body}` -> `read`, inside
   * the attempt, so that a malformed answer is retried like a 5xx.
   */
  private async callEncrypted<T>(
    path: string,
    payload: object,
    accepted: readonly string[],
    options: CallOptions | undefined,
    read: (answer: ResponseJson) => T,
    /** Reads the answers of the usual shape without parsing the JSON first; undefined hands the text to `read`. */
    scan?: (json: Buffer) => T | undefined,
  ): Promise<T> {
    const { apiKey, secret } = this.credentials(path);
    // a request made of hashes' bytes is sent as its JSON is; the others are stringified
    const json = requestJson(payload);
    const headers: Record<string, string> = {
      ...this.commonHeaders,
      authorization: `Bearer ${apiKey}`,
      'content-type': contentTypeFor(this.bodyMode),
    };
    return this.policy.dispatch(
      path,
      () => {
        const sealed = encryptRequest(secret, json, { nowMs: this.now() });
        return { request: { body: encodeBody(sealed.envelope, this.bodyMode), headers }, context: sealed.nonce };
      },
      (response, nonce) => {
        const data = this.readBody(path, response);
        let opened: ReturnType<typeof decryptResponse>;
        try {
          opened = decryptResponse(secret, data, nonce);
        } catch (err) {
          if (err instanceof EnvelopeError)
            throw new EnvelopeError(err.code, `the answer from ${this.target(path)} was rejected: ${err.message}`);
          throw err;
        }
        this.serverTime = { serverMs: opened.timestampMs, localMs: this.now() };
        const scanned = scan?.(opened.json);
        if (scanned !== undefined) return scanned;
        return read(readResponseJson(this.target(path), opened.json, accepted));
      },
      options,
    );
  }

  /** A 200 body in the mode the answer declares (the service may answer text to a binary request). */
  private readBody(path: string, response: RawResponse): Buffer {
    const contentType = response.headers['content-type'];
    try {
      return decodeBody(response.body, Array.isArray(contentType) ? contentType[0] : contentType);
    } catch {
      throw new MalformedAnswerError(this.target(path), 'the 200 body is neither binary nor base64');
    }
  }

  private credentials(path: string): Credentials {
    if (!this.apiKey || !this.secret) {
      throw new Error(`${path} needs an API key and a client secret; none were given to the client`);
    }
    return { apiKey: this.apiKey, secret: this.secret };
  }

  private target(path: string): string {
    return this.transport.target + path;
  }
}

function positiveInteger(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1)
    throw new Error(`client option ${name} must be a whole number of at least 1, got ${value}`);
  return value;
}

function nonNegative(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) throw new Error(`client option ${name} must be 0 or more, got ${value}`);
  return value;
}
