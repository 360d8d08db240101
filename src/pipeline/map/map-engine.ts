import type { DiiType } from '../../identity/index.js';
import {
  answerCount,
  isMappedV3,
  ScannedAnswers,
  type MapV3Answers,
  type MappedV3,
  type MapV3Item,
  type MapV3Request,
  type MapV3ResponseBody,
  type UnmappedV3,
} from '../../protocol/index.js';
import { STATUS_CODE } from '../../state/schema.js';
import type { EntryUpdate } from '../../state/types.js';
import type { IdentifierColumn } from './identifier-columns.js';
import { HASH_BYTES, hashText, prepareRows, type PreparedRows } from './prepare-rows.js';
import { BatchBuilder, batchItemCount, type MapBatch } from './batcher.js';
import { BucketAnswer, mappedOutcome } from './bucket-answer.js';
import { answerSlot, HASH_WORDS, hashWords, IdentifierTable, OPTOUT_REASON } from './identifier-table.js';
import { AdaptiveConcurrency } from '../run/adaptive-limiter.js';
import { DistinctEstimate } from './distinct-count.js';
import { Reassembler } from './reassembler.js';
import { RowChunk, SLOT, type RowTicket } from './row-chunk.js';
import type { StoredEntries } from './state-thread.js';
import type { InputRow } from '../io/table.js';
import { asError, RunLifecycle, type RunOutcome } from '../run/run-lifecycle.js';

/** An identifier column of the input, as the engine reads it (resolved from flags by identifier-columns.ts). */
export type EngineColumn = IdentifierColumn;

/** What the engine needs from the state file: a lookup per chunk and one transaction per answered batch. */
export interface EngineState {
  /** The stored entries of these hashes of one DII type, by position. */
  lookupStored(type: DiiType, hashes: readonly string[]): StoredEntries;
  /** One transaction; `nowS` is recorded as the time of the mapping. */
  commitBatch(updates: readonly EntryUpdate[], nowS: number): void;
}

/**
 * A state file served by another thread (state-thread.ts): lookups and commits are answered later, in the order
 * they were asked, while this thread reads, sends and writes.
 */
export interface ThreadedEngineState {
  readonly threaded: true;
  /** The stored entries of these hashes of one DII type, by position. */
  lookupStored(type: DiiType, hashes: readonly string[]): Promise<StoredEntries>;
  /** One transaction; resolves once it is committed. */
  commitBatch(updates: readonly EntryUpdate[], nowS: number): Promise<void>;
}

/** Sends one v3 map request (with the client's retries) and returns the decrypted body, read or packed. */
export type MapBatchFn = (request: MapV3Request, signal: AbortSignal) => Promise<MapV3ResponseBody | MapV3Answers>;

export interface MapEngineOptions {
  columns: readonly EngineColumn[];
  /** Absent in a dry run: nothing is sent. */
  mapBatch?: MapBatchFn;
  /** Count what would be sent instead of sending it; chunks are not handed on. */
  dryRun?: boolean;
  state?: EngineState | ThreadedEngineState;
  /** Items per request (default and maximum 5,000). */
  batchSize?: number;
  /** Request JSON bytes (default: what stays under 1 MB in either body mode). */
  maxJsonBytes?: number;
  /** Requests in flight at most, when no limiter is given (default 20). */
  concurrency?: number;
  /** Shared with the client, whose onRetry feeds it 429s. */
  limiter?: AdaptiveConcurrency;
  /** Rows read but not yet written before reading pauses (default: enough to keep every request slot busy). */
  maxPendingRows?: number;
  /** Identifiers remembered to serve repeats without a request (default 50,000). */
  recentCapacity?: number;
  /** Stop at the first batch that fails after the client's last attempt. */
  failFast?: boolean;
  /** The client's attempts per request, for the reason text of a failed batch. */
  maxAttempts?: number;
  /** Aborting it stops reading; in-flight requests get `graceMs` to finish and commit. */
  signal?: AbortSignal;
  /** Default 10,000 ms. */
  graceMs?: number;
  /** Now, in Unix seconds: decides whether a stored mapping is still fresh (now < r). */
  nowS?: () => number;
  /** Chunks whose identifiers are all answered, in input order. */
  onChunk?: (chunk: RowChunk) => void | Promise<void>;
  /** Each chunk keeps its prepared cells (RowChunk.sent), for an output that shows the hashes sent. */
  keepSentHashes?: boolean;
}

