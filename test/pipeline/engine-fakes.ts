import { createHash } from 'node:crypto';
import { sha256Base64 } from '../../src/identity/index.js';
import {
  requestJson,
  type MapV3Answers,
  type MapV3Item,
  type MapV3Request,
  type MapV3ResponseBody,
} from '../../src/protocol/index.js';
import { scanMapV3Answers } from '../../src/client/map-v3-scan.js';
import type { EngineState } from '../../src/pipeline/map/map-engine.js';
import type { InputRow } from '../../src/pipeline/io/table.js';
import { STATUS_CODE } from '../../src/state/schema.js';
import type { EntryUpdate, StoredEntries } from '../../src/state/types.js';
import type { DiiType } from '../../src/identity/index.js';
import { answerHashes, waitOrAbort } from './fake-endpoint.js';
import type { StoredEntry } from '../state/lookups.js';

export const OPTOUT_EMAIL_HASH = sha256Base64('optout@example.com');
export const NOW_S = 1_800_000_000;

/** What the fake service answers for a hash: deterministic, so tests can compute the expected output. */
export function fakeAnswer(type: DiiType, hash: string): MapV3Item {
  if (type === 'email' && hash === OPTOUT_EMAIL_HASH) return { e: 'optout' };
  if (hash.startsWith('AAAA')) return { e: 'invalid identifier' };
  return { u: rawUidOf(type, hash), p: null, r: NOW_S + 86_400 };
}

export function rawUidOf(type: DiiType, hash: string): string {
  return createHash('sha256').update(`${type}:${hash}`).digest('base64');
}

export interface FakeMapperOptions {
  /** Latency per request in ms, drawn per call. */
  latency?: () => number;
  /** Throw this instead of answering, for the n-th call (1-based). */
  failOn?: (call: number, request: MapV3Request) => Error | undefined;
  /** Called at the start of each call with the number of calls in flight (including this one). */
  onStart?: (inFlight: number, call: number) => void;
  /** Answer packed, as the client's one-pass scan reads a service's answer (ScannedAnswers). */
  packed?: boolean;
}

export class FakeMapper {
  readonly requests: MapV3Request[] = [];
  inFlight = 0;
  peakInFlight = 0;
  private calls = 0;

  constructor(private readonly options: FakeMapperOptions = {}) {}

  readonly mapBatch = async (request: MapV3Request, signal: AbortSignal): Promise<MapV3ResponseBody | MapV3Answers> => {
    const call = ++this.calls;
    this.inFlight++;
    this.peakInFlight = Math.max(this.peakInFlight, this.inFlight);
    this.options.onStart?.(this.inFlight, call);
    try {
      const ms = this.options.latency?.() ?? 0;
      await waitOrAbort(ms, signal);
      const failure = this.options.failOn?.(call, request);
      if (failure) throw failure;
      // recorded as the service reads it: the JSON the client would send (requestJson), parsed
      this.requests.push(JSON.parse(requestJson(request).toString('utf8')) as MapV3Request);
      const body = answerHashes(request, fakeAnswer);
      if (this.options.packed !== true) return body;
      const json = Buffer.from(JSON.stringify({ status: 'success', body }), 'latin1');
      const packed = scanMapV3Answers(json, request, NOW_S * 1000);
      if (packed === undefined) throw new Error('the fake answer did not scan');
      return packed;
    } finally {
      this.inFlight--;
    }
  };

  get itemsSent(): number {
    return this.requests.reduce((n, r) => n + (r.email_hash?.length ?? 0) + (r.phone_hash?.length ?? 0), 0);
  }
}

/** An in-memory state with the engine's two calls. */
export class FakeState implements EngineState {
  readonly entries = new Map<string, StoredEntry>();
  commits = 0;
  lastCommitS = 0;
  lookups = 0;

  lookupHashes(type: DiiType, hashes: readonly string[]): ReadonlyMap<string, StoredEntry> {
    this.lookups++;
    const found = new Map<string, StoredEntry>();
    for (const h of hashes) {
      const e = this.entries.get(`${type}:${h}`);
      if (e) found.set(h, e);
    }
    return found;
  }

  /** lookupHashes as the store's columns, by position (what the engine asks for). */
  lookupStored(type: DiiType, hashes: readonly string[]): StoredEntries {
    const found = this.lookupHashes(type, hashes);
    const at: number[] = [];
    const stored: StoredEntries = {
      at: new Int32Array(0),
      status: new Uint8Array(found.size),
      due: new Uint8Array(found.size),
      r: new Float64Array(found.size),
      u: [],
      p: [],
      bucketId: [],
    };
    hashes.forEach((hash, i) => {
      const entry = found.get(hash);
      if (entry === undefined) return;
      const k = at.length;
      at.push(i);
      stored.status[k] = STATUS_CODE[entry.status];
      stored.due[k] = entry.due ? 1 : 0;
      stored.r[k] = entry.r ?? Number.NaN;
      stored.u.push(entry.u);
      stored.p.push(entry.p);
      stored.bucketId.push(entry.bucketId);
    });
    stored.at = Int32Array.from(at);
    return stored;
  }

  commitBatch(updates: readonly EntryUpdate[], nowS: number): void {
    this.lastCommitS = nowS;
    this.commits++;
    for (const { type, hash, outcome } of updates) {
      this.put(
        type,
        hash,
        outcome.kind === 'mapped'
          ? { status: 'mapped', u: outcome.u, p: outcome.p, r: outcome.r }
          : { status: outcome.kind, u: null, p: null, r: null },
      );
    }
  }

  put(type: DiiType, hash: string, v: Pick<StoredEntry, 'status' | 'u' | 'p' | 'r'>): void {
    const key = `${type}:${hash}`;
    this.entries.set(key, {
      // like a state file's row id: given once, kept for the entry's life
      id: this.entries.get(key)?.id ?? this.entries.size + 1,
      type,
      hash,
      ...v,
      bucketId: null,
      lastMappedS: null,
      lastOptoutCheckS: null,
      optedOutSinceMs: null,
      due: false,
    });
  }
}

/** Rows as the table source yields them, in chunks of `chunkRows`. */
export async function* chunked(
  rows: string[][],
  chunkRows = 100,
  problems?: Map<number, InputRow['problem']>,
): AsyncGenerator<InputRow[]> {
  for (let i = 0; i < rows.length; i += chunkRows) {
    await Promise.resolve();
    yield rows.slice(i, i + chunkRows).map((cells, j) => {
      const row: InputRow = { line: i + j + 2, cells: cells.slice() };
      const problem = problems?.get(i + j);
      if (problem) row.problem = problem;
      return row;
    });
  }
}

export { seeded } from '../helpers/seeded-random.js';
