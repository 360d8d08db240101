import { IDENTIFIER_KINDS, type IdentifierKind } from '../../identity/index.js';
import { PAYLOAD_TOO_LARGE, clientError, success, type ApiAnswer, type HandlerContext } from './answer.js';

/**
 * POST /v2/identity/map (docs/wire-protocol.md §5.4): exactly one non-empty identity array; mapped and unmapped lists
 * in input order; `identifier` echoes the value as sent; `unmapped` is left out when empty.
 */

const EXACTLY_ONE =
  'Required Parameter Missing: exactly one of [email, email_hash, phone, phone_hash] must be specified';

export function handleMapV2(request: Record<string, unknown> | null, ctx: HandlerContext): ApiAnswer {
  // The operator fails with a 500 on a request without JSON; here it is the caller's mistake, said as such.
  if (request === null) return clientError(EXACTLY_ONE);
  let chosen: { kind: IdentifierKind; values: unknown[] } | null = null;
  let anyPresent = false;
  for (const kind of IDENTIFIER_KINDS) {
    const value = request[kind];
    if (value === undefined || value === null) continue;
    if (!Array.isArray(value)) return clientError(`${kind} must be an array`);
    anyPresent = true;
    if (value.length === 0) continue;
    if (chosen !== null) return clientError(EXACTLY_ONE);
    chosen = { kind, values: value };
  }
  if (!anyPresent) return clientError(EXACTLY_ONE);
  if (chosen === null) return success('{"mapped":[]}');
  const { kind, values } = chosen;
  for (const value of values) {
    if (value !== null && typeof value === 'object') return clientError(`${kind} must be an array of strings`);
  }
  if (values.length > ctx.maxMapItems) return clientError(PAYLOAD_TOO_LARGE);

  const { engine, at } = ctx;
  const mapped: string[] = [];
  const unmapped: string[] = [];
  for (const value of values) {
    // null and other scalars cannot be identifiers; the operator echoes null as "null".
    const identifier = typeof value === 'string' ? value : String(value);
    const echo = JSON.stringify(identifier);
    const item = typeof value === 'string' ? engine.resolve(kind, value, at) : null;
    if (item === null || item.kind === 'invalid') {
      unmapped.push(`{"identifier":${echo},"reason":"invalid identifier"}`);
    } else if (item.kind === 'optout') {
      unmapped.push(`{"identifier":${echo},"reason":"optout"}`);
    } else {
      mapped.push(
        `{"identifier":${echo},"advertising_id":"${item.u}","bucket_id":"${engine.buckets.bucketId(item.bucket)}"}`,
      );
    }
  }
  const body =
    unmapped.length === 0
      ? `{"mapped":[${mapped.join(',')}]}`
      : `{"mapped":[${mapped.join(',')}],"unmapped":[${unmapped.join(',')}]}`;
  return success(body);
}
