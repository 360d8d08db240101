import type { AddressInfo } from 'node:net';
import { ApiKeyAuthority } from './auth.js';
import { SimulatedClock } from './clock.js';
import { LocalIdentityEngine } from './engine.js';
import { EnvelopeGate } from './envelope-gate.js';
import { FaultInjector } from './faults.js';
import { HttpCore } from './http-server.js';
import { loadOptoutFile } from './optout-input.js';
import { OptoutRegistry } from './optout-registry.js';
import { resolveOptions, type ServiceOptions } from './options.js';
import { ServiceStats, type ServiceStatsSnapshot } from './stats.js';
import { createTokenHandlers } from './tokens/index.js';

/**
 * The local identity service: a faithful stand-in for the UID2/EUID operator on loopback, for tests, demos
 * and `--env local`. Each instance owns its state (no process-global state), so several can run in one process.
 */

export interface LocalService {
  /** Base URL, e.g. http://127.0.0.1:PORT (no trailing slash). */
  readonly url: string;
  readonly apiKey: string;
  readonly clientSecret: string;
  readonly port: number;
  /** Stops listening and ends every connection, including keep-alive ones. */
  close(): Promise<void>;
  /** Identity time, Unix ms: what salts, rotation, r, p, token times and opt-outs are computed at (POST /_local/clock moves it). */
  nowMs(): number;
  /**
   * Envelope time, Unix ms: real time plus the offset of the start time (`nowMs` option). Request envelopes must be
   * within ±2 minutes of it and response envelopes carry it; moving identity time later does not move it.
   */
  envelopeNowMs(): number;
  stats(): ServiceStatsSnapshot;
}

export async function startService(options: ServiceOptions = {}): Promise<LocalService> {
  const resolved = resolveOptions(options);
  const clock = new SimulatedClock(resolved.nowMs);
  const registry = new OptoutRegistry();
  const engine = new LocalIdentityEngine(resolved.seed, resolved.scope, registry);
  if (resolved.optoutFile !== undefined) loadOptoutFile(resolved.optoutFile, engine, clock.nowMs());
  const stats = new ServiceStats();
  const core = new HttpCore({
    clock,
    engine,
    tokens: createTokenHandlers({ engine, clock, lifetimes: resolved.lifetimes, seed: resolved.seed }),
    stats,
    faults: new FaultInjector(resolved.faults, resolved.seed, resolved.maxMapItems),
    auth: new ApiKeyAuthority(resolved.apiKey, resolved.roles),
    gate: new EnvelopeGate(resolved.scope, resolved.clientKey),
    clientKey: resolved.clientKey,
    maxMapItems: resolved.maxMapItems,
  });
  const server = core.server;
  await new Promise<void>((resolve, reject) => {
    const fail = (err: Error) => reject(err);
    server.once('error', fail);
    server.listen(resolved.port, resolved.host, () => {
      server.off('error', fail);
      resolve();
    });
  });
  // After start, a server-level error (rare: e.g. out of file descriptors) must not end an embedding process.
  server.on('error', () => undefined);
  const port = (server.address() as AddressInfo).port;
  const host = resolved.host.includes(':') ? `[${resolved.host}]` : resolved.host;
  let closing: Promise<void> | null = null;
  return {
    url: `http://${host}:${port}`,
    apiKey: resolved.apiKey,
    clientSecret: resolved.clientSecret,
    port,
    close() {
      closing ??= new Promise<void>((resolve) => {
        core.cancelPending();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
    nowMs: () => clock.nowMs(),
    envelopeNowMs: () => clock.envelopeNowMs(),
    stats: () => stats.snapshot(clock.nowMs()),
  };
}

export type { ServiceOptions } from './options.js';
export { ServiceSetupError, DEFAULT_SEED, DEFAULT_LIFETIMES, DEFAULT_MAX_MAP_ITEMS } from './options.js';
export type { FaultOptions } from './faults.js';
export type { Role } from './auth.js';
export type { ServiceStatsSnapshot } from './stats.js';
export { parseInstantMs } from '../protocol/index.js';
export type { IdentityScope, TokenLifetimes } from './contracts.js';
