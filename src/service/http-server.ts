import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import {
  BINARY_CONTENT_TYPE,
  MAX_BODY_BYTES,
  PATHS,
  TEXT_CONTENT_TYPE,
  encryptRefreshResponse,
  encryptResponse,
  isBinaryContentType,
  type BodyMode,
} from '../protocol/index.js';
import type { ApiKeyAuthority, Role } from './auth.js';
import type { SimulatedClock } from './clock.js';
import type { HandlerResult, TokenHandlers } from './contracts.js';
import type { LocalIdentityEngine } from './engine.js';
import type { EnvelopeGate } from './envelope-gate.js';
import type { FaultInjector } from './faults.js';
import type { ApiAnswer, HandlerContext } from './handlers/answer.js';
import { handleBuckets } from './handlers/buckets.js';
import { countMapItems, handleMapV3 } from './handlers/map-v3.js';
import { handleMapV2 } from './handlers/map-v2.js';
import { countOptoutStatusItems, handleOptoutStatus } from './handlers/optout-status.js';
import { handleLocalAdmin } from './local-admin.js';
import type { ServiceStats } from './stats.js';

/**
 * The local service's HTTP core. Per API request, in the operator's order (docs/wire-protocol.md §1.4):
 * gateway faults -> body over 1 MB (413) -> API key and role (401) -> envelope (400, §2.4) -> rate limit ->
 * handler -> 200 encrypted in the request's body mode, anything else plain JSON.
 * Two times are in play (clock.ts): handlers compute at identity time; the envelope window and the response
 * envelope's timestamp use envelope time, which /_local/clock never moves.
 */

export interface HttpCoreDeps {
  clock: SimulatedClock;
  engine: LocalIdentityEngine;
  tokens: TokenHandlers;
  stats: ServiceStats;
  faults: FaultInjector;
  auth: ApiKeyAuthority;
  gate: EnvelopeGate;
  clientKey: Buffer;
  maxMapItems: number;
}

type RouteAnswer = ApiAnswer | HandlerResult;

interface EnvelopeRoute {
  roles: readonly Role[];
  /** Identity-map routes feed the rate limiter. */
  isMap: boolean;
  countItems(request: Record<string, unknown> | null): number;
  handle(request: Record<string, unknown> | null, ctx: HandlerContext, tokens: TokenHandlers): RouteAnswer;
}

const countDii = (request: Record<string, unknown> | null): number =>
  request !== null && ['email', 'email_hash', 'phone', 'phone_hash'].some((k) => typeof request[k] === 'string')
    ? 1
    : 0;

const ENVELOPE_ROUTES: ReadonlyMap<string, EnvelopeRoute> = new Map<string, EnvelopeRoute>([
  [PATHS.mapV3, { roles: ['MAPPER'], isMap: true, countItems: countMapItems, handle: (r, ctx) => handleMapV3(r, ctx) }],
  [PATHS.mapV2, { roles: ['MAPPER'], isMap: true, countItems: countMapItems, handle: (r, ctx) => handleMapV2(r, ctx) }],
  [PATHS.buckets, { roles: ['MAPPER'], isMap: false, countItems: () => 0, handle: (r, ctx) => handleBuckets(r, ctx) }],
  [
    PATHS.optoutStatus,
    {
      roles: ['MAPPER', 'SHARER', 'ID_READER'],
      isMap: false,
      countItems: countOptoutStatusItems,
      handle: (r, ctx) => handleOptoutStatus(r, ctx),
    },
  ],
  [
    PATHS.tokenGenerate,
    { roles: ['GENERATOR'], isMap: false, countItems: countDii, handle: (r, _ctx, tokens) => tokens.generate(r) },
  ],
  [
    PATHS.tokenValidate,
    { roles: ['GENERATOR'], isMap: false, countItems: countDii, handle: (r, _ctx, tokens) => tokens.validate(r) },
  ],
]);

const HEALTHCHECK = '/ops/healthcheck';
const LOCAL_PREFIX = '/_local/';
/** Past this the connection is cut instead of drained: nobody sends 16 MB to these routes by accident. */
const DRAIN_LIMIT = 16 * MAX_BODY_BYTES;

type BodyRead = { body: Buffer; tooLarge: boolean } | null;

export class HttpCore {
  readonly server: Server;
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(private readonly deps: HttpCoreDeps) {
    this.server = createServer((req, res) => {
      this.route(req, res).catch(() => this.internalError(res));
    });
    this.server.keepAliveTimeout = 30_000;
  }

