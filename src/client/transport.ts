import type { Dispatcher, Pool as UndiciPool } from 'undici';
import { NetworkError, type NetworkFailure } from './errors.js';
import {
  proxyRouteFor,
  redactProxyUrl,
  redactUrlText,
  type ProxyAddress,
  type ProxyRoute,
  type ProxySettings,
} from './proxy.js';
import { Pool, ProxyAgent } from './undici-parts.js';

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
  /** Proxy choice; the route for baseUrl is taken once, at construction. */
  proxy: ProxySettings;
}

/**
 * POSTs over one undici Pool (Pool.request costs far less CPU per call than fetch), or through
 * undici's ProxyAgent when a proxy applies to the service: the same pool settings then hold for the sockets to the
 * proxy (plain http:// targets are forwarded) or the tunnels through it (https:// targets, by CONNECT).
 * Every low-level failure leaves as a NetworkError, so the retry policy has one type to look at.
 */
export class Transport {
  /** Origin + base path, without user info: safe to print. */
  readonly target: string;
  /** Where the requests go: straight to the service, or through which proxy and why. */
  readonly route: ProxyRoute;
  private readonly dispatcher: Dispatcher;
  private readonly origin: string;
  private readonly basePath: string;
  private readonly requestTimeoutMs: number;
  private readonly proxy: ProxyAddress | undefined;

  constructor(options: TransportOptions) {
    const url = parseBaseUrl(options.baseUrl);
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.origin = url.origin;
    this.target = url.origin + this.basePath;
    this.requestTimeoutMs = options.requestTimeoutMs;
    this.route = proxyRouteFor(url, options.proxy);
    this.proxy = this.route.kind === 'proxy' ? this.route.proxy : undefined;
    const poolOptions: UndiciPool.Options = {
      connections: options.connections,
      // one request per socket at a time: a slow 5,000-item map must not hold up the requests queued behind it
      pipelining: 1,
      headersTimeout: options.requestTimeoutMs,
      bodyTimeout: options.requestTimeoutMs,
    };
    if (this.proxy === undefined) {
      this.dispatcher = new Pool(url.origin, { ...poolOptions, connect: { timeout: options.connectTimeoutMs } });
    } else {
      this.dispatcher = new ProxyAgent({
        uri: checkProxyUrl(this.proxy),
        // CONNECT only where TLS needs a tunnel: many proxies allow CONNECT to port 443 alone, and plain http is forwarded
        proxyTunnel: url.protocol === 'https:',
        proxyTls: { timeout: options.connectTimeoutMs },
        requestTls: { timeout: options.connectTimeoutMs },
        // the pools to the proxy (forwarding) or through it (tunnels) keep the limits of the direct pool; `connect`
        // from undici is kept, since it is what reaches the proxy or opens the tunnel
        factory: (origin, opts) => new Pool(origin, { ...(opts as UndiciPool.Options), ...poolOptions }),
        // the CONNECT requests themselves: a proxy that never answers one must time out like the service would
        clientFactory: (origin, opts) =>
          new Pool(origin, {
            ...(opts as UndiciPool.Options),
            headersTimeout: options.requestTimeoutMs,
            bodyTimeout: options.requestTimeoutMs,
          }),
      });
    }
  }

  async post(path: string, request: OutgoingRequest, signal?: AbortSignal): Promise<RawResponse> {
    return this.send('POST', path, request, signal);
  }

  /** A GET without body, e.g. the health check: the same route, proxy and timeouts as the API calls. */
  async get(path: string, headers: Record<string, string>, signal?: AbortSignal): Promise<RawResponse> {
    return this.send('GET', path, { headers }, signal);
  }

  private async send(
    method: 'GET' | 'POST',
    path: string,
    request: { headers: Record<string, string>; body?: Buffer | string },
    signal?: AbortSignal,
  ): Promise<RawResponse> {
    const attempt = new AttemptDeadline(this.requestTimeoutMs, signal);
    try {
      const res = await this.dispatcher.request({
        origin: this.origin,
        method,
        path: this.basePath + path,
        headers: request.headers,
        body: request.body ?? null,
        signal: attempt.signal,
        headersTimeout: this.requestTimeoutMs,
        bodyTimeout: this.requestTimeoutMs,
      });
      const body = Buffer.from(await res.body.arrayBuffer());
      if (res.statusCode === 407 && this.proxy !== undefined) throw this.proxyFailure(path, 'proxy-auth', 'HTTP 407');
      return { statusCode: res.statusCode, headers: res.headers, body };
    } catch (err) {
      if (err instanceof NetworkError) throw err;
      if (attempt.expired) {
        throw new NetworkError(this.target + path, 'timeout', ATTEMPT_TIMEOUT_CODE, { cause: err, ...this.via() });
      }
      throw this.asNetworkError(path, err);
    } finally {
      attempt.clear();
    }
  }

  async close(): Promise<void> {
    await this.dispatcher.destroy();
  }

