/** IdentityClient: every call of the identity service for a Node program, on the CLI's client and engines. */
import { createServiceClient, type ServiceClient } from '../client/index.js';
import type { PhoneRegion } from '../identity/index.js';
import type { EngineColumn } from '../pipeline/map/map-engine.js';
import type { InputRow } from '../pipeline/io/table.js';
import { checkRawUidRows } from '../pipeline/optout/optout-sweep.js';
import { RemapEngine, type RemapChange, type RemapCounts, type RemapState } from '../pipeline/remap/remap-engine.js';
import { AdaptiveConcurrency } from '../pipeline/run/adaptive-limiter.js';
import { prepareTokenInput, refreshIdentity } from '../pipeline/tokens/tokens.js';
import { MAX_PARALLEL_MAP_REQUESTS, type TokenIdentity } from '../protocol/index.js';
import {
  checkIdentifier,
  checkPhoneRegion,
  checkRawUids,
  checkRefreshable,
  checkSignal,
  checkStringList,
  checkText,
  IDENTIFIER_KEYS,
  KIND_OF_KEY,
  type Identifier,
  type IdentifierKey,
  type RefreshableIdentity,
} from './argument-checks.js';
import {
  AbortError,
  ArgumentError,
  DecryptError,
  libraryError,
  UnauthorizedError,
  UnexpectedResponseError,
} from './errors.js';
import { MapInterruptedError, streamMappedRows, type MappedRow } from './map-rows.js';
import {
  requireCredentials,
  resolveServiceTarget,
  type ServiceTarget,
  type ServiceTargetOptions,
} from './service-target.js';

export type { Identifier, RefreshableIdentity } from './argument-checks.js';
export type { TokenIdentity } from '../protocol/index.js';

export interface IdentityClientOptions extends ServiceTargetOptions {
  /**
   * The country national phone numbers are read in (ISO 3166 alpha-2, e.g. `'US'`), for every call that takes
   * phones; a call's own phoneRegion goes before it. Without one a phone must already be E.164 (`+14155550100`).
   */
  phoneRegion?: string;
  /**
   * Map requests in flight at most (default and, against the public service, maximum 20). A 429 lowers it for a
   * while, as in the CLI.
   */
  concurrency?: number;
}

/** Options every call takes. */
export interface CallOptions {
  /** Stops the call: nothing more is sent, and the call rejects with an AbortError. */
  signal?: AbortSignal;
}

/** Options of the calls that read phones. */
export interface PhoneCallOptions extends CallOptions {
  /** ISO 3166 alpha-2 country for national phone numbers; overrides the client's phoneRegion. */
  phoneRegion?: string;
}

/** Options of generateToken. */
export interface GenerateTokenOptions extends PhoneCallOptions {
  /**
   * The user's IAB TCF consent string, as the consent management platform wrote it. Only EUID reads it: without
   * consent for The Trade Desk (vendor 21) to the purposes EUID needs, the answer is `insufficient_user_consent`;
   * a string the service cannot read is refused with a ClientError ("User consent is invalid"). UID2 ignores it.
   */
  tcfConsentString?: string;
}

/**
 * What generateToken answers: an identity to hand to the browser, the user opted out, or (EUID, with a
 * tcfConsentString) the user's consent does not allow a token.
 */
export type GenerateTokenResult =
  | { status: 'success'; identity: TokenIdentity }
  | { status: 'optout' }
  | { status: 'insufficient_user_consent' };

/**
 * What refreshToken answers. `expired_token` and `invalid_token` are told apart only for a client with an API key;
 * without one the service says only that it refuses (`refused`). Either way the user has to sign in again.
 */
export type RefreshTokenResult =
  | { status: 'success'; identity: TokenIdentity }
  | { status: 'optout' }
  | { status: 'expired_token' | 'invalid_token' | 'refused'; message: string };

/** The identifiers to map, by kind; give any of the four lists, each with at least one item. */
export interface MapIdentitiesInput {
  email?: readonly string[];
  phone?: readonly string[];
  /** Base64 (44 characters) or hex (64) SHA-256 of normalized emails. */
  emailHash?: readonly string[];
  /** Base64 (44 characters) or hex (64) SHA-256 of E.164 phones. */
  phoneHash?: readonly string[];
}

/**
 * The answer for one identifier. `refreshFrom`: when to map it again (its raw UID may change then);
 * `prevRawUid`: the raw UID it had before its salt last rotated, within 90 days, else null.
 */