/** How a map run ended (the outcomes every engine shares). */
export type MapRunOutcome = RunOutcome;

export interface MapRunCounts {
  /** Rows read. */
  rowsRead: number;
  /** Rows handed on (in order, all answered). */
  rowsDone: number;
  /** Identifier cells seen. */
  identifiers: number;
  /** Identifier cells by final status (counted as chunks are handed on). */
  status: { mapped: number; optout: number; invalid: number; error: number; missing: number };
  /** Cells invalid before any request, by reason. */
  invalidByReason: Record<string, number>;
  /** Cells that were valid locally. */
  valid: number;
  /** Of those, phones. */
  validPhones: number;
  /** Invalid cells written as phone numbers are, refused only for want of a phone region (needsPhoneRegion). */
  phonesNeedingRegion: number;
  /** Distinct (type, hash) pairs among the valid cells. */
  uniqueIdentifiers: number;
  /** True when uniqueIdentifiers is an estimate (large inputs). */
  uniqueEstimated: boolean;
  /** Cells answered by the state file. */
  fromState: number;
  /** Cells answered by a pending or recent answer for the same identifier. */
  deduplicated: number;
  /**
   * Items sent for an identifier this run had already sent: repeats further apart than the identifiers a run
   * remembers, without a state file to answer them (with one, and while none was forgotten, none). A repeat of an
   * identifier whose request failed is sent again and not counted here.
   */
  repeatsSent: number;
  /** True when repeatsSent is an estimate (from the estimated count of distinct identifiers). */
  repeatsEstimated: boolean;
  /** Batches sealed (sent, or in a dry run: that would be sent). */
  batches: number;
  /** Items in those batches. */
  itemsInBatches: number;
  /** Batches that failed after the client's last attempt. */
  batchesFailed: number;
  /** Batches committed to the state file. */
  batchesCommitted: number;
}

export interface MapRunResult {
  outcome: MapRunOutcome;
  counts: MapRunCounts;
}

/** Counts of a run that has not started. */
export function newMapRunCounts(): MapRunCounts {
  return {
    rowsRead: 0,
    rowsDone: 0,
    identifiers: 0,
    status: { mapped: 0, optout: 0, invalid: 0, error: 0, missing: 0 },
    invalidByReason: {},
    valid: 0,
    validPhones: 0,
    phonesNeedingRegion: 0,
    uniqueIdentifiers: 0,
    uniqueEstimated: false,
    fromState: 0,
    deduplicated: 0,
    repeatsSent: 0,
    repeatsEstimated: false,
    batches: 0,
    itemsInBatches: 0,
    batchesFailed: 0,
    batchesCommitted: 0,
  };
}

/** A stored mapping answered without a request. A class, so that repeats can tell it came from the state. */
class StateAnswer implements MappedV3 {
  constructor(
    readonly u: string,
    readonly p: string | null,
    readonly r: number,
  ) {}
}
const STATE_OPTOUT: UnmappedV3 = Object.freeze({ e: OPTOUT_REASON });
const STATE_INVALID: UnmappedV3 = Object.freeze({ e: 'invalid identifier' });
/** Placeholder answer of a dry run, so repeats are not counted twice. */
const DRY_ANSWER: UnmappedV3 = Object.freeze({ e: 'not sent (dry run)' });

function isStateAnswer(item: MapV3Item | ScannedAnswers): boolean {
  return (
    item instanceof StateAnswer ||
    item === STATE_OPTOUT ||
    item === STATE_INVALID ||
    (item instanceof BucketAnswer && item.fromState)
  );
}

const STOPPED = Symbol('stopped');

/** A chunk as the engine takes it: its cells prepared, and its rows unless a worker thread keeps them. */
export interface EngineChunk {
  prepared: PreparedRows;
  rows?: InputRow[];
  ticket?: RowTicket;
}

/** Chunks of rows prepared on this thread, one at a time as they are read. */
async function* preparedHere(
  source: AsyncIterable<InputRow[]>,
  columns: readonly EngineColumn[],
): AsyncGenerator<EngineChunk> {
  for await (const rows of source) yield { prepared: prepareRows(rows, columns), rows };
}

