import type {
  MapV2Request,
  MapV2ResponseBody,
  MapV3Request,
  MapV3ResponseBody,
  MapV3Answers,
  OptedOutItem,
  SaltBucket,
  TokenGenerateRequest,
  TokenGenerateResult,
  TokenResult,
  TokenValidateRequest,
} from '../protocol/index.js';
import type { ProxyRoute, ProxySettings } from './proxy.js';

/** Counters of one client's traffic, for summaries. */
export interface ClientStats {
  requests: number;
  retries: number;
  http429: number;
  http5xx: number;
  networkErrors: number;
}

export interface RetryEvent {
  path: string;
  /** The attempt that failed, 1-based. */
  attempt: number;
  delayMs: number;
  httpStatus?: number;
  error: Error;
}

export interface ClientOptions {
  baseUrl: string;
  /** Needed by every endpoint except token refresh. */
  apiKey?: string;
  /** Base64 of 32 bytes. Needed by every endpoint except token refresh. */
  clientSecret?: string;
  /** Sockets in the undici Pool (default 20). */
  connections?: number;
  connectTimeoutMs?: number;
  /** Per attempt, whole: connect, headers and the last byte of the body (default 60 s). */
  requestTimeoutMs?: number;
  /** Attempts per call, including the first (default 6). */
  maxAttempts?: number;
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  /** Envelope transport (default binary). */
  bodyMode?: 'binary' | 'text';
  onRetry?: (event: RetryEvent) => void;
  /** Clock used for envelope timestamps (default Date.now). */
  now?: () => number;
  /** Sleep used between attempts; injectable for tests. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Source of backoff jitter in [0, 1) (default Math.random); injectable for tests. */
  random?: () => number;
  userAgent?: string;
  /**
   * Proxy choice, as resolveConfig resolves it from --proxy and HTTPS_PROXY / HTTP_PROXY / NO_PROXY (ResolvedConfig.proxy).
   * Default: no proxy. Like fetch, the client does not read proxy variables itself.
   */
  proxy?: ProxySettings;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Overrides ClientOptions.maxAttempts for this call. */
  maxAttempts?: number;
}

/**
 * One client for every endpoint, over one undici Pool. Each method sends a fresh envelope per attempt, retries
 * 429 / 5xx / network errors with exponential backoff and full jitter, and throws a typed ServiceError
 * (src/protocol/errors.ts) or a NetworkError after the last attempt.
 */
export interface ServiceClient {
  readonly stats: ClientStats;
  /** Service time read from the last decrypted 200 envelope, with the local time it arrived (for clock-skew checks). */
  readonly lastServerTime: { serverMs: number; localMs: number } | undefined;
  /** Where the requests go: straight to the service, or through which proxy (print it with describeProxyRoute). */
  readonly proxyRoute: ProxyRoute;
  mapV3(request: MapV3Request, options?: CallOptions): Promise<MapV3ResponseBody>;
  /**
   * mapV3, with answers of the usual shape left packed (ScannedAnswers: codes, `r` and the raw UIDs' places in
   * the answer's bytes) instead of an object per item; the same checks and errors. Optional: a client without it
   * is asked mapV3.
   */
  mapV3Answers?(request: MapV3Request, options?: CallOptions): Promise<MapV3Answers>;
  mapV2(request: MapV2Request, options?: CallOptions): Promise<MapV2ResponseBody>;
  buckets(sinceTimestamp: string, options?: CallOptions): Promise<SaltBucket[]>;
  optoutStatus(advertisingIds: string[], options?: CallOptions): Promise<OptedOutItem[]>;
  tokenGenerate(input: TokenGenerateRequest, options?: CallOptions): Promise<TokenGenerateResult>;
  tokenRefresh(refreshToken: string, refreshResponseKey: string, options?: CallOptions): Promise<TokenResult>;
  tokenValidate(request: TokenValidateRequest, options?: CallOptions): Promise<boolean>;
  /**
   * GET /ops/healthcheck once (no retry), by the same route as every call: tells whether the service, or the proxy on
   * the way, answers. Throws NetworkError when nothing answers.
   */
  healthcheck(options?: CallOptions): Promise<{ statusCode: number }>;
  close(): Promise<void>;
}