export type IdentityMapResult =
  | { status: 'mapped'; rawUid: string; prevRawUid: string | null; refreshFrom: Date }
  | { status: 'optout' | 'invalid'; reason: string };

/** One result per input item, in the input's order, under the same key. A kind not given has an empty list. */
export interface MapIdentitiesResult {
  email: IdentityMapResult[];
  phone: IdentityMapResult[];
  emailHash: IdentityMapResult[];
  phoneHash: IdentityMapResult[];
}

/** An entry of a state file whose raw UID changed, or that opted out or became invalid, in a remapDue run. */
export interface RemapDueChange {
  /** Whether the entry is an email's or a phone's hash. */
  kind: 'email' | 'phone';
  /** The stored hash (base64), as mapRows' state file keeps it: the entry's key. */
  hash: string;
  /** The raw UID the state file held before this run. */
  oldRawUid: string | null;
  /** The raw UID now; null when it opted out or became invalid. */
  rawUid: string | null;
  prevRawUid: string | null;
  /** When to map it again; null when it opted out or became invalid. */
  refreshFrom: Date | null;
  status: 'mapped' | 'optout' | 'invalid';
}

/** Options of remapDue. */
export interface RemapDueOptions extends CallOptions {
  /** Re-maps at most this many due entries (default: all of them). */
  limit?: number;
  /** The time entries are due at (refresh_from at or before it); default now. */
  now?: Date;
  /**
   * The changes of each answered request, once it is committed to the state file; awaited, so a slow consumer
   * holds the run back. An entry that kept its raw UID (only refresh_from moved) is not a change.
   */
  onChanges?: (changes: RemapDueChange[]) => void | Promise<void>;
}

/** What a remapDue run did. Entries of a failed request stay due: running again picks them up. */
export interface RemapDueResult {
  counts: RemapCounts;
  /** Why requests failed after their retries (the first few distinct messages); empty when none did. */
  requestErrors: string[];
}

/** Opt-out requests in flight against a private operator (the public service takes one at a time). */
const PRIVATE_OPTOUT_CONCURRENCY = 4;

/** Rows handed to the map engine at once. */
const CHUNK_ROWS = 1000;

/**
 * A client of the UID2/EUID identity service. Requests are encrypted and retried (429, 5xx, network failures, with
 * backoff), maps are batched (5,000 identifiers or 1 MB a request, 20 in flight); emails and phones are normalized
 * and hashed here, so only hashes are sent. Every failure is an exported error class with a stable `code`.
 *
 * ```ts
 * const client = new IdentityClient({ env: 'integ', apiKey, clientSecret });
 * try {
 *   const answer = await client.generateToken({ email: 'user@example.com' });
 *   if (answer.status === 'success') send(answer.identity);
 * } finally {
 *   await client.close();
 * }
 * ```
 */
export class IdentityClient {
  private readonly target: ServiceTarget;
  private readonly service: ServiceClient;
  private readonly limiter: AdaptiveConcurrency;
  private readonly phoneRegion: PhoneRegion | undefined;

  /** Checks the options (an ArgumentError says which is wrong); nothing is sent until a call. */
  constructor(options: IdentityClientOptions) {
    this.target = resolveServiceTarget(options, 'IdentityClient options');
    this.phoneRegion = checkPhoneRegion(options.phoneRegion, 'IdentityClient options.phoneRegion');
    const wanted = options.concurrency ?? MAX_PARALLEL_MAP_REQUESTS;
    if (!Number.isInteger(wanted) || wanted < 1 || wanted > 100)
      throw new ArgumentError(`IdentityClient options.concurrency must be a whole number from 1 to 100, got ${wanted}`);
    const concurrency = this.target.isPublic ? Math.min(wanted, MAX_PARALLEL_MAP_REQUESTS) : wanted;
    this.limiter = new AdaptiveConcurrency({ max: concurrency });
    this.service = createServiceClient({
      baseUrl: this.target.baseUrl,
      ...(this.target.apiKey !== undefined ? { apiKey: this.target.apiKey } : {}),
      ...(this.target.clientSecret !== undefined ? { clientSecret: this.target.clientSecret } : {}),
      connections: concurrency,
      proxy: this.target.proxy,
      ...(this.target.timeoutMs !== undefined ? { requestTimeoutMs: this.target.timeoutMs } : {}),
      ...(this.target.maxAttempts !== undefined ? { maxAttempts: this.target.maxAttempts } : {}),
      onRetry: this.limiter.onRetry,
    });
  }

