/** mapRows: the map engine over rows a program gives, yielding each row with its results in input order. */
import { createServiceClient, type ClientStats, type ServiceClient } from '../client/index.js';
import type { DiiType, IdentifierKind, PhoneRegion } from '../identity/index.js';
import { AdaptiveConcurrency } from '../pipeline/run/adaptive-limiter.js';
import {
  newMapRunCounts,
  type EngineColumn,
  type EngineState,
  type MapRunCounts,
  type MapRunOutcome,
} from '../pipeline/map/map-engine.js';
import { runMapJob } from '../pipeline/jobs/map-job.js';
import { SLOT, SLOT_STATUS_NAMES, type RowChunk } from '../pipeline/map/row-chunk.js';
import type { InputRow } from '../pipeline/io/table.js';
import { resolveServiceTarget } from './service-target.js';

/** One identifier column of the rows given to mapRows. */
export interface MapColumn {
  /** Position of the column in each row. */
  index: number;
  /** What the cells hold; 'auto' tells emails, phones and hashes apart per cell. */
  kind: IdentifierKind | 'auto';
  /** For 'auto': whether a bare hash is of an email or a phone (a hash cannot say). */
  hashType?: DiiType;
  /** For messages; default `col<index>`. */
  name?: string;
}

export interface MapRowsOptions {
  columns: readonly MapColumn[];
  /**
   * The country national phone numbers are read in, from parsePhoneRegion('US'), for 'phone' and 'auto' columns;
   * without it a phone must already be E.164 (docs/phones.md).
   */
  phoneRegion?: PhoneRegion;
  /**
   * Position in each row of the row's country (ISO 3166 alpha-2 in any case, or an English name: `br`, `Brazil`,
   * `United Kingdom`): the phones of 'phone' and 'auto' columns are read in that country's plan, phoneRegion is
   * for rows whose cell is empty, and a country not known makes the row's phone invalid (docs/phones.md).
   */
  phoneRegionColumn?: number;
  /** Identifier cells that stand for no value, besides the empty cell and `\N`: reported `missing`. */
  nullValues?: readonly string[];
  /** A client you made (and close yourself); or give baseUrl, apiKey and clientSecret. */
  client?: ServiceClient;
  baseUrl?: string;
  apiKey?: string;
  clientSecret?: string;
  /**
   * Allows a plain `http://` baseUrl to another machine, which sends the API key unencrypted (the CLI's
   * `--insecure-http`). Plain http to this machine needs no opt-in.
   */
  insecureHttp?: boolean;
  /** Requests in flight at most (default 20, the public service's limit). */
  concurrency?: number;
  /** Identifiers per request (default and maximum 5,000). */
  batchSize?: number;
  /** Attempts per request, the first included (default 6), when mapRows makes the client. */
  maxAttempts?: number;
  /** Throw at the first request that fails after its last attempt, instead of marking its rows `error`. */
  failFast?: boolean;
  /**
   * Answers stored from earlier runs (openStateFor): fresh mappings (now < refresh_from) and opt-outs are
   * answered from it without a request, and every answered request is committed to it in one transaction.
   */
  state?: EngineState;
  /** Stops reading; requests in flight finish (up to 10 s), then the iteration ends with a MapInterruptedError. */
  signal?: AbortSignal;
  /** Called once at the end with the run's counters. */
  onDone?: (summary: MapRowsSummary) => void;
}

export type IdentifierResult =
  | { status: 'mapped'; rawUid: string; prevRawUid: string | null; refreshFrom: number; reason: null }
  | {
      status: 'optout' | 'invalid' | 'error' | 'missing';
      rawUid: null;
      prevRawUid: null;
      refreshFrom: null;
      reason: string;
    };

export interface MappedRow {
  /** The input row's cells, unchanged. */
  cells: string[];
  /** One per identifier column, in the order of `columns`. */
  results: IdentifierResult[];
}

export interface MapRowsSummary {
  counts: MapRunCounts;
  /** The client's traffic: requests, retries, 429s... */
  client: ClientStats;
}

/** The run stopped on options.signal before the input was read to its end. */
export class MapInterruptedError extends Error {
  override name = 'MapInterruptedError';
  constructor() {
    super('mapRows was interrupted (options.signal) before the end of the input');
  }
}

const CHUNK_ROWS = 1000;

/**
 * Maps every row's identifier columns to raw UIDs through POST /v3/identity/map, yielding rows in input order.
 * A request that fails after its last attempt marks its rows `error` (or throws with failFast); a 401 throws.
 */
export async function* mapRows(
  rows: AsyncIterable<readonly string[]> | Iterable<readonly string[]>,
  options: MapRowsOptions,
): AsyncGenerator<MappedRow, void, undefined> {
  const columns: EngineColumn[] = options.columns.map((c) => ({
    name: c.name ?? `col${c.index}`,
    index: c.index,
    kind: c.kind,
    ...(c.hashType !== undefined ? { hashType: c.hashType } : {}),
    ...(options.phoneRegion !== undefined && (c.kind === 'phone' || c.kind === 'auto')
      ? { phoneRegion: options.phoneRegion }
      : {}),
    ...(options.phoneRegionColumn !== undefined && (c.kind === 'phone' || c.kind === 'auto')
      ? { phoneRegionIndex: options.phoneRegionColumn }
      : {}),
    ...(options.nullValues !== undefined ? { nullMarkers: [...options.nullValues] } : {}),
  }));
  if (columns.length === 0) throw new TypeError('mapRows: give at least one identifier column');
  const limiter = new AdaptiveConcurrency({ max: options.concurrency ?? 20 });
  const client = options.client ?? makeClient(options, limiter);
  yield* streamMappedRows(rows, columns, options, { client, limiter, owned: options.client === undefined });
}

