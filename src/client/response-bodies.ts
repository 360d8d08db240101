import {
  IDENTITY_STRING_FIELDS,
  IDENTITY_TIME_FIELDS,
  pickTokenIdentity,
  type MapV2Request,
  type MapV2ResponseBody,
  type MapV3Request,
  type MapV3ResponseBody,
  type OptedOutItem,
  type ResponseJson,
  type SaltBucket,
  type TokenGenerateResult,
  type TokenResult,
  sentCount,
} from '../protocol/index.js';
import {
  bucketProblem,
  identityTimeProblem,
  OPTED_OUT_SINCE_MAX_AHEAD_MS,
  optedOutProblem,
  refreshWindow,
  v2MappedProblem,
  v2UnmappedProblem,
  v3ItemProblem,
} from './answer-items.js';
import { MalformedAnswerError, UnexpectedResponseError } from './errors.js';

/**
 * Checks the decrypted JSON of each endpoint before it is handed out typed: the shape (arrays where arrays are
 * promised, one answer per request item) and every item against the wire contract (answer-items.ts), in one pass.
 * What leaves here is what the pipeline stores and writes, unchecked again; a break is a MalformedAnswerError, which
 * the retry policy retries like a 5xx.
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
    throw new MalformedAnswerError(target, 'the decrypted answer is not JSON');
  }
  if (!isObject(parsed) || typeof parsed.status !== 'string') {
    throw new MalformedAnswerError(target, 'the decrypted answer has no "status"');
  }
  const message = typeof parsed.message === 'string' ? parsed.message : undefined;
  if (!accepted.includes(parsed.status)) {
    const detail = `status "${parsed.status}"${message ? `: ${message}` : ''}`;
    throw new UnexpectedResponseError(target, detail, parsed.status);
  }
  return { status: parsed.status, body: parsed.body, message };
}

export function readMapV3Body(target: string, body: unknown, request: MapV3Request, nowMs: number): MapV3ResponseBody {
  if (!isObject(body)) throw new MalformedAnswerError(target, 'the v3 map body is not an object');
  const window = refreshWindow(nowMs);
  for (const kind of V3_KINDS) {
    const answers = body[kind];
    if (!Array.isArray(answers)) throw new MalformedAnswerError(target, `the v3 map body has no "${kind}" array`);
    const sent = sentCount(request, kind);
    if (answers.length !== sent) {
      // answers are matched to inputs by index, so a length mismatch would pin raw IDs on the wrong rows
      throw new MalformedAnswerError(target, `the v3 map answered ${answers.length} "${kind}" items for ${sent} sent`);
    }
    for (let i = 0; i < answers.length; i++) {
      const problem = v3ItemProblem(answers[i], window);
      if (problem !== undefined) throw new MalformedAnswerError(target, `${kind} item ${i + 1} ${problem}`);
    }
  }
  return body as unknown as MapV3ResponseBody;
}

/**
 * The v2 body, its items checked and lined up with the values sent: v2 lists `mapped` and `unmapped` apart, each
 * in input order and echoing each value as sent, so every value sent must be the head of one of the two lists.
 */
export function readMapV2Body(target: string, body: unknown, request: MapV2Request): MapV2ResponseBody {
  if (!isObject(body) || !Array.isArray(body.mapped)) {
    throw new MalformedAnswerError(target, 'the v2 map body has no "mapped" array');
  }
  const mapped: unknown[] = body.mapped;
  const unmapped: unknown[] = body.unmapped === undefined ? [] : (body.unmapped as unknown[]);
  if (!Array.isArray(unmapped)) throw new MalformedAnswerError(target, 'the v2 map "unmapped" is not an array');
  for (let i = 0; i < mapped.length; i++) {
    const problem = v2MappedProblem(mapped[i]);
    if (problem !== undefined) throw new MalformedAnswerError(target, `mapped item ${i + 1} ${problem}`);
  }
  for (let i = 0; i < unmapped.length; i++) {
    const problem = v2UnmappedProblem(unmapped[i]);
    if (problem !== undefined) throw new MalformedAnswerError(target, `unmapped item ${i + 1} ${problem}`);
  }
  const sent = sentValues(request);
  if (mapped.length + unmapped.length !== sent.length) {
    throw new MalformedAnswerError(
      target,
      `the v2 map answered ${mapped.length} mapped and ${unmapped.length} unmapped items for ${sent.length} sent`,
    );
  }
  let m = 0;
  let n = 0;
  for (let i = 0; i < sent.length; i++) {
    if (m < mapped.length && (mapped[m] as { identifier: string }).identifier === sent[i]) m++;
    else if (n < unmapped.length && (unmapped[n] as { identifier: string }).identifier === sent[i]) n++;
    else {
      throw new MalformedAnswerError(
        target,
        `item ${i + 1} of ${sent.length} sent is neither the next mapped nor the next unmapped identifier`,
      );
    }
  }
  const checked = mapped as MapV2ResponseBody['mapped'];
  return body.unmapped === undefined
    ? { mapped: checked }
    : { mapped: checked, unmapped: unmapped as NonNullable<MapV2ResponseBody['unmapped']> };
}