/** Distinct identifiers a run remembers (with their answers) by default, for repeats further down the input. */
export const REMEMBERED_IDENTIFIERS = 50_000;

/**
 * The streaming batch engine of `map` (docs/architecture.md §3): chunks of rows in; each identifier cell
 * prepared locally, repeats served once, fresh state entries answered without a request, the rest packed into
 * 5,000-item batches sent with at most N in flight; chunks out in input order once all their cells are answered.
 * Work per chunk and per batch is synchronous; the only awaits are reading, sending and writing.
 */
export class MapEngine {
  readonly counts: MapRunCounts = newMapRunCounts();
  readonly limiter: AdaptiveConcurrency;

  private readonly columns: readonly EngineColumn[];
  private readonly width: number;
  private readonly table: IdentifierTable;
  private readonly distinct = new DistinctEstimate();
  /** Distinct identifiers, exact while the table has forgotten none. */
  private distinctExact = 0;
  /** Identifiers batched again because their request failed. */
  private sentAfterFailure = 0;
  private readonly window = new Reassembler();
  private readonly batcher: BatchBuilder;
  private readonly maxPendingRows: number;
  private readonly nowS: () => number;
  /** Stop, interrupt, wind-down; its outstanding count: batches sealed and not yet settled (queued or in flight). */
  private readonly lifecycle: RunLifecycle;
  private stopReading: (() => void) | null = null;
  /** New identifiers (ids in the table) of the chunk being admitted, before the state has been asked about them. */
  private fresh: number[] = [];
  /**
   * Their hashes, by position: each one's number among the chunk's prepared hashes (freshOf), which the request
   * and the state lookup read; the table keeps none.
   */
  private freshHash: number[] = [];
  /** The prepared hashes of the chunk being admitted, as bytes and as words (hashWords). */
  private freshOf: { hashes: Uint8Array; words: Int32Array } = { hashes: new Uint8Array(0), words: new Int32Array(0) };
  /**
   * Settles when every lookup given to a threaded state so far has: a database answers them on several sessions,
   * so a later one may settle before an earlier one.
   */
  private lastLookup: Promise<void> = Promise.resolve();

  constructor(private readonly options: MapEngineOptions) {
    if (!options.dryRun && !options.mapBatch) throw new Error('MapEngine: mapBatch is required unless dryRun is set');
    this.columns = options.columns;
    this.width = options.columns.length;
    this.limiter = options.limiter ?? new AdaptiveConcurrency({ max: options.concurrency ?? 20 });
    this.table = new IdentifierTable(options.recentCapacity ?? REMEMBERED_IDENTIFIERS);
    this.batcher = new BatchBuilder({ maxItems: options.batchSize, maxJsonBytes: options.maxJsonBytes }, (batch) =>
      this.dispatch(batch),
    );
    const rowsPerBatch = Math.ceil(this.batcher.maxItems / Math.max(1, this.width));
    this.maxPendingRows = options.maxPendingRows ?? Math.ceil(rowsPerBatch * (this.limiter.max + 2));
    this.nowS = options.nowS ?? (() => Math.floor(Date.now() / 1000));
    // every request in flight listens on the run's one signal: no listener limit
    this.lifecycle = new RunLifecycle({ maxListeners: 0, graceMs: options.graceMs });
    this.lifecycle.onHalt(() => {
      const stopReading = this.stopReading;
      this.stopReading = null;
      stopReading?.();
    });
  }

  /** Runs the source to its end (or to a stop) and resolves once every answered chunk was handed on. */
  run(source: AsyncIterable<InputRow[]>): Promise<MapRunResult> {
    return this.runPrepared(preparedHere(source, this.columns));
  }