/** The service a run of mapRows talks through; `owned`: made for the run, so closed at its end. */
export interface MapConnection {
  client: ServiceClient;
  limiter: AdaptiveConcurrency;
  owned: boolean;
}

/** mapRows over a connection made by its caller (IdentityClient shares one across calls). */
export async function* streamMappedRows(
  rows: AsyncIterable<readonly string[]> | Iterable<readonly string[]>,
  columns: readonly EngineColumn[],
  options: Omit<MapRowsOptions, 'columns'>,
  connection: MapConnection,
): AsyncGenerator<MappedRow, void, undefined> {
  const { client, limiter } = connection;
  const ownClient = connection.owned;
  const stop = new AbortController();
  const onOuterAbort = (): void => stop.abort();
  options.signal?.addEventListener('abort', onOuterAbort, { once: true });
  if (options.signal?.aborted) stop.abort();

  // the engine pushes answered chunks; the consumer pulls rows. One chunk is handed over at a time, so a slow
  // consumer holds the engine back instead of letting rows pile up.
  const ready: RowChunk[] = [];
  let taken: (() => void) | null = null;
  let wakeConsumer: (() => void) | null = null;
  let finished = false;
  let counts: MapRunCounts | undefined;
  const running = runMapJob({
    input: inputChunks(rows),
    columns,
    client,
    limiter,
    output: {
      kind: 'chunks',
      onChunk: (chunk) =>
        new Promise<void>((resolve) => {
          ready.push(chunk);
          taken = resolve;
          wakeConsumer?.();
        }),
    },
    batchSize: options.batchSize,
    maxAttempts: options.maxAttempts ?? 6,
    state: options.state,
    failFast: options.failFast === true,
    signal: stop.signal,
    onProgress: (c) => {
      counts = c;
    },
  })
    .then((result) => {
      counts = result.counts;
      return result;
    })
    .finally(() => {
      finished = true;
      wakeConsumer?.();
    });
  let outcome: MapRunOutcome | undefined;
  try {
    for (;;) {
      const chunk = ready.shift();
      if (chunk !== undefined) {
        for (let r = 0; r < chunk.rows.length; r++) yield { cells: chunk.rows[r].cells, results: rowResults(chunk, r) };
        const release = taken as (() => void) | null;
        taken = null;
        release?.();
        continue;
      }
      if (finished) break;
      await new Promise<void>((resolve) => {
        wakeConsumer = resolve;
      });
      wakeConsumer = null;
    }
    outcome = (await running).outcome;
  } finally {
    if (outcome === undefined) {
      // the consumer stopped early (break, throw): stop the engine and let it settle
      stop.abort();
      const release = taken as (() => void) | null;
      release?.();
      await running.catch(() => undefined);
    }
    options.signal?.removeEventListener('abort', onOuterAbort);
    options.onDone?.({ counts: counts ?? newMapRunCounts(), client: { ...client.stats } });
    if (ownClient) await client.close();
  }
  switch (outcome.kind) {
    case 'completed':
      return;
    case 'interrupted':
      throw new MapInterruptedError();
    default:
      throw outcome.error;
  }
}

function makeClient(options: MapRowsOptions, limiter: AdaptiveConcurrency): ServiceClient {
  if (!options.baseUrl || !options.apiKey || !options.clientSecret) {
    throw new TypeError(
      'mapRows: give options.client, or options.baseUrl with options.apiKey and options.clientSecret',
    );
  }
  // the CLI's rules for the URL; proxy variables are not read, as createServiceClient does not read them
  const target = resolveServiceTarget(
    {
      baseUrl: options.baseUrl,
      apiKey: options.apiKey,
      clientSecret: options.clientSecret,
      ...(options.insecureHttp !== undefined ? { insecureHttp: options.insecureHttp } : {}),
    },
    'mapRows options',
    {},
  );
  return createServiceClient({
    baseUrl: target.baseUrl,
    apiKey: options.apiKey,
    clientSecret: options.clientSecret,
    connections: limiter.max,
    ...(options.maxAttempts !== undefined ? { maxAttempts: options.maxAttempts } : {}),
    onRetry: limiter.onRetry,
  });
}

async function* inputChunks(
  rows: AsyncIterable<readonly string[]> | Iterable<readonly string[]>,
): AsyncGenerator<InputRow[]> {
  let chunk: InputRow[] = [];
  let line = 0;
  for await (const cells of rows) {
    chunk.push({ line: ++line, cells: cells.slice() });
    if (chunk.length >= CHUNK_ROWS) {
      yield chunk;
      chunk = [];
    }
  }
  if (chunk.length > 0) yield chunk;
}

function rowResults(chunk: RowChunk, r: number): IdentifierResult[] {
  const results: IdentifierResult[] = [];
  for (let c = 0; c < chunk.width; c++) {
    const slot = r * chunk.width + c;
    const status = chunk.status[slot];
    const mapped = chunk.mapped[slot];
    if (status === SLOT.mapped && mapped !== null) {
      results.push({ status: 'mapped', rawUid: mapped.u, prevRawUid: mapped.p, refreshFrom: mapped.r, reason: null });
    } else {
      const name = SLOT_STATUS_NAMES[status];
      results.push({
        status: name === 'optout' || name === 'invalid' || name === 'missing' ? name : 'error',
        rawUid: null,
        prevRawUid: null,
        refreshFrom: null,
        reason: chunk.reason[slot] ?? '',
      });
    }
  }
  return results;
}
