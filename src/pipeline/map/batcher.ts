import type { DiiType } from '../../identity/index.js';
import { MapV3HashRequest, MAX_BODY_BYTES, MAX_ITEMS_PER_REQUEST } from '../../protocol/index.js';
import { HASH_WORDS, textWords } from './identifier-table.js';

/**
 * One v3 map request: email and phone hashes mixed, each kind's ids (in the run's IdentifierTable) of the
 * identifiers that asked, aligned with the request's hashes of that kind.
 */
export interface MapBatch {
  /** 1-based, in the order batches were sealed. */
  seq: number;
  readonly emailItems: number[];
  readonly phoneItems: number[];
  /** The request, its JSON written from the hashes' bytes when the batch was sealed. */
  request: MapV3HashRequest;
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

export function batchItemCount(batch: Pick<MapBatch, 'emailItems' | 'phoneItems'>): number {
  return batch.emailItems.length + batch.phoneItems.length;
}

/** `"<hash>",`: an item never needs escaping, so its length is its byte count. */
const ITEM_BYTES = HASH_WORDS * 4 + 3;

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
  private current: { emailItems: number[]; phoneItems: number[]; bytes: number } | null = null;
  /** The hashes of the batch being filled, per kind, as words (hashWords); made into its request when sealed. */
  private emailWords: Int32Array;
  private phoneWords: Int32Array;
  private sealed = 0;

  constructor(
    limits: BatchLimits,
    private readonly onSealed: (batch: MapBatch) => void,
  ) {
    this.maxItems = Math.min(MAX_ITEMS_PER_REQUEST, Math.max(1, limits.maxItems ?? MAX_ITEMS_PER_REQUEST));
    this.maxJsonBytes = limits.maxJsonBytes ?? MAX_REQUEST_JSON_BYTES;
    this.emailWords = new Int32Array(0);
    this.phoneWords = new Int32Array(0);
  }

  /** Items in the batch being filled. */
  get openItems(): number {
    return this.current === null ? 0 : batchItemCount(this.current);
  }

  /** How many batches were sealed so far. */
  get sealedCount(): number {
    return this.sealed;
  }

  /**
   * Adds identifier `id` of the run's table, of DII type `type`, whose hash is words `at` to `at + HASH_WORDS - 1`
   * of `words` (as the table takes it).
   */
  add(id: number, type: DiiType, words: Int32Array, at: number): void {
    let batch = this.current;
    if (batch !== null && batch.bytes + ITEM_BYTES > this.maxJsonBytes) {
      this.seal();
      batch = null;
    }
    if (batch === null) {
      batch = { emailItems: [], phoneItems: [], bytes: EMPTY_REQUEST_BYTES };
      this.current = batch;
    }
    const items = type === 'email' ? batch.emailItems : batch.phoneItems;
    let held = type === 'email' ? this.emailWords : this.phoneWords;
    const base = items.length * HASH_WORDS;
    if (base + HASH_WORDS > held.length) held = this.room(type, base + HASH_WORDS);
    for (let k = 0; k < HASH_WORDS; k++) held[base + k] = words[at + k];
    items.push(id);
    batch.bytes += ITEM_BYTES;
    if (batchItemCount(batch) >= this.maxItems) this.seal();
  }

  /** add() for a hash given as text (one a state lookup did not find). */
  addText(id: number, type: DiiType, hash: string): void {
    this.add(id, type, textWords(hash), 0);
  }

  /** Hands over the batch being filled, if it has anything in it. */
  seal(): void {
    const open = this.current;
    if (open === null) return;
    this.current = null;
    if (batchItemCount(open) === 0) return;
    const { emailItems, phoneItems } = open;
    const request = new MapV3HashRequest(
      bytesOf(this.emailWords),
      emailItems.length,
      bytesOf(this.phoneWords),
      phoneItems.length,
    );
    this.onSealed({ seq: ++this.sealed, emailItems, phoneItems, request, bytes: open.bytes });
  }

  /** Drops the batch being filled (an interrupted run does not send it); returns its identifiers' ids. */
  discard(): number[] {
    const batch = this.current;
    this.current = null;
    return batch === null ? [] : [...batch.emailItems, ...batch.phoneItems];
  }

  /** The words of one kind with room for `words`: at most a full batch's, kept from batch to batch. */
  private room(type: DiiType, words: number): Int32Array {
    const held = type === 'email' ? this.emailWords : this.phoneWords;
    const grown = new Int32Array(
      Math.min(this.maxItems * HASH_WORDS, Math.max(words, held.length * 2, 64 * HASH_WORDS)),
    );
    grown.set(held);
    if (type === 'email') this.emailWords = grown;
    else this.phoneWords = grown;
    return grown;
  }
}

function bytesOf(words: Int32Array): Uint8Array {
  return new Uint8Array(words.buffer, words.byteOffset, words.byteLength);
}
