import { IDENTIFIER_KINDS, type IdentifierKind } from '../../identity/index.js';
import type { Resolution } from '../engine.js';
import { PAYLOAD_TOO_LARGE, clientError, success, type ApiAnswer, type HandlerContext } from './answer.js';

/**
 * POST /v3/identity/map (docs/wire-protocol.md §5.3). The operator binds the request strictly: unknown keys, null
 * elements and non-array values are "Incorrect request format"; an empty object is a missing parameter; every
 * answer has all four arrays, aligned index by index with the request's.
 */

const INCORRECT_FORMAT = 'Incorrect request format';
const REQUIRED = 'Required Parameter Missing: one or more of [email, email_hash, phone, phone_hash] must be specified';
/** Answer order of the four arrays. */
const ANSWER_ORDER: readonly IdentifierKind[] = ['email', 'email_hash', 'phone', 'phone_hash'];

export function handleMapV3(request: Record<string, unknown> | null, ctx: HandlerContext): ApiAnswer {
  if (request === null) return clientError(REQUIRED);
  const keys = Object.keys(request);
  if (keys.length === 0) return clientError(REQUIRED);
  const lists: Partial<Record<IdentifierKind, unknown[]>> = {};
  let total = 0;
  for (const key of keys) {
    if (!(IDENTIFIER_KINDS as readonly string[]).includes(key)) return clientError(INCORRECT_FORMAT);
    const value = request[key];
    if (value === null) continue;
    if (!Array.isArray(value)) return clientError(INCORRECT_FORMAT);
    for (const element of value) {
      // Jackson turns scalars into strings (an invalid identifier) but refuses null, objects and arrays.
      if (typeof element !== 'string' && typeof element !== 'number' && typeof element !== 'boolean') {
        return clientError(INCORRECT_FORMAT);
      }
    }
    lists[key as IdentifierKind] = value;
    total += value.length;
  }
  if (total > ctx.maxMapItems) return clientError(PAYLOAD_TOO_LARGE);

  const { engine, at } = ctx;
  let body = '{';
  for (let k = 0; k < ANSWER_ORDER.length; k++) {
    const kind = ANSWER_ORDER[k]!;
    body += k === 0 ? `"${kind}":[` : `],"${kind}":[`;
    const values = lists[kind];
    if (values === undefined) continue;
    for (let i = 0; i < values.length; i++) {
      const value = values[i];
      const item = typeof value === 'string' ? engine.resolve(kind, value, at) : INVALID;
      body += i === 0 ? itemJson(item) : `,${itemJson(item)}`;
    }
  }
  body += ']}';
  return success(body);
}

const INVALID: Resolution = { kind: 'invalid' };

function itemJson(item: Resolution): string {
  switch (item.kind) {
    case 'mapped':
      return item.p === null
        ? `{"u":"${item.u}","p":null,"r":${item.r}}`
        : `{"u":"${item.u}","p":"${item.p}","r":${item.r}}`;
    case 'optout':
      return '{"e":"optout"}';
    case 'invalid':
      return '{"e":"invalid identifier"}';
  }
}

/** Identifiers a map request carries, for the service's counters (whatever the request's validity). */
export function countMapItems(request: Record<string, unknown> | null): number {
  if (request === null) return 0;
  let n = 0;
  for (const kind of IDENTIFIER_KINDS) {
    const value = request[kind];
    if (Array.isArray(value)) n += value.length;
  }
  return n;
}
