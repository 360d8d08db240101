import {
  EnvelopeError,
  MIN_REQUEST_ENVELOPE_LENGTH,
  decodeStrictBase64,
  decryptRequest,
  type BodyMode,
} from '../protocol/index.js';
import type { IdentityScope } from './contracts.js';

/**
 * Opens a request envelope the way the operator does (docs/wire-protocol.md §2.3-2.4): the same checks in the same
 * order with the same messages, including the binary-then-base64 fallback and the unencrypted-JSON diagnosis.
 */

export type OpenedEnvelope =
  | {
      ok: true;
      nonce: Buffer;
      /** The request JSON object, or null when the plaintext carried no JSON (exactly 16 bytes). */
      json: Record<string, unknown> | null;
      /** How to answer: binary only when the request really was binary. */
      mode: BodyMode;
    }
  | { ok: false; message: string };

const DOCS_HOST: Record<IdentityScope, string> = { UID2: 'https://unifiedid.com', EUID: 'https://euid.eu' };
const TIMESTAMP_DRIFT_MINUTES = 1;

export function envelopeMessages(scope: IdentityScope) {
  const docs = `${DOCS_HOST[scope]}/docs/getting-started/gs-encryption-decryption`;
  const hint = ` See ${docs} for details on the request envelope format.`;
  return {
    missing: 'Invalid body: Body is missing.',
    unencryptedJson: `Invalid body: The request body is unencrypted JSON. It must be an encrypted request envelope. See ${docs}#encryption-and-decryption-code-examples for encryption and decryption code examples.`,
    notBase64: `Invalid body: Body is not valid base64.${hint}`,
    tooShort: `Invalid body: Body too short. Check encryption method.${hint}`,
    version: (received: number) =>
      `Invalid body: Invalid request envelope format version: received ${received}, must be 1.${hint}`,
    wrongKey: `Invalid body: Check encryption key (ClientSecret).${hint}`,
    timestamp: 'Invalid timestamp: Request too old or client time drift.',
    notJson: 'Invalid payload in body: Data is not valid json string.',
  };
}

type Messages = ReturnType<typeof envelopeMessages>;

export class EnvelopeGate {
  private readonly messages: Messages;

  constructor(
    scope: IdentityScope,
    private readonly key: Buffer,
  ) {
    this.messages = envelopeMessages(scope);
  }

  /** `nowMs` is the service's envelope time (real time plus the start offset), not its identity time. */
  open(body: Buffer, binary: boolean, nowMs: number): OpenedEnvelope {
    if (body.length === 0) return this.fail(this.messages.missing);
    if (binary) {
      const attempt = this.openBytes(body, nowMs, 'binary');
      if (attempt.ok || attempt.afterDecryption) return attempt.result;
      // A binary parse that failed before decryption gets a second chance as base64 text, answered as text.
      const decoded = decodeStrictBase64(body.toString('latin1'));
      if (decoded === null) return attempt.result;
      return this.openBytes(decoded, nowMs, 'text').result;
    }
    const text = body.toString('utf8');
    const decoded = decodeStrictBase64(text);
    if (decoded === null)
      return this.fail(parsesAsJson(text) ? this.messages.unencryptedJson : this.messages.notBase64);
    return this.openBytes(decoded, nowMs, 'text').result;
  }

  private openBytes(
    bytes: Buffer,
    nowMs: number,
    mode: BodyMode,
  ): { ok: boolean; afterDecryption: boolean; result: OpenedEnvelope } {
    const early = (message: string) => ({ ok: false, afterDecryption: false, result: this.fail(message) });
    const late = (message: string) => ({ ok: false, afterDecryption: true, result: this.fail(message) });
    if (bytes.length === 0) return early(this.messages.missing);
    if (bytes.length < MIN_REQUEST_ENVELOPE_LENGTH) {
      return early(parsesAsJson(bytes.toString('utf8')) ? this.messages.unencryptedJson : this.messages.tooShort);
    }
    if (bytes[0] !== 1) {
      return early(
        parsesAsJson(bytes.toString('utf8')) ? this.messages.unencryptedJson : this.messages.version(bytes[0]!),
      );
    }
    let opened: ReturnType<typeof decryptRequest>;
    try {
      opened = decryptRequest(this.key, bytes);
    } catch (err) {
      if (err instanceof EnvelopeError) return early(this.messages.wrongKey);
      throw err;
    }
    if (outsideWindow(opened.timestampMs, nowMs)) return late(this.messages.timestamp);
    let json: Record<string, unknown> | null = null;
    if (opened.json.length > 0) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(opened.json.toString('utf8'));
      } catch {
        return late(this.messages.notJson);
      }
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return late(this.messages.notJson);
      json = parsed as Record<string, unknown>;
    }
    return { ok: true, afterDecryption: true, result: { ok: true, nonce: opened.nonce, json, mode } };
  }

  private fail(message: string): OpenedEnvelope {
    return { ok: false, message };
  }
}

/**
 * The operator takes the Duration between the envelope time and its clock, truncates it to whole minutes
 * (seconds floored first, as java.time does) and refuses more than one minute either way.
 */
export function outsideWindow(envelopeMs: number, nowMs: number): boolean {
  const seconds = Math.floor((nowMs - envelopeMs) / 1000);
  const minutes = Math.trunc(seconds / 60);
  return Math.abs(minutes) > TIMESTAMP_DRIFT_MINUTES;
}

/** What a caller who skipped encryption sends: a JSON object or array. */
function parsesAsJson(text: string): boolean {
  const first = text.trimStart().charCodeAt(0);
  if (first !== 123 && first !== 91) return false;
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object';
  } catch {
    return false;
  }
}
