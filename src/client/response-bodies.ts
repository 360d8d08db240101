import {
  IDENTITY_STRING_FIELDS,
  IDENTITY_TIME_FIELDS,
  pickTokenIdentity,
  type MapV2ResponseBody,
  type MapV3Request,
  type MapV3ResponseBody,
  type OptedOutItem,
  type ResponseJson,
  type SaltBucket,
  type TokenResult,
} from '../protocol/index.js';
import { UnexpectedResponseError } from './errors.js';

/**
 * Checks the decrypted JSON of each endpoint before it is handed out typed. Only the shape is checked (arrays where
 * arrays are promised, one answer per request item), not every element: the pipeline reads the elements anyway,
 * and a 5,000-item walk here would be paid twice.
 */

const V3_KINDS = ['email', 'email_hash', 'phone', 'phone_hash'] as const;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** JSON text -> `{status, body?, message?}`; `accepted` lists the statuses this endpoint answers with on 200. */
export function readResponseJson(target: string, json: Buffer, accepted: readonly string[]): ResponseJson {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json.toString('utf8'));
  } catch {
    throw new UnexpectedResponseError(target, 'the decrypted answer is not JSON');
  }
  if (!isObject(parsed) || typeof parsed.status !== 'string') {
    throw new UnexpectedResponseError(target, 'the decrypted answer has no "status"');
  }
  const message = typeof parsed.message === 'string' ? parsed.message : undefined;
  if (!accepted.includes(parsed.status)) {
    const detail = `status "${parsed.status}"${message ? `: ${message}` : ''}`;
    throw new UnexpectedResponseError(target, detail, parsed.status);
  }
  return { status: parsed.status, body: parsed.body, message };
}

export function readMapV3Body(target: string, body: unknown, request: MapV3Request): MapV3ResponseBody {
  if (!isObject(body)) throw new UnexpectedResponseError(target, 'the v3 map body is not an object');
  for (const kind of V3_KINDS) {
    const answers = body[kind];
    if (!Array.isArray(answers)) throw new UnexpectedResponseError(target, `the v3 map body has no "${kind}" array`);
    const sent = request[kind]?.length ?? 0;
    if (answers.length !== sent) {
      // answers are matched to inputs by index, so a length mismatch would pin raw IDs on the wrong rows
      throw new UnexpectedResponseError(
        target,
        `the v3 map answered ${answers.length} "${kind}" items for ${sent} sent`,
      );
    }
  }
  return body as unknown as MapV3ResponseBody;
}

export function readMapV2Body(target: string, body: unknown): MapV2ResponseBody {
  if (!isObject(body) || !Array.isArray(body.mapped)) {
    throw new UnexpectedResponseError(target, 'the v2 map body has no "mapped" array');
  }
  if (body.unmapped === undefined) return { mapped: body.mapped as MapV2ResponseBody['mapped'] };
  if (!Array.isArray(body.unmapped)) throw new UnexpectedResponseError(target, 'the v2 map "unmapped" is not an array');
  return {
    mapped: body.mapped as MapV2ResponseBody['mapped'],
    unmapped: body.unmapped as MapV2ResponseBody['unmapped'],
  };
}

export function readBucketsBody(target: string, body: unknown): SaltBucket[] {
  if (!Array.isArray(body)) throw new UnexpectedResponseError(target, 'the buckets body is not an array');
  return body as SaltBucket[];
}

export function readOptoutStatusBody(target: string, body: unknown): OptedOutItem[] {
  if (!isObject(body) || !Array.isArray(body.opted_out)) {
    throw new UnexpectedResponseError(target, 'the opt-out status body has no "opted_out" array');
  }
  return body.opted_out as OptedOutItem[];
}

export function readValidateBody(target: string, body: unknown): boolean {
  if (typeof body !== 'boolean') throw new UnexpectedResponseError(target, 'the validate body is not true or false');
  return body;
}

/** `success` with the token identity of docs/wire-protocol.md §5.1, or `optout` (generate and refresh alike). */
export function readTokenResult(target: string, answer: ResponseJson): TokenResult {
  if (answer.status === 'optout') return { status: 'optout' };
  const body = answer.body;
  if (!isObject(body)) throw new UnexpectedResponseError(target, 'a token "success" answer without an identity');
  for (const field of IDENTITY_STRING_FIELDS) {
    if (typeof body[field] !== 'string' || body[field] === '') {
      throw new UnexpectedResponseError(target, `the identity has no "${field}"`);
    }
  }
  for (const field of IDENTITY_TIME_FIELDS) {
    if (typeof body[field] !== 'number')
      throw new UnexpectedResponseError(target, `the identity has no numeric "${field}"`);
  }
  return { status: 'success', identity: pickTokenIdentity(body) };
}