  /** The service's base URL the calls go to. */
  get baseUrl(): string {
    return this.target.baseUrl;
  }

  /**
   * POST /v2/token/generate for one user: the identity (advertising token, refresh token and their times) to give to
   * the browser, `optout`, or on EUID `insufficient_user_consent` when options.tcfConsentString does not give the
   * consent EUID needs. The email or phone is normalized and hashed here; only its hash is sent.
   * @throws ArgumentError for an identifier that is not valid (the message says why, never the value).
   */
  async generateToken(identifier: Identifier, options: GenerateTokenOptions = {}): Promise<GenerateTokenResult> {
    const input = this.tokenInput(identifier, 'generateToken identifier', options);
    const consent =
      options.tcfConsentString !== undefined
        ? { tcf_consent_string: checkText(options.tcfConsentString, 'generateToken options.tcfConsentString') }
        : {};
    const signal = checkSignal(options.signal, 'generateToken options.signal');
    requireCredentials(this.target, 'generateToken');
    try {
      return await this.service.tokenGenerate({ ...input, ...consent }, { signal });
    } catch (err) {
      throw libraryError(err);
    }
  }

  /**
   * POST /v2/token/refresh with the identity a generate or an earlier refresh returned: a new identity, `optout`,
   * or why the service refuses the refresh token. Needs no API key.
   * @throws DecryptError when the refresh_response_key is not the one that came with the refresh_token.
   */
  async refreshToken(identity: RefreshableIdentity, options: CallOptions = {}): Promise<RefreshTokenResult> {
    const given = checkRefreshable(identity, 'refreshToken identity');
    const signal = checkSignal(options.signal, 'refreshToken options.signal');
    let outcome: Awaited<ReturnType<typeof refreshIdentity>>;
    try {
      outcome = await refreshIdentity(
        this.service,
        { refreshToken: given.refresh_token, refreshResponseKey: given.refresh_response_key },
        signal,
      );
    } catch (err) {
      throw libraryError(err);
    }
    switch (outcome.kind) {
      case 'success':
        return { status: 'success', identity: outcome.identity };
      case 'optout':
        return { status: 'optout' };
      case 'expired_token':
        return { status: 'expired_token', message: outcome.message };
      case 'invalid_token':
      case 'unreadable':
        return { status: 'invalid_token', message: outcome.message };
      case 'error':
        return { status: 'refused', message: outcome.message };
      case 'key_mismatch':
        throw new DecryptError(outcome.message);
      case 'unauthorized':
        throw new UnauthorizedError('unauthorized', outcome.message, 401, 'unauthorized');
    }
  }

  /**
   * POST /v2/token/validate: whether `token` is an advertising token of this identifier. The service answers true
   * only for its validate test identities (`validate@example.com`, `+12345678901`).
   */
  async validateToken(token: string, identifier: Identifier, options: PhoneCallOptions = {}): Promise<boolean> {
    const advertisingToken = checkText(token, 'validateToken token');
    const input = this.tokenInput(identifier, 'validateToken identifier', options);
    const signal = checkSignal(options.signal, 'validateToken options.signal');
    requireCredentials(this.target, 'validateToken');
    try {
      return await this.service.tokenValidate({ ...input, token: advertisingToken }, { signal });
    } catch (err) {
      throw libraryError(err);
    }
  }