function sentValues(request: MapV2Request): readonly string[] {
  for (const kind of V3_KINDS) {
    const values = (request as Partial<Record<(typeof V3_KINDS)[number], string[]>>)[kind];
    if (values !== undefined && values.length > 0) return values;
  }
  return [];
}

export function readBucketsBody(target: string, body: unknown): SaltBucket[] {
  if (!Array.isArray(body)) throw new MalformedAnswerError(target, 'the buckets body is not an array');
  for (let i = 0; i < body.length; i++) {
    const problem = bucketProblem(body[i]);
    if (problem !== undefined) throw new MalformedAnswerError(target, `bucket ${i + 1} ${problem}`);
  }
  return body as SaltBucket[];
}

/** Opted-out items, each naming one of the raw UIDs sent (`sent`) with a sane opted_out_since. */
export function readOptoutStatusBody(
  target: string,
  body: unknown,
  sent: readonly string[],
  nowMs: number,
): OptedOutItem[] {
  if (!isObject(body) || !Array.isArray(body.opted_out)) {
    throw new MalformedAnswerError(target, 'the opt-out status body has no "opted_out" array');
  }
  const items: unknown[] = body.opted_out;
  if (items.length > 0) {
    const asked = new Set(sent);
    const maxMs = nowMs + OPTED_OUT_SINCE_MAX_AHEAD_MS;
    for (let i = 0; i < items.length; i++) {
      const problem = optedOutProblem(items[i], asked, maxMs);
      if (problem !== undefined) throw new MalformedAnswerError(target, `opted_out item ${i + 1} ${problem}`);
    }
  }
  return items as OptedOutItem[];
}

export function readValidateBody(target: string, body: unknown): boolean {
  if (typeof body !== 'boolean') throw new MalformedAnswerError(target, 'the validate body is not true or false');
  return body;
}

/** A token generate answer: readTokenResult's, or `insufficient_user_consent` (EUID, docs/wire-protocol.md §5.1). */
export function readTokenGenerateResult(target: string, answer: ResponseJson): TokenGenerateResult {
  if (answer.status === 'insufficient_user_consent') return { status: 'insufficient_user_consent' };
  return readTokenResult(target, answer);
}

/** `success` with the token identity of docs/wire-protocol.md §5.1, or `optout` (generate and refresh alike). */
export function readTokenResult(target: string, answer: ResponseJson): TokenResult {
  if (answer.status === 'optout') return { status: 'optout' };
  const body = answer.body;
  if (!isObject(body)) throw new MalformedAnswerError(target, 'a token "success" answer without an identity');
  for (const field of IDENTITY_STRING_FIELDS) {
    if (typeof body[field] !== 'string' || body[field] === '') {
      throw new MalformedAnswerError(target, `the identity has no "${field}"`);
    }
  }
  for (const field of IDENTITY_TIME_FIELDS) {
    const problem = identityTimeProblem(body[field]);
    if (problem === 'is not a number') throw new MalformedAnswerError(target, `the identity has no numeric "${field}"`);
    if (problem !== undefined) throw new MalformedAnswerError(target, `the identity's "${field}" ${problem}`);
  }
  return { status: 'success', identity: pickTokenIdentity(body) };
}
