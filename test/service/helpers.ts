import { request } from 'undici';
import { decodeBody, decodeKey, decryptResponse, encryptRequest, type BodyMode } from '../../src/protocol/index.js';
import type { LocalService } from '../../src/service/index.js';

/**
 * An independent caller of the local service: it speaks the wire protocol with the protocol layer's functions
 * over real HTTP, as any client would, and shows tests exactly what came back.
 */

export interface RawAnswer {
  status: number;
  contentType: string | undefined;
  body: Buffer;
  text: string;
}

export async function post(
  service: Pick<LocalService, 'url'>,
  path: string,
  body: Buffer | string,
  headers: Record<string, string> = {},
): Promise<RawAnswer> {
  const res = await request(`${service.url}${path}`, { method: 'POST', body, headers });
  const buf = Buffer.from(await res.body.arrayBuffer());
  const ct = res.headers['content-type'];
  return { status: res.statusCode, contentType: Array.isArray(ct) ? ct[0] : ct, body: buf, text: buf.toString('utf8') };
}

export async function get(service: Pick<LocalService, 'url'>, path: string): Promise<RawAnswer> {
  const res = await request(`${service.url}${path}`, { method: 'GET' });
  const buf = Buffer.from(await res.body.arrayBuffer());
  const ct = res.headers['content-type'];
  return { status: res.statusCode, contentType: Array.isArray(ct) ? ct[0] : ct, body: buf, text: buf.toString('utf8') };
}

export interface CallOptions {
  mode?: BodyMode;
  /** Envelope time; default the service's envelope time (real time plus its start offset, not identity time). */
  nowMs?: number;
  apiKey?: string;
  secret?: string;
}

export type Decrypted =
  | { status: 200; json: Record<string, unknown>; raw: RawAnswer }
  | { status: number; json: unknown; raw: RawAnswer };

/** Encrypts `json`, posts it with the service's key, decrypts a 200 and parses anything else as JSON. */
export async function call(
  service: Pick<LocalService, 'url' | 'apiKey' | 'clientSecret' | 'envelopeNowMs'>,
  path: string,
  json: unknown,
  options: CallOptions = {},
): Promise<Decrypted> {
  const key = decodeKey(options.secret ?? service.clientSecret);
  const text = typeof json === 'string' ? json : JSON.stringify(json);
  const { envelope, nonce } = encryptRequest(key, text, { nowMs: options.nowMs ?? service.envelopeNowMs() });
  const mode = options.mode ?? 'text';
  const raw = await post(service, path, mode === 'binary' ? envelope : envelope.toString('base64'), {
    authorization: `Bearer ${options.apiKey ?? service.apiKey}`,
    'content-type': mode === 'binary' ? 'application/octet-stream' : 'text/plain',
  });
  if (raw.status === 200) {
    const opened = decryptResponse(key, decodeBody(raw.body, raw.contentType), nonce);
    return { status: 200, json: JSON.parse(opened.json.toString('utf8')) as Record<string, unknown>, raw };
  }
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(raw.text);
  } catch {
    parsed = raw.text;
  }
  return { status: raw.status, json: parsed, raw };
}

/** The decrypted body of a 200 success, or a failed expectation with what came instead. */
export async function body<T = unknown>(
  service: Pick<LocalService, 'url' | 'apiKey' | 'clientSecret' | 'envelopeNowMs'>,
  path: string,
  json: unknown,
  options: CallOptions = {},
): Promise<T> {
  const answer = await call(service, path, json, options);
  if (answer.status !== 200) throw new Error(`expected 200 from ${path}, got ${answer.status}: ${answer.raw.text}`);
  const envelope = answer.json as { status?: string; body?: T };
  if (envelope.status !== 'success') throw new Error(`expected success from ${path}, got ${JSON.stringify(envelope)}`);
  return envelope.body as T;
}

export async function admin(
  service: Pick<LocalService, 'url'>,
  path: string,
  json?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const raw =
    json === undefined
      ? await get(service, path)
      : await post(service, path, JSON.stringify(json), { 'content-type': 'application/json' });
  return { status: raw.status, json: JSON.parse(raw.text) as Record<string, unknown> };
}

export const DAY_MS = 86_400_000;
