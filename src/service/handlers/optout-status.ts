import { MAX_ITEMS_PER_REQUEST } from '../../protocol/index.js';
import { PAYLOAD_TOO_LARGE, clientError, success, type ApiAnswer, type HandlerContext } from './answer.js';

/**
 * POST /v2/optout/status (docs/wire-protocol.md §5.6): only the opted-out raw UIDs, in input order, each with its
 * opt-out time in ms of whole seconds. Contents are not validated: an unknown string is simply not opted out.
 */
export function handleOptoutStatus(request: Record<string, unknown> | null, ctx: HandlerContext): ApiAnswer {
  if (request === null) return clientError('Invalid request body');
  const ids = request.advertising_ids;
  if (ids === undefined || ids === null) return clientError('Required Parameter Missing: advertising_ids');
  // The operator answers these two with a 500; they are the caller's mistake, so they are said as a 400 here.
  if (!Array.isArray(ids)) return clientError('advertising_ids must be an array of strings');
  if (ids.length > MAX_ITEMS_PER_REQUEST) return clientError(PAYLOAD_TOO_LARGE);
  if (ids.some((id) => id !== null && typeof id !== 'string'))
    return clientError('advertising_ids must be an array of strings');
  const registry = ctx.engine.registry;
  const items: string[] = [];
  for (const id of ids as (string | null)[]) {
    if (id === null) continue;
    const since = registry.rawUidOptedOutSince(id);
    if (since === undefined) continue;
    items.push(`{"advertising_id":${JSON.stringify(id)},"opted_out_since":${Math.floor(since / 1000) * 1000}}`);
  }
  return success(`{"opted_out":[${items.join(',')}]}`);
}

export function countOptoutStatusItems(request: Record<string, unknown> | null): number {
  const ids = request?.advertising_ids;
  return Array.isArray(ids) ? ids.length : 0;
}
