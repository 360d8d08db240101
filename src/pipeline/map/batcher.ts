import type { DiiType } from '../../identity/index.js';
import { MAX_BODY_BYTES, MAX_ITEMS_PER_REQUEST, type MapV3Request } from '../../protocol/index.js';

/**
 * One v3 map request: email and phone hashes mixed, each array aligned with the ids (in the run's
 * IdentifierTable) of the identifiers that asked.
 */
export interface MapBatch {
  /** 1-based, in the order batches were sealed. */
  seq: number;
  readonly emailHashes: string[];
  readonly emailItems: number[];
  readonly phoneHashes: string[];
  readonly phoneItems: number[];
  /** Bytes of the request JSON (exact for hashes, which never need JSON escapes). */
  bytes: number;
}

// `{"email_hash":[],"phone_hash":[]}`
const EMPTY_REQUEST_BYTES = 33;
// Envelope overhead on top of the JSON: version, IV, time, nonce, tag (docs/wire-protocol.md §2.1-2.2).
const ENVELOPE_BYTES = 1 + 12 + 16 + 16;

/**
 * The largest request JSON that stays under the 1 MB body limit in both body modes: text mode sends the envelope
 * base64-encoded, which makes it 4/3 as big.
 */
export const MAX_REQUEST_JSON_BYTES = Math.floor(((MAX_BODY_BYTES - 4) * 3) / 4) - ENVELOPE_BYTES;

export function batchItemCount(batch: MapBatch): number {
  return batch.emailHashes.length + batch.phoneHashes.length;
}

/** The request body of a batch; arrays that would be empty are left out. */
export function batchRequest(batch: MapBatch): MapV3Request {
  const request: MapV3Request = {};
  if (batch.emailHashes.length > 0) request.email_hash = batch.emailHashes;
  if (batch.phoneHashes.length > 0) request.phone_hash = batch.phoneHashes;
  return request;
}

export interface BatchLimits {
  /** Items per request (default and maximum 5,000). */
  maxItems?: number;
  /** Request JSON bytes (default MAX_REQUEST_JSON_BYTES). */
  maxJsonBytes?: number;
}

/**
 * Fills requests up to the item limit and the byte limit, whichever comes first, and hands each one over as soon
 * as it is full. Kinds are mixed: v3 takes email and phone hashes in one request.
 */
export class BatchBuilder {
  readonly maxItems: number;
  readonly maxJsonBytes: number;
  private current: MapBatch | null = null;
  private sealed = 0;

  constructor(
    limits: BatchLimits,
    private readonly onSealed: (batch: MapBatch) => void,
  ) {
    this.maxItems = Math.min(MAX_ITEMS_PER_REQUEST, Math.max(1, limits.maxItems ?? MAX_ITEMS_PER_REQUEST));
    this.maxJsonBytes = limits.maxJsonBytes ?? MAX_REQUEST_JSON_BYTES;
  }

  /** Items in the batch being filled. */
  get openItems(): number {
    return this.current === null ? 0 : batchItemCount(this.current);
  }

  /** How many batches were sealed so far. */
  get sealedCount(): number {
    return this.sealed;
  }

  /** Adds identifier `id` of the run's table, of DII type `type`, whose hash is `hash`. */
  add(id: number, type: DiiType, hash: string): void {
    // `"<hash>",`: an item never needs escaping, so its length is its byte count
    const itemBytes = hash.length + 3;
    let batch = this.current;
    if (batch !== null && batch.bytes + itemBytes > this.maxJsonBytes) {
      this.seal();
      batch = null;
    }
    if (batch === null) {
      batch = { seq: 0, emailHashes: [], emailItems: [], phoneHashes: [], phoneItems: [], bytes: EMPTY_REQUEST_BYTES };
      this.current = batch;
    }
    if (type === 'email') {
      batch.emailHashes.push(hash);
      batch.emailItems.push(id);
    } else {
      batch.phoneHashes.push(hash);
      batch.phoneItems.push(id);
    }
    batch.bytes += itemBytes;
    if (batchItemCount(batch) >= this.maxItems) this.seal();
  }

  /** Hands over the batch being filled, if it has anything in it. */
  seal(): void {
    const batch = this.current;
    if (batch === null) return;
    this.current = null;
    if (batchItemCount(batch) === 0) return;
    batch.seq = ++this.sealed;
    this.onSealed(batch);
  }

  /** Drops the batch being filled (an interrupted run does not send it); returns its identifiers' ids. */
  discard(): number[] {
    const batch = this.current;
    this.current = null;
    return batch === null ? [] : [...batch.emailItems, ...batch.phoneItems];
  }
}