  /**
   * POST /v3/identity/map for lists of any size: batched (5,000 identifiers or 1 MB a request), up to 20 requests
   * in flight, each retried; repeats are sent once. Results line up with the inputs. An identifier that is not
   * valid is an `invalid` result, not an error.
   * @throws the first request's error that outlived its retries (UnauthorizedError, NetworkError...).
   */
  async mapIdentities(input: MapIdentitiesInput, options: PhoneCallOptions = {}): Promise<MapIdentitiesResult> {
    const lists = checkMapInput(input);
    const region =
      options.phoneRegion !== undefined
        ? checkPhoneRegion(options.phoneRegion, 'mapIdentities options.phoneRegion')
        : this.phoneRegion;
    const signal = checkSignal(options.signal, 'mapIdentities options.signal');
    requireCredentials(this.target, 'mapIdentities');
    const keys = IDENTIFIER_KEYS.filter((k) => lists[k] !== undefined);
    const columns: EngineColumn[] = keys.map((key, index) => ({
      name: key,
      index,
      kind: KIND_OF_KEY[key],
      ...(key === 'phone' && region !== undefined ? { phoneRegion: region } : {}),
    }));
    const out: MapIdentitiesResult = { email: [], phone: [], emailHash: [], phoneHash: [] };
    const rows = Math.max(...keys.map((k) => (lists[k] as readonly string[]).length));
    const run = streamMappedRows(
      rowsOf(keys, lists, rows),
      columns,
      {
        failFast: true,
        ...(signal !== undefined ? { signal } : {}),
        ...(this.target.maxAttempts !== undefined ? { maxAttempts: this.target.maxAttempts } : {}),
      },
      { client: this.service, limiter: this.limiter, owned: false },
    );
    try {
      let r = 0;
      for await (const row of run) {
        for (let c = 0; c < keys.length; c++) {
          if (r < (lists[keys[c]] as readonly string[]).length) out[keys[c]].push(mapResultOf(row, c));
        }
        r++;
      }
    } catch (err) {
      if (err instanceof MapInterruptedError) throw new AbortError('mapIdentities was aborted (options.signal)');
      throw libraryError(err);
    }
    return out;
  }

  /**
   * POST /v2/optout/status for raw UIDs of any number (5,000 a request; one request at a time against the public
   * service, as it asks): the ones opted out, each with when it opted out. Raw UIDs not in the map are not opted out.
   * @throws ArgumentError when an item is not a raw UID (44 characters of base64), before anything is sent.
   */
  async checkOptOut(rawUids: readonly string[], options: CallOptions = {}): Promise<Map<string, Date>> {
    const list = checkRawUids(rawUids, 'checkOptOut rawUids');
    const signal = checkSignal(options.signal, 'checkOptOut options.signal');
    requireCredentials(this.target, 'checkOptOut');
    const optedOut = new Map<string, Date>();
    let firstFailure: unknown;
    const result = await checkRawUidRows(rawUidRows(list), {
      column: 0,
      concurrency: this.target.isPublic ? 1 : PRIVATE_OPTOUT_CONCURRENCY,
      ...(signal !== undefined ? { signal } : {}),
      check: async (ids, stop) => {
        try {
          return await this.service.optoutStatus(ids, { signal: stop });
        } catch (err) {
          firstFailure ??= err;
          throw err;
        }
      },
      onRows: (rows) => {
        for (const { row, verdict } of rows) {
          if (verdict.kind === 'opted_out') optedOut.set(row.cells[0], new Date(verdict.sinceMs));
        }
      },
    });
    if (result.outcome.kind === 'interrupted' || signal?.aborted)
      throw new AbortError('checkOptOut was aborted (options.signal)');
    if (result.outcome.kind === 'failed' || result.outcome.kind === 'auth-refused')
      throw libraryError(firstFailure ?? result.outcome.error);
    if (result.counts.status.error > 0) throw libraryError(firstFailure);
    return optedOut;
  }

  /**
   * Re-maps the entries of a state file (openStateFor, with this client's base URL) whose refresh_from has passed,
   * as `uid2-batch remap-due` does: page by page through the file's index of due entries, 5,000 a request, each
   * answered request committed in one transaction, so an interrupted run resumes by running again.
   * @throws UnauthorizedError and the errors every further request would meet too (the service unreachable, clock
   * skew); AbortError when the signal fires (the requests in flight are committed first).
   */
  async remapDue(state: RemapState, options: RemapDueOptions = {}): Promise<RemapDueResult> {
    if (typeof state !== 'object' || state === null || typeof state.selectDue !== 'function')
      throw new ArgumentError('remapDue state must be a state file from openStateFor(path, { baseUrl })');
    const signal = checkSignal(options.signal, 'remapDue options.signal');
    if (options.limit !== undefined && (!Number.isInteger(options.limit) || options.limit < 1))
      throw new ArgumentError(`remapDue options.limit must be a whole number of at least 1, got ${options.limit}`);
    if (options.now !== undefined && !(options.now instanceof Date && Number.isFinite(options.now.getTime())))
      throw new ArgumentError('remapDue options.now must be a valid Date');
    requireCredentials(this.target, 'remapDue');
    const onChanges = options.onChanges;
    const engine = new RemapEngine({
      state,
      mapBatch: (request, stop) => this.service.mapV3(request, { signal: stop }),
      nowS: Math.floor((options.now?.getTime() ?? Date.now()) / 1000),
      limiter: this.limiter,
      ...(options.limit !== undefined ? { limit: options.limit } : {}),
      ...(signal !== undefined ? { signal } : {}),
      ...(onChanges !== undefined ? { onChanges: (changes) => onChanges(changes.map(remapDueChangeOf)) } : {}),
    });
    const result = await engine.run();
    switch (result.outcome.kind) {
      case 'completed':
        return { counts: result.counts, requestErrors: result.batchErrors };
      case 'interrupted':
        throw new AbortError('remapDue was aborted (options.signal); what was answered is committed');
      default:
        throw libraryError(result.outcome.error);
    }
  }