  /** run() for chunks already prepared (by worker threads that keep the rows: see RowChunk.ticket). */
  async runPrepared(source: AsyncIterable<EngineChunk>): Promise<MapRunResult> {
    const iterator = source[Symbol.asyncIterator]();
    const unlisten = this.lifecycle.listenForInterrupt(this.options.signal);
    let finished = false;
    try {
      for (;;) {
        if (this.lifecycle.stopped) break;
        const next = await this.nextChunk(iterator);
        if (next === STOPPED || next.done) {
          finished = next !== STOPPED;
          break;
        }
        this.admit(next.value);
        await this.handOn();
        while (!this.lifecycle.stopped && this.window.pendingRows > this.maxPendingRows) {
          // everything the window waits for must be on its way, or the wait would never end
          if (this.lifecycle.outstanding === 0) this.batcher.seal();
          if (this.lifecycle.outstanding === 0) break;
          await this.lifecycle.settled();
          await this.handOn();
        }
      }
      // identifiers still being looked up go to the batcher when their lookup settles: it is sealed after
      await this.lastLookup;
      if (!this.lifecycle.stopped) {
        this.batcher.seal();
        while (this.lifecycle.outstanding > 0 && !this.lifecycle.stopped) {
          await this.lifecycle.settled();
          await this.handOn();
        }
      }
    } catch (err) {
      // a source or sink failure ends the run; what is in flight is stopped, not left running unseen
      this.lifecycle.halt({ kind: 'failed', error: asError(err) });
    } finally {
      unlisten();
      if (!finished) {
        // a source blocked on stdin may never settle its pending read: do not wait for it to close
        void Promise.resolve(iterator.return?.()).catch(() => undefined);
      }
    }
    if (this.lifecycle.stopped) await this.windDown();
    else await this.handOn();
    // a run that read its whole input and wrote only part of it must never end as completed
    if (!this.lifecycle.stopped && this.window.pendingRows > 0) {
      this.lifecycle.halt({
        kind: 'failed',
        error: new Error(
          `${this.window.pendingRows} rows were left unanswered at the end of the input (a fault of uid2-batch): ` +
            'the output stops before them; run again',
        ),
      });
    }
    this.counts.uniqueEstimated = this.table.dropped;
    this.counts.uniqueIdentifiers = this.table.dropped ? this.distinct.count : this.distinctExact;
    // without a state file, every distinct identifier is sent once and each forgotten repeat once more; with one,
    // a forgotten identifier is answered by it (its answer was committed before the table let it go)
    if (this.table.dropped && this.options.state === undefined) {
      const sentFirst = this.counts.itemsInBatches - this.sentAfterFailure;
      this.counts.repeatsSent = Math.max(0, sentFirst - this.counts.uniqueIdentifiers);
      this.counts.repeatsEstimated = true;
    }
    return { outcome: this.lifecycle.outcome(), counts: this.counts };
  }

  /** Routes each identifier cell of a prepared chunk to an answer, a waiting duplicate, or a batch. */
  private admit(input: EngineChunk): void {
    const { prepared } = input;
    const { status, phone, hashes, reasons } = prepared;
    const words = hashWords(hashes);
    this.freshOf = { hashes, words };
    const chunk = new RowChunk(input.rows ?? [], this.width, input.ticket, prepared.rowCount);
    if (this.options.keepSentHashes === true) chunk.sent = prepared;
    this.counts.rowsRead += prepared.rowCount;
    this.counts.identifiers += status.length;
    this.counts.phonesNeedingRegion += prepared.needingRegion;
    if (!this.options.dryRun) this.window.push(chunk);
    let h = 0;
    let e = 0;
    for (let slot = 0; slot < status.length; slot++) {
      switch (status[slot]) {
        case SLOT.pending:
          if (phone[slot] === 1) this.counts.validPhones++;
          this.route(chunk, slot, phone[slot] === 1 ? 'phone' : 'email', h++, hashes, words);
          break;
        case SLOT.missing:
          chunk.setUnmapped(slot, SLOT.missing, 'empty');
          break;
        default:
          this.invalid(chunk, slot, reasons[e++]);
      }
    }
    if (this.fresh.length > 0) this.resolveFresh();
  }

  private invalid(chunk: RowChunk, slot: number, reason: string): void {
    chunk.setUnmapped(slot, SLOT.invalid, reason);
    const byReason = this.counts.invalidByReason;
    byReason[reason] = (byReason[reason] ?? 0) + 1;
  }

