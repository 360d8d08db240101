import { spawn, type ChildProcess } from 'node:child_process';
import { createServiceClient, type ServiceClient } from '../../src/client/index.js';
import { envFingerprint, resolveConfig } from '../../src/config/index.js';
import type { DiiType } from '../../src/identity/index.js';
import { isMappedV3, type MapV3Item } from '../../src/protocol/index.js';
import { openState, type EntryUpdate } from '../../src/state/index.js';
import { BIN, ROOT } from './map-e2e-build.js';
import { lookupMany, type StoredEntry } from '../state/lookups.js';

/**
 * e2e harness of remap-due and optout-check: `serve` in its own process, the built CLI in others.
 *
 * Simulated days move the service's identity time only (POST /_local/clock); its envelope clock stays on real
 * time, so the CLI and the test's own client run on the real clock. What the CLI plans against (remap-due's due
 * selection) is given with its own --now, set to the service's identity time.
 */

export interface Served {
  url: string;
  apiKey: string;
  clientSecret: string;
  pid: number;
  stop(): Promise<void>;
}

export async function startServe(args: string[] = []): Promise<Served> {
  const child = spawn(process.execPath, [BIN, 'serve', ...(args.includes('--port') ? [] : ['--port', '0']), ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    const onData = (d: Buffer): void => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) {
        child.stdout?.off('data', onData);
        resolve(out.slice(0, nl));
      }
    };
    child.stdout?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`serve exited with ${code} before it was ready: ${stderr}`)));
  });
  const ready = JSON.parse(line) as { url: string; api_key: string; client_secret: string };
  return {
    url: ready.url,
    apiKey: ready.api_key,
    clientSecret: ready.client_secret,
    pid: child.pid as number,
    stop: () => stopChild(child),
  };
}

export function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      if (child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
    }, 5_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    if (child.pid !== undefined) process.kill(child.pid, 'SIGTERM');
  });
}

async function admin(url: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(
    `${url}${path}`,
    body === undefined
      ? {}
      : { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } },
  );
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status} ${JSON.stringify(json)}`);
  return json;
}

export async function serviceNowMs(url: string): Promise<number> {
  return (await admin(url, '/_local/clock')).now_ms as number;
}

export async function advanceDays(url: string, days: number): Promise<number> {
  return (await admin(url, '/_local/clock', { advance_days: days })).now_ms as number;
}

/** Sets the service's identity time (an ISO 8601 instant); answers it in ms. */
export async function setServiceTime(url: string, iso: string): Promise<number> {
  return (await admin(url, '/_local/clock', { set: iso })).now_ms as number;
}

export interface ServiceStats {
  requests: Record<string, number>;
  items: Record<string, number>;
}

export async function serviceStats(url: string): Promise<ServiceStats> {
  const s = await admin(url, '/_local/stats');
  return { requests: s.requests as Record<string, number>, items: s.items as Record<string, number> };
}

export async function optOut(url: string, body: Record<string, unknown>): Promise<void> {
  await admin(url, '/_local/optout', body);
}

/** A client for the test itself, on the real clock like the CLI. */
export function testClient(served: Served): ServiceClient {
  return createServiceClient({ baseUrl: served.url, apiKey: served.apiKey, clientSecret: served.clientSecret });
}

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  served?: Served;
  env?: NodeJS.ProcessEnv;
  /** Called with the child as soon as it is spawned (to signal it, or to watch it). */
  onSpawn?: (child: ChildProcess) => void;
  timeoutMs?: number;
}

/** Runs the built CLI with the service's credentials in its environment (never in argv). */
export async function runCli(args: string[], options: CliOptions = {}): Promise<CliRun> {
  const served = options.served;
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' };
  delete env.UID2_ENV;
  delete env.UID2_PROFILE;
  if (served !== undefined) {
    env.UID2_API_KEY = served.apiKey;
    env.UID2_CLIENT_SECRET = served.clientSecret;
    env.UID2_BASE_URL = served.url;
  }
  Object.assign(env, options.env);
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  options.onSpawn?.(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => {
    if (child.pid !== undefined && child.exitCode === null) process.kill(child.pid, 'SIGKILL');
  }, options.timeoutMs ?? 60_000);
  const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, stdout, stderr };
}

export interface StoredKey {
  type: DiiType;
  hash: string;
}

/** The fingerprint `remap-due` computes for a service on loopback. */
export function loopbackFingerprint(served: Served): string {
  return envFingerprint(
    resolveConfig(
      { baseUrl: served.url },
      { UID2_API_KEY: served.apiKey, UID2_CLIENT_SECRET: served.clientSecret },
      {
        readFile: () => {
          throw Object.assign(new Error('no config file'), { code: 'ENOENT' });
        },
      },
    ),
  );
}

/**
 * A state file as `map --state` makes it: the keys mapped through /v3/identity/map and each answered batch
 * committed in one transaction, stamped with the service's identity time.
 */
export async function buildState(path: string, served: Served, keys: readonly StoredKey[]): Promise<void> {
  const client = testClient(served);
  const state = openState(path, { envFingerprint: loopbackFingerprint(served) });
  try {
    for (let i = 0; i < keys.length; i += 5000) {
      const slice = keys.slice(i, i + 5000);
      const email = slice.filter((k) => k.type === 'email');
      const phone = slice.filter((k) => k.type === 'phone');
      const body = await client.mapV3({ email_hash: email.map((k) => k.hash), phone_hash: phone.map((k) => k.hash) });
      const updates: EntryUpdate[] = [];
      const take = (k: StoredKey, item: MapV3Item): void => {
        updates.push({
          type: k.type,
          hash: k.hash,
          outcome: isMappedV3(item)
            ? { kind: 'mapped', u: item.u, p: item.p, r: item.r }
            : { kind: item.e === 'optout' ? 'optout' : 'invalid' },
        });
      };
      for (const [j, k] of email.entries()) take(k, body.email_hash[j]);
      for (const [j, k] of phone.entries()) take(k, body.phone_hash[j]);
      state.commitBatch(updates, Math.floor((await serviceNowMs(served.url)) / 1000));
    }
  } finally {
    state.close();
    await client.close();
  }
}

/** Every stored entry of these keys, read-only. */
export function readEntries(path: string, served: Served, keys: readonly StoredKey[]): Map<string, StoredEntry> {
  const state = openState(path, { envFingerprint: loopbackFingerprint(served), readonly: true });
  try {
    return lookupMany(state, keys);
  } finally {
    state.close();
  }
}