  /** Closes the connections. Calls after close fail. */
  async close(): Promise<void> {
    await this.service.close();
  }

  private tokenInput(identifier: Identifier, what: string, options: PhoneCallOptions) {
    const { key, value } = checkIdentifier(identifier, what);
    const region =
      options.phoneRegion !== undefined
        ? checkPhoneRegion(options.phoneRegion, `${what} phoneRegion`)
        : this.phoneRegion;
    const prepared = prepareTokenInput(KIND_OF_KEY[key], value, region !== undefined ? { phoneRegion: region } : {});
    if (!prepared.ok) throw new ArgumentError(`${what}.${key} is not valid: ${prepared.reason}`);
    return prepared.input;
  }
}

/** The lists given, checked: only the four known keys, each a non-empty list of strings, at least one list. */
function checkMapInput(input: unknown): Partial<Record<IdentifierKey, readonly string[]>> {
  const hint = 'give { email: [...] }, { phone: [...] }, { emailHash: [...] } or { phoneHash: [...] }, or several';
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw new ArgumentError(`mapIdentities input must be an object: ${hint}`);
  const record = input as Record<string, unknown>;
  const unknown = Object.keys(record).filter((k) => !IDENTIFIER_KEYS.includes(k as IdentifierKey));
  if (unknown.length > 0) throw new ArgumentError(`mapIdentities input has unknown key ${unknown.join(', ')}: ${hint}`);
  const lists: Partial<Record<IdentifierKey, readonly string[]>> = {};
  for (const key of IDENTIFIER_KEYS) {
    if (record[key] !== undefined)
      lists[key] = checkStringList(record[key], `mapIdentities input.${key}`, { allowEmpty: false });
  }
  if (Object.keys(lists).length === 0) throw new ArgumentError(`mapIdentities input has no identifiers: ${hint}`);
  return lists;
}

/** Row r holds item r of each list (an empty cell past a list's end is not reported). */
function* rowsOf(
  keys: readonly IdentifierKey[],
  lists: Partial<Record<IdentifierKey, readonly string[]>>,
  rows: number,
): Generator<string[]> {
  for (let r = 0; r < rows; r++) yield keys.map((k) => (lists[k] as readonly string[])[r] ?? '');
}

function mapResultOf(row: MappedRow, column: number): IdentityMapResult {
  const result = row.results[column];
  switch (result.status) {
    case 'mapped':
      return {
        status: 'mapped',
        rawUid: result.rawUid,
        prevRawUid: result.prevRawUid,
        refreshFrom: new Date(result.refreshFrom * 1000),
      };
    case 'optout':
      return { status: 'optout', reason: result.reason };
    case 'invalid':
      return { status: 'invalid', reason: result.reason };
    case 'missing':
      return { status: 'invalid', reason: 'empty' };
    case 'error':
      // failFast makes a failed request throw; an item of an answered request is never `error`
      throw new UnexpectedResponseError(`mapIdentities got an item without an answer: ${result.reason}`);
  }
}

function remapDueChangeOf(change: RemapChange): RemapDueChange {
  return {
    kind: change.kind,
    hash: change.hash,
    oldRawUid: change.oldRawUid,
    rawUid: change.newRawUid,
    prevRawUid: change.prevRawUid,
    refreshFrom: change.refreshFrom === null ? null : new Date(change.refreshFrom * 1000),
    status: change.status,
  };
}

async function* rawUidRows(rawUids: readonly string[]): AsyncGenerator<InputRow[]> {
  for (let i = 0; i < rawUids.length; i += CHUNK_ROWS) {
    yield rawUids.slice(i, i + CHUNK_ROWS).map((rawUid, j) => ({ line: i + j + 1, cells: [rawUid] }));
  }
}