  /** Routes one valid cell, whose hash is prepared hash `h` (in bytes `hashes`, or `words`). */
  private route(chunk: RowChunk, slot: number, type: DiiType, h: number, hashes: Uint8Array, words: Int32Array): void {
    this.counts.valid++;
    const table = this.table;
    const at = h * HASH_WORDS;
    let id = table.find(type, words, at);
    if (id >= 0 && !table.isFailed(id)) {
      this.counts.deduplicated++;
      const answer = table.answer(id);
      if (answer === null) {
        table.addWaiter(id, chunk, slot);
      } else {
        answerSlot(chunk, slot, answer, table.answerIndex(id));
        if (isStateAnswer(answer)) this.counts.fromState++;
      }
      return;
    }
    // a repeat of an identifier whose request failed is sent again, but it is not a new identifier
    if (id < 0) {
      this.distinctExact++;
      this.distinct.add(type, hashes, h * HASH_BYTES);
      id = table.add(type, words, at, chunk, slot);
    } else {
      this.sentAfterFailure++;
      table.retry(id, chunk, slot);
    }
    this.fresh.push(id);
    this.freshHash.push(h);
  }

  /** Asks the state about the chunk's new identifiers (one lookup per DII type); batches the rest. */
  private resolveFresh(): void {
    const { fresh, freshHash, table } = this;
    const { hashes, words } = this.freshOf;
    const state = this.options.state;
    if (state === undefined) {
      for (let i = 0; i < fresh.length; i++)
        this.batcher.add(fresh[i], table.typeOf(fresh[i]), words, freshHash[i] * HASH_WORDS);
      fresh.length = 0;
      freshHash.length = 0;
      return;
    }
    this.fresh = [];
    this.freshHash = [];
    // a lookup takes the hashes as text: made here, only with a state
    const email = new FreshOfType('email');
    const phone = new FreshOfType('phone');
    for (let i = 0; i < fresh.length; i++)
      (table.typeOf(fresh[i]) === 'email' ? email : phone).push(fresh[i], hashText(hashes, freshHash[i]));
    if (isThreaded(state)) {
      this.lookUpLater(state, fresh, email, phone);
      return;
    }
    if (email.ids.length > 0) this.resolveStored(email, state.lookupStored('email', email.hashes));
    if (phone.ids.length > 0) this.resolveStored(phone, state.lookupStored('phone', phone.hashes));
  }

  /**
   * Asks a threaded state about the chunk's new identifiers and goes on with the next chunk: they stay in the
   * table meanwhile (repeats wait on them), and are answered or batched when the lookup settles. Lookups count
   * as outstanding work, so a wait for room in the window also waits for them.
   */
  private lookUpLater(state: ThreadedEngineState, fresh: number[], email: FreshOfType, phone: FreshOfType): void {
    const ask = (items: FreshOfType): Promise<StoredEntries> | undefined =>
      items.ids.length === 0 ? undefined : state.lookupStored(items.type, items.hashes);
    const asked = Promise.all([ask(email), ask(phone)]);
    const before = this.lastLookup;
    const settled = this.lifecycle.inFlight(async () => {
      let found: [StoredEntries | undefined, StoredEntries | undefined];
      try {
        found = await asked;
      } catch (err) {
        this.lifecycle.halt({ kind: 'failed', error: asError(err) });
        for (let i = 0; i < fresh.length; i++)
          this.table.fail(fresh[i], 'not looked up: the state file could not be read');
        return;
      }
      this.resolveStored(email, found[0]);
      this.resolveStored(phone, found[1]);
    });
    this.lastLookup = Promise.all([before, settled]).then(() => undefined);
  }