  /** Known connection failures become NetworkError; anything else (a bug, an abort) passes through unchanged. */
  private asNetworkError(path: string, err: unknown): unknown {
    const refusal = this.proxy === undefined ? undefined : proxyRefusal(err);
    if (refusal !== undefined)
      return this.proxyFailure(path, refusal === 407 ? 'proxy-auth' : 'proxy', `HTTP ${refusal}`, err);
    const code = errorCode(err);
    const failure = code === undefined ? undefined : (FAILURES[code] ?? tlsFailure(code));
    if (failure === undefined || code === undefined) return err;
    return new NetworkError(this.target + path, failure, code, { cause: err, ...this.via() });
  }

  private proxyFailure(path: string, failure: NetworkFailure, code: string, cause?: unknown): NetworkError {
    return new NetworkError(this.target + path, failure, code, { cause, ...this.via() });
  }

  private via(): { via?: string; viaFrom?: string } {
    return this.proxy === undefined ? {} : { via: redactProxyUrl(this.proxy.url), viaFrom: this.proxy.from };
  }
}

/** The code of a NetworkError for an attempt that outlived requestTimeoutMs as a whole (connect, headers and body). */
export const ATTEMPT_TIMEOUT_CODE = 'ATTEMPT_TIMEOUT';

/**
 * One attempt's deadline, joined with the caller's signal. undici's headersTimeout and bodyTimeout only bound the
 * gaps between chunks, so an answer that trickles a few bytes at a time would hold a run forever; this bounds the
 * whole attempt. A plain timer, cleared when the attempt ends, rather than AbortSignal.timeout + AbortSignal.any:
 * thousands of attempts a minute must not leave thousands of pending timers or listeners behind.
 */
class AttemptDeadline {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private readonly onCallerAbort: (() => void) | undefined;
  expired = false;

  constructor(
    timeoutMs: number,
    private readonly caller: AbortSignal | undefined,
  ) {
    this.timer = setTimeout(() => {
      this.expired = true;
      this.controller.abort();
    }, timeoutMs);
    if (caller !== undefined) {
      if (caller.aborted) this.controller.abort(caller.reason);
      this.onCallerAbort = () => this.controller.abort(caller.reason);
      caller.addEventListener('abort', this.onCallerAbort, { once: true });
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  clear(): void {
    clearTimeout(this.timer);
    if (this.onCallerAbort !== undefined) this.caller?.removeEventListener('abort', this.onCallerAbort);
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
  ERR_TLS_HANDSHAKE_TIMEOUT: 'timeout',
  ENOTFOUND: 'dns',
  EAI_AGAIN: 'dns',
  EHOSTUNREACH: 'unreachable',
  ENETUNREACH: 'unreachable',
  ENETDOWN: 'unreachable',
};

/** Certificate checks that fail the same way on every attempt (OpenSSL's names, as Node reports them). */
const CERTIFICATE_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
]);

/** A TLS handshake that failed: an untrusted certificate, a host name it does not cover, or no TLS on that port. */
function tlsFailure(code: string): NetworkFailure | undefined {
  return code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_') || CERTIFICATE_CODES.has(code) ? 'tls' : undefined;
}

/**
 * The status a proxy refused the request with, if that is what failed: undici reports a CONNECT answered with other
 * than 200 as "Proxy response (NNN) !== 200 when HTTP Tunneling", and a forwarded 407 as "Proxy Authentication Required (407)".
 */
function proxyRefusal(err: unknown): number | undefined {
  if (!(err instanceof Error)) return undefined;
  const tunnel = /Proxy response \((\d{3})\)/.exec(err.message);
  if (tunnel) return Number(tunnel[1]);
  return /Proxy Authentication Required \(407\)/.test(err.message) ? 407 : undefined;
}

function errorCode(err: unknown): string | undefined {
  if (!(err instanceof Error)) return undefined;
  const code = (err as Error & { code?: unknown }).code;
  if (typeof code === 'string') return code;
  // happy-eyeballs connects report every address tried in one AggregateError
  if (err instanceof AggregateError) return errorCode(err.errors[0]);
  return undefined;
}

function checkProxyUrl(proxy: ProxyAddress): string {
  let url: URL | undefined;
  try {
    url = new URL(proxy.url);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new Error(`the proxy from ${proxy.from} is not an http:// or https:// URL: "${redactUrlText(proxy.url)}"`);
  }
  return url.href;
}

function parseBaseUrl(baseUrl: string): URL {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new Error(
      `the service base URL is not a URL: "${redactUrlText(baseUrl)}" (expected e.g. https://operator-integ.uidapi.com)`,
    );
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new Error(`the service base URL must start with https:// or http://, got "${url.protocol}"`);
  }
  if (url.search || url.hash) {
    throw new Error(`the service base URL must not carry a query or fragment: ${url.origin}${url.pathname}`);
  }
  return url;
}