  /** Stops pending delayed answers; the caller closes the server and its sockets. */
  cancelPending(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const { stats } = this.deps;
    stats.countRequest(path);

    if (path === HEALTHCHECK) {
      req.resume();
      if (req.method === 'GET') sendText(res, 200, 'OK');
      else sendText(res, 405, 'Method Not Allowed');
      return;
    }
    if (path.startsWith(LOCAL_PREFIX)) {
      const read = await readBody(req);
      if (read === null) return;
      if (read.tooLarge) return sendText(res, 413, 'Request Entity Too Large');
      const answer = handleLocalAdmin(req.method ?? 'GET', path, read.body, this.deps);
      return sendJson(res, answer.http, answer.json);
    }
    const envelopeRoute = ENVELOPE_ROUTES.get(path);
    if (envelopeRoute === undefined && path !== PATHS.tokenRefresh) {
      req.resume();
      return sendJson(res, 404, { status: 'not_found', message: `No route ${path}` });
    }
    if (req.method !== 'POST') {
      req.resume();
      return sendText(res, 405, 'Method Not Allowed');
    }
    const read = await readBody(req);
    if (read === null) return;
    const send = (write: () => void) => this.later(write);

    const fault = this.deps.faults.draw();
    if (fault !== null) {
      stats.countFault(fault);
      if (fault === 'drop') return send(() => req.socket.destroy());
      if (fault === '429') return send(() => sendBare(res, 429));
      return send(() => sendJson(res, 500, { status: 'unknown', message: 'Injected fault' }));
    }
    if (read.tooLarge) return send(() => sendText(res, 413, 'Request Entity Too Large'));
    const binary = isBinaryContentType(req.headers['content-type']);

    if (envelopeRoute === undefined) {
      const authenticated = this.deps.auth.authenticates(req.headers.authorization);
      const result = this.deps.tokens.refresh(read.body.toString('utf8'), authenticated);
      if (result.http !== 200) return send(() => sendJson(res, result.http, result.json));
      const sealed = encryptRefreshResponse(result.responseKey, JSON.stringify(result.json));
      return send(() => sendSealed(res, sealed, binary ? 'binary' : 'text'));
    }

    if (!this.deps.auth.authorizes(req.headers.authorization, envelopeRoute.roles)) {
      return send(() => sendJson(res, 401, { status: 'unauthorized' }));
    }
    // Envelopes follow the service's wall clock, not identity time: /_local/clock jumps must not lock out real clients.
    const opened = this.deps.gate.open(read.body, binary, this.deps.clock.envelopeNowMs());
    if (!opened.ok) return send(() => sendJson(res, 400, { status: 'client_error', message: opened.message }));
    const items = envelopeRoute.countItems(opened.json);
    stats.countItems(path, items);
    if (envelopeRoute.isMap && !this.deps.faults.admitMapItems(items)) {
      stats.countFault('rateLimited');
      return send(() => sendBare(res, 429));
    }
    const nowMs = this.deps.clock.nowMs();
    const ctx: HandlerContext = {
      engine: this.deps.engine,
      at: this.deps.engine.instant(nowMs),
      maxMapItems: this.deps.maxMapItems,
    };
    const answer = envelopeRoute.handle(opened.json, ctx, this.deps.tokens);
    if (answer.http !== 200) return send(() => sendJson(res, answer.http, answer.json));
    const text = typeof answer.json === 'string' ? answer.json : JSON.stringify(answer.json);
    const sealed = encryptResponse(this.deps.clientKey, opened.nonce, text, {
      nowMs: Math.floor(this.deps.clock.envelopeNowMs()),
    });
    return send(() => sendSealed(res, sealed, opened.mode));
  }

  /** Every API answer waits the configured latency (and a drop waits too: a slow network that then fails). */
  private later(write: () => void): void {
    const delay = this.deps.faults.latencyMs;
    if (delay <= 0) {
      write();
      return;
    }
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      write();
    }, delay);
    this.timers.add(timer);
  }

  private internalError(res: ServerResponse): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    sendJson(res, 500, { status: 'unknown', message: 'Unknown error in the local service' });
  }
}

/** The body, or null when the client went away. Bytes past the 1 MB limit are read and dropped. */
function readBody(req: IncomingMessage): Promise<BodyRead> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (value: BodyRead) => {
      if (!settled) {
        settled = true;
        resolve(value);
      }
    };
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
      else if (size > DRAIN_LIMIT) {
        req.socket.destroy();
        settle(null);
      }
    });
    req.on('end', () =>
      settle({ body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks), tooLarge: size > MAX_BODY_BYTES }),
    );
    req.on('error', () => settle(null));
    req.on('close', () => settle(null));
  });
}

function sendJson(res: ServerResponse, status: number, json: unknown): void {
  const text = JSON.stringify(json);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function sendBare(res: ServerResponse, status: number): void {
  res.writeHead(status, { 'Content-Length': 0 });
  res.end();
}

function sendSealed(res: ServerResponse, sealed: Buffer, mode: BodyMode): void {
  if (mode === 'binary') {
    res.writeHead(200, { 'Content-Type': BINARY_CONTENT_TYPE, 'Content-Length': sealed.length });
    res.end(sealed);
    return;
  }
  const text = sealed.toString('base64');
  res.writeHead(200, { 'Content-Type': TEXT_CONTENT_TYPE, 'Content-Length': text.length });
  res.end(text);
}
