import { UnexpectedResponseError, type ServiceClient } from '../../client/index.js';
import {
  PATHS,
  type MapV2Request,
  type MapV2ResponseBody,
  type MapV3Item,
  type MapV3Request,
  type MapV3ResponseBody,
} from '../../protocol/index.js';
import { BucketAnswer } from '../map/bucket-answer.js';

/**
 * POST /v2/identity/map behind the batch seam of the map and remap engines. The engines build v3-shaped batches
 * (email and phone hashes mixed); v2 takes exactly one identity kind per request (docs/wire-protocol.md §5.4), so a
 * batch is sent as one request per kind, one after the other: a batch never holds more than one request slot,
 * so the engine's limit on requests in flight still holds. The answers come back as a v3-shaped body whose
 * mapped items are BucketAnswers (raw UID + salt bucket).
 */

const KINDS = ['email', 'email_hash', 'phone', 'phone_hash'] as const;
type Kind = (typeof KINDS)[number];

/** Same signature as the engines' MapBatchFn / RemapBatchFn. */
export type MapBatchV2Fn = (request: MapV3Request, signal: AbortSignal) => Promise<MapV3ResponseBody>;

export function mapBatchV2(client: Pick<ServiceClient, 'mapV2'>): MapBatchV2Fn {
  return async (request, signal) => {
    const body: MapV3ResponseBody = { email: [], email_hash: [], phone: [], phone_hash: [] };
    for (const kind of KINDS) {
      const sent = request[kind];
      if (sent === undefined || sent.length === 0) continue;
      const answer = await client.mapV2(v2Request(kind, sent), { signal });
      body[kind] = joinByPosition(sent, answer);
    }
    return body;
  };
}

function v2Request(kind: Kind, values: string[]): MapV2Request {
  switch (kind) {
    case 'email':
      return { email: values };
    case 'email_hash':
      return { email_hash: values };
    case 'phone':
      return { phone: values };
    case 'phone_hash':
      return { phone_hash: values };
  }
}

/**
 * The answer of each sent value, by position. v2 lists `mapped` and `unmapped` apart, each in input order (the
 * interleaving is lost), and echoes every value as sent. So the input is walked once and each value takes the
 * head of whichever list echoes it next. A lookup keyed by the echoed string would be wrong: the same value can
 * be sent twice, and each copy must take its own answer.
 */
export function joinByPosition(sent: readonly string[], answer: MapV2ResponseBody): MapV3Item[] {
  const mapped = answer.mapped;
  const unmapped = answer.unmapped ?? [];
  if (mapped.length + unmapped.length !== sent.length) {
    throw mismatch(`${mapped.length} mapped and ${unmapped.length} unmapped items for ${sent.length} sent`);
  }
  const out = new Array<MapV3Item>(sent.length);
  let m = 0;
  let n = 0;
  for (let i = 0; i < sent.length; i++) {
    const value = sent[i];
    const nextMapped = m < mapped.length ? mapped[m] : undefined;
    if (nextMapped !== undefined && nextMapped.identifier === value) {
      if (typeof nextMapped.advertising_id !== 'string' || typeof nextMapped.bucket_id !== 'string') {
        throw mismatch(`mapped item ${m + 1} has no advertising_id or bucket_id`);
      }
      out[i] = new BucketAnswer(nextMapped.advertising_id, nextMapped.bucket_id);
      m++;
      continue;
    }
    const nextUnmapped = n < unmapped.length ? unmapped[n] : undefined;
    if (nextUnmapped !== undefined && nextUnmapped.identifier === value) {
      if (typeof nextUnmapped.reason !== 'string') throw mismatch(`unmapped item ${n + 1} has no reason`);
      out[i] = { e: nextUnmapped.reason };
      n++;
      continue;
    }
    // answers pinned to the wrong rows would be worse than no answers: the whole request fails
    throw mismatch(`item ${i + 1} of ${sent.length} sent is neither the next mapped nor the next unmapped identifier`);
  }
  return out;
}

function mismatch(detail: string): UnexpectedResponseError {
  return new UnexpectedResponseError(PATHS.mapV2, `the v2 map answer does not line up with the request: ${detail}`);
}