  /** Answers the items a lookup found fresh entries for; batches the others (or fails them after a stop). */
  private resolveStored(items: FreshOfType, stored: StoredEntries | undefined): void {
    const { ids, hashes, type } = items;
    const table = this.table;
    const answers = new Array<MapV3Item | undefined>(ids.length);
    if (stored !== undefined && stored.at.length > 0) {
      const now = this.nowS();
      for (let k = 0; k < stored.at.length; k++) answers[stored.at[k]] = storedAnswer(stored, k, now);
    }
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      const answer = answers[i];
      if (answer !== undefined) {
        this.counts.fromState += table.waiters(id);
        table.resolve(id, answer);
      } else if (this.lifecycle.stopped) {
        table.fail(id, 'not sent: the run stopped first');
      } else {
        this.batcher.addText(id, type, hashes[i]);
      }
    }
  }

  private dispatch(batch: MapBatch): void {
    this.counts.batches++;
    this.counts.itemsInBatches += batchItemCount(batch);
    if (this.options.dryRun) {
      for (const id of batch.emailItems) this.table.resolve(id, DRY_ANSWER);
      for (const id of batch.phoneItems) this.table.resolve(id, DRY_ANSWER);
      return;
    }
    void this.lifecycle.inFlight(() => this.limiter.run(() => this.send(batch)));
  }

  private async send(batch: MapBatch): Promise<void> {
    try {
      if (this.lifecycle.stopped) {
        this.failBatch(batch, 'not sent: the run stopped first');
        return;
      }
      let body: MapV3ResponseBody | MapV3Answers;
      try {
        body = await (this.options.mapBatch as MapBatchFn)(batch.request, this.lifecycle.abort.signal);
      } catch (err) {
        this.onBatchError(batch, err);
        return;
      }
      this.lifecycle.noteBatchAnswered();
      await this.onBatchAnswered(batch, body);
    } catch (err) {
      // a state commit that throws (disk full, file locked) would fail every later batch the same way
      this.lifecycle.halt({ kind: 'failed', error: asError(err) });
      this.failBatch(batch, 'not committed: the state file could not be written');
    }
  }

  private async onBatchAnswered(batch: MapBatch, body: MapV3ResponseBody | MapV3Answers): Promise<void> {
    const emailAnswers = body.email_hash ?? [];
    const phoneAnswers = body.phone_hash ?? [];
    const emailCount = answerCount(emailAnswers);
    const phoneCount = answerCount(phoneAnswers);
    if (emailCount !== batch.emailItems.length || phoneCount !== batch.phoneItems.length) {
      this.onBatchError(
        batch,
        new Error(
          `the service answered ${emailCount} email and ${phoneCount} phone hashes for ` +
            `${batch.emailItems.length} and ${batch.phoneItems.length} sent`,
        ),
      );
      return;
    }
    const state = this.options.state;
    if (state !== undefined) {
      const updates: EntryUpdate[] = new Array(emailCount + phoneCount);
      // the state keeps the hashes as text: made from the request's bytes here, only with a state
      const emailHashes = batch.request.email_hash ?? [];
      const phoneHashes = batch.request.phone_hash ?? [];
      let n = 0;
      for (let i = 0; i < emailCount; i++)
        updates[n++] = entryUpdate('email', emailHashes[i], answerAt(emailAnswers, i));
      for (let i = 0; i < phoneCount; i++)
        updates[n++] = entryUpdate('phone', phoneHashes[i], answerAt(phoneAnswers, i));
      // answers are handed on only once committed: an output row never holds what a crash could lose
      const committed = state.commitBatch(updates, this.nowS());
      if (committed !== undefined) await committed;
      this.counts.batchesCommitted++;
    }
    resolveAll(this.table, batch.emailItems, emailAnswers);
    resolveAll(this.table, batch.phoneItems, phoneAnswers);
    this.limiter.succeeded();
  }

  private onBatchError(batch: MapBatch, err: unknown): void {
    const error = asError(err);
    if (this.lifecycle.cutShort()) {
      this.failBatch(batch, 'not answered: the run stopped first');
      return;
    }
    this.lifecycle.haltOnBatchError(error, this.options.failFast === true);
    this.counts.batchesFailed++;
    this.failBatch(batch, this.failureReason(error));
  }

  private failureReason(error: Error): string {
    const retryable = (error as { retryable?: unknown }).retryable === true;
    const attempts = this.options.maxAttempts ?? 0;
    return retryable && attempts > 1 && !/attempt/.test(error.message)
      ? `${error.message} after ${attempts} attempts`
      : error.message;
  }

  private failBatch(batch: MapBatch, reason: string): void {
    for (const id of batch.emailItems) this.table.fail(id, reason);
    for (const id of batch.phoneItems) this.table.fail(id, reason);
  }

  /** The next chunk, or STOPPED as soon as the run is stopped (a read from stdin may never end by itself). */
  private nextChunk(iterator: AsyncIterator<EngineChunk>): Promise<IteratorResult<EngineChunk> | typeof STOPPED> {
    if (this.lifecycle.stopped) return Promise.resolve(STOPPED);
    return new Promise((resolve, reject) => {
      this.stopReading = () => resolve(STOPPED);
      iterator.next().then(
        (result) => {
          this.stopReading = null;
          resolve(result);
        },
        (err: unknown) => {
          this.stopReading = null;
          reject(err);
        },
      );
    });
  }

  /** After a stop: nothing more is sent; requests in flight get a bounded time to finish and commit. */
  private async windDown(): Promise<void> {
    for (const id of this.batcher.discard()) this.table.fail(id, 'not sent: the run stopped first');
    await this.lifecycle.windDown();
  }

  /** Hands on the chunks at the front of the window that are fully answered. */
  private async handOn(): Promise<void> {
    // after a stop the output is abandoned (the sink is aborted): rows answered now are not handed on
    if (this.lifecycle.stopped) return;
    const ready = this.window.takeReady();
    for (let i = 0; i < ready.length; i++) {
      const chunk = ready[i];
      this.countStatuses(chunk);
      this.counts.rowsDone += chunk.rowCount;
      if (this.options.onChunk) await this.options.onChunk(chunk);
    }
  }

  private countStatuses(chunk: RowChunk): void {
    const status = chunk.status;
    const counts = this.counts.status;
    for (let i = 0; i < status.length; i++) {
      switch (status[i]) {
        case SLOT.mapped:
          counts.mapped++;
          break;
        case SLOT.optout:
          counts.optout++;
          break;
        case SLOT.invalid:
          counts.invalid++;
          break;
        case SLOT.error:
          counts.error++;
          break;
        case SLOT.missing:
          counts.missing++;
          break;
      }
    }
  }
}

