import { Pool } from 'undici';
import { NetworkError, type NetworkFailure } from './errors.js';

/** One exchange as the wire saw it; the retry policy and the endpoint methods read it, nothing else. */
export interface RawResponse {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export interface OutgoingRequest {
  body: Buffer | string;
  headers: Record<string, string>;
}

export interface TransportOptions {
  baseUrl: string;
  connections: number;
  connectTimeoutMs: number;
  requestTimeoutMs: number;
}

/**
 * POSTs over one undici Pool (Pool.request: a third of fetch's CPU per call, deps-and-limits.md §4-5).
 * Every low-level failure leaves as a NetworkError, so the retry policy has one type to look at.
 */
export class Transport {
  /** Origin + base path, without user info: safe to print. */
  readonly target: string;
  private readonly pool: Pool;
  private readonly basePath: string;
  private readonly requestTimeoutMs: number;

  constructor(options: TransportOptions) {
    const url = parseBaseUrl(options.baseUrl);
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.target = url.origin + this.basePath;
    this.requestTimeoutMs = options.requestTimeoutMs;
    this.pool = new Pool(url.origin, {
      connections: options.connections,
      // one request per socket at a time: a slow 5,000-item map must not hold up the requests queued behind it
      pipelining: 1,
      connect: { timeout: options.connectTimeoutMs },
      headersTimeout: options.requestTimeoutMs,
      bodyTimeout: options.requestTimeoutMs,
    });
  }

  async post(path: string, request: OutgoingRequest, signal?: AbortSignal): Promise<RawResponse> {
    try {
      const res = await this.pool.request({
        method: 'POST',
        path: this.basePath + path,
        headers: request.headers,
        body: request.body,
        signal,
        headersTimeout: this.requestTimeoutMs,
        bodyTimeout: this.requestTimeoutMs,
      });
      const body = Buffer.from(await res.body.arrayBuffer());
      return { statusCode: res.statusCode, headers: res.headers, body };
    } catch (err) {
      throw this.asNetworkError(path, err);
    }
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }

  /** Known connection failures become NetworkError; anything else (a bug, an abort) passes through unchanged. */
  private asNetworkError(path: string, err: unknown): unknown {
    const code = errorCode(err);
    const failure = code === undefined ? undefined : FAILURES[code];
    if (failure === undefined || code === undefined) return err;
    return new NetworkError(this.target + path, failure, code, { cause: err });
  }
}

const FAILURES: Record<string, NetworkFailure> = {
  ECONNREFUSED: 'refused',
  ECONNRESET: 'reset',
  EPIPE: 'reset',
  ECONNABORTED: 'reset',
  UND_ERR_SOCKET: 'closed',
  ETIMEDOUT: 'timeout',
  UND_ERR_CONNECT_TIMEOUT: 'timeout',
  UND_ERR_HEADERS_TIMEOUT: 'timeout',
  UND_ERR_BODY_TIMEOUT: 'timeout',
  ENOTFOUND: 'dns',
  EAI_AGAIN: 'dns',
  EHOSTUNREACH: 'unreachable',
  ENETUNREACH: 'unreachable',
  ENETDOWN: 'unreachable',
};

function errorCode(err: unknown): string | undefined {
  if (!(err instanceof Error)) return undefined;
  const code = (err as Error & { code?: unknown }).code;
  if (typeof code === 'string') return code;
  // happy-eyeballs connects report every address tried in one AggregateError
  if (err instanceof AggregateError) return errorCode(err.errors[0]);
  return undefined;
}

function parseBaseUrl(baseUrl: string): URL {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new Error(`the service base URL is not a URL: "${redact(baseUrl)}" (expected e.g. https://operator-integ.uidapi.com)`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new Error(`the service base URL must start with https:// or http://, got "${url.protocol}"`);
  }
  if (url.search || url.hash) {
    throw new Error(`the service base URL must not carry a query or fragment: ${url.origin}${url.pathname}`);
  }
  return url;
}

/** A malformed URL may still hold user:password@; keep only what cannot be a secret. */
function redact(text: string): string {
  return text.replace(/\/\/[^/@]*@/, '//***@').slice(0, 200);
}