function isThreaded(state: EngineState | ThreadedEngineState): state is ThreadedEngineState {
  return (state as Partial<ThreadedEngineState>).threaded === true;
}

/** Item i of an answer array, as an object. */
function answerAt(answers: MapV3Item[] | ScannedAnswers, i: number): MapV3Item {
  return answers instanceof ScannedAnswers ? answers.item(i) : answers[i];
}

/** Answers each identifier of a batch (ids in `table`) with its answer, by position. */
function resolveAll(table: IdentifierTable, ids: readonly number[], answers: MapV3Item[] | ScannedAnswers): void {
  if (answers instanceof ScannedAnswers) for (let i = 0; i < ids.length; i++) table.resolve(ids[i], answers, i);
  else for (let i = 0; i < ids.length; i++) table.resolve(ids[i], answers[i]);
}

/** A chunk's new identifiers of one DII type, with their hashes by position: one state lookup. */
class FreshOfType {
  readonly ids: number[] = [];
  readonly hashes: string[] = [];
  constructor(readonly type: DiiType) {}

  push(id: number, hash: string): void {
    this.ids.push(id);
    this.hashes.push(hash);
  }
}

/** What stored entry k answers now, if anything: a fresh mapping (now < r) or a tombstone. */
function storedAnswer(stored: StoredEntries, k: number, nowS: number): MapV3Item | undefined {
  switch (stored.status[k]) {
    case STATUS_CODE.mapped: {
      const u = stored.u[k];
      const bucketId = stored.bucketId[k];
      // a v2 entry (it has a salt bucket) stays fresh until a bucket check marks it due
      if (bucketId !== null) return u !== null && stored.due[k] !== 1 ? new BucketAnswer(u, bucketId, true) : undefined;
      const r = stored.r[k];
      return u !== null && !Number.isNaN(r) && nowS < r ? new StateAnswer(u, stored.p[k], r) : undefined;
    }
    case STATUS_CODE.optout:
      return STATE_OPTOUT;
    case STATUS_CODE.invalid:
      return STATE_INVALID;
    default:
      return undefined;
  }
}

function entryUpdate(type: DiiType, hash: string, answer: MapV3Item): EntryUpdate {
  if (isMappedV3(answer)) return { type, hash, outcome: mappedOutcome(answer) };
  return { type, hash, outcome: answer.e === OPTOUT_REASON ? { kind: 'optout' } : { kind: 'invalid' } };
}
