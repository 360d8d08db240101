import pLimit from 'p-limit';
import {
  isIdentifierKind,
  needsPhoneRegion,
  phoneRegionOfRow,
  type IdentifierKind,
  type PhoneRegion,
  type PrepareOptions,
} from '../../identity/index.js';
import type { TokenIdentity } from '../../protocol/index.js';
import type { ServiceClient } from '../../client/types.js';
import {
  InputError,
  rowProblemInvalidates,
  rowProblemReason,
  type InputRow,
  type TableSink,
  type TableSource,
} from '../io/table.js';
import { NULL_MARKER } from '../map/identifier-columns.js';
import {
  classifyFailure,
  isUnreadableConsent,
  prepareTokenInput,
  type Failure,
  type PreparedTokenInput,
} from './tokens.js';

/**
 * Token work over a table, for a test audience (`token generate --input`) or the Token Validator's CSV
 * (`token validate --input`: identifier, identifier_type, token). Rows leave in input order, one chunk at a time;
 * at most `concurrency` calls are in flight and each call gets the client's retries.
 */

export interface TokenBatchRun {
  source: TableSource;
  /** Opened once the output header is known, so a bad input fails before an output file exists. */
  openSink(header: string[]): Promise<TableSink>;
  client: ServiceClient;
  concurrency: number;
  /**
   * Phones in national form are read as this country's (prepareIdentifier's phoneRegion); with
   * phoneRegionColumn, the country of the rows that leave that column empty.
   */
  phoneRegion?: PhoneRegion;
  /** The column holding each row's country (--phone-region-col), whose phones are read in that country's plan. */
  phoneRegionColumn?: string;
  /** Identifier cells that stand for no value, besides NULL_MARKER (`\N`): read as an empty identifier. */
  nullValues?: readonly string[];
  /**
   * The IAB TCF consent string sent with every generate request whose row has none of its own (an empty or null
   * `tcf_consent_string` cell, or no such column). EUID reads it; UID2 ignores it.
   */
  tcfConsentString?: string;
  signal?: AbortSignal;
  /** Filled as rows are prepared: phones sent, and phones refused only for want of a region (needsPhoneRegion). */
  phones?: { validPhones: number; phonesNeedingRegion: number };
  /** Called as each row is finished, with the running count. */
  onRow?(done: number): void;
}

/**
 * A failure that would hit every row the same way (the key is refused, the secret is wrong, the clock is off):
 * the run stops and the output file is not written.
 */
export class BatchStopped extends Error {
  override name = 'BatchStopped';
  constructor(readonly failure: Failure) {
    super(failure.message);
  }
}

/**
 * The run-wide consent string (TokenBatchRun.tcfConsentString) is one the service cannot read: every row relying on
 * it would be refused alike, so the run stops rather than fill a file with invalid rows.
 */
export class RunConsentRefused extends Error {
  override name = 'RunConsentRefused';
}

const FATAL: ReadonlySet<Failure['kind']> = new Set(['unauthorized', 'wrong_secret', 'clock_skew']);

/** The column of a generate input holding each row's TCF consent string: the API's field name, as for `token`. */
export const CONSENT_COLUMN = 'tcf_consent_string';

export const IDENTIFIER_TYPES_HINT = 'identifier_type is one of email, phone, email_hash, phone_hash';

/** `Email`, ` phone `, `email-hash` and `email hash` all read as the API's field names. */
export function readIdentifierType(cell: string): IdentifierKind | null {
  const t = cell
    .trim()
    .toLowerCase()
    .replace(/[\s-]+/g, '_');
  return isIdentifierKind(t) ? t : null;
}

interface Columns {
  identifier: number;
  identifierType: number;
  token: number;
  /** The row's TCF consent string (generate), or -1. */
  consent: number;
  /** The row's country (phoneRegionColumn), or -1. */
  country: number;
}

function findColumns(source: TableSource, needToken: boolean, countryColumn: string | undefined): Columns {
  const index = (name: string): number =>
    source.header.findIndex((h) => h.trim().toLowerCase() === name.trim().toLowerCase());
  const cols = {
    identifier: index('identifier'),
    identifierType: index('identifier_type'),
    token: index('token'),
    consent: index(CONSENT_COLUMN),
    country: countryColumn === undefined ? -1 : index(countryColumn),
  };
  const missing = [
    cols.identifier < 0 ? 'identifier' : undefined,
    cols.identifierType < 0 ? 'identifier_type' : undefined,
    needToken && cols.token < 0 ? 'token' : undefined,
    countryColumn !== undefined && cols.country < 0 ? `${countryColumn} (--phone-region-col)` : undefined,
  ].filter((m): m is string => m !== undefined);
  if (missing.length > 0) {
    const expected = needToken ? 'identifier, identifier_type, token' : 'identifier, identifier_type';
    throw new InputError(
      source.name,
      1,
      `missing column(s) ${missing.join(', ')}`,
      `the header must name the columns ${expected}; ${IDENTIFIER_TYPES_HINT}`,
    );
  }
  return cols;
}

/**
 * The output header: the input's columns, then `added`. A column the input already has (a re-run over an earlier
 * output) is overwritten in place rather than duplicated.
 */
function outputLayout(header: string[], added: readonly string[]): { header: string[]; positions: number[] } {
  const out = [...header];
  const positions = added.map((name) => {
    const at = out.findIndex((h) => h.trim().toLowerCase() === name);
    if (at >= 0) return at;
    out.push(name);
    return out.length - 1;
  });
  return { header: out, positions };
}

type RowPrep =
  | { ok: true; kind: IdentifierKind; value: string; options: PrepareOptions }
  | { ok: false; reason: string };

function prepRow(row: InputRow, cols: Columns, run: TokenBatchRun): RowPrep {
  if (row.problem && rowProblemInvalidates(row.problem)) return { ok: false, reason: rowProblemReason(row.problem) };
  const kind = readIdentifierType(row.cells[cols.identifierType] ?? '');
  if (kind === null) return { ok: false, reason: `unknown identifier_type: ${IDENTIFIER_TYPES_HINT}` };
  const value = row.cells[cols.identifier] ?? '';
  const isNull = (cell: string): boolean => cell === NULL_MARKER || (run.nullValues?.includes(cell) ?? false);
  let options: PrepareOptions = run;
  if (cols.country >= 0) {
    const country = row.cells[cols.country] ?? '';
    options = { phoneRegion: phoneRegionOfRow(isNull(country) ? '' : country, run.phoneRegion) };
  }
  // a NULL is no identifier: the row reads as one whose identifier is empty
  return { ok: true, kind, value: isNull(value) ? '' : value, options };
}

function tallyPhone(run: TokenBatchRun, value: string, prepared: PreparedTokenInput): void {
  if (run.phones === undefined) return;
  if (prepared.ok) {
    if (prepared.type === 'phone') run.phones.validPhones++;
  } else if (needsPhoneRegion(value, prepared)) run.phones.phonesNeedingRegion++;
}

/** Runs `work` over every row with bounded concurrency, writing each chunk in input order. */
async function runRows(
  run: TokenBatchRun,
  header: string[],
  work: (row: InputRow, signal: AbortSignal) => Promise<string[]>,
): Promise<void> {
  const sink = await run.openSink(header);
  const limit = pLimit(Math.max(1, Math.floor(run.concurrency)));
  const stop = new AbortController();
  const onOuterAbort = (): void => stop.abort(run.signal?.reason);
  run.signal?.addEventListener('abort', onOuterAbort, { once: true });
  let done = 0;
  try {
    for await (const chunk of run.source.rows()) {
      if (stop.signal.aborted) break;
      const out = await Promise.all(
        chunk.map((row) =>
          limit(async () => {
            if (stop.signal.aborted) throw stop.signal.reason ?? new Error('stopped');
            try {
              const cells = await work(row, stop.signal);
              run.onRow?.(++done);
              return cells;
            } catch (err) {
              // one fatal failure stops the calls still queued or in flight
              stop.abort(err);
              limit.clearQueue();
              throw err;
            }
          }),
        ),
      );
      await sink.writeRows(out);
    }
    if (stop.signal.aborted) throw stop.signal.reason ?? new Error('stopped');
    await sink.commit();
  } catch (err) {
    await sink.abort();
    throw err;
  } finally {
    run.signal?.removeEventListener('abort', onOuterAbort);
  }
}

function failOrStop(err: unknown, signal: AbortSignal): Failure {
  if (signal.aborted) throw signal.reason ?? err;
  const failure = classifyFailure(err);
  if (FATAL.has(failure.kind)) throw new BatchStopped(failure);
  return failure;
}

// ---------------------------------------------------------------------------------------------------------------

export interface ValidateBatchCounts {
  rows: number;
  /** `true`: the token was made from the row's identifier. */
  valid: number;
  /** `false`: it was not. */
  invalid: number;
  /** `invalid`: the row cannot be checked (its identifier, identifier_type or token is malformed): data, not a failure. */
  rejected: number;
  /** `error`: the check failed (network, service); running again may succeed. */
  error: number;
}

export const VALIDATE_COLUMNS = ['valid', 'hash', 'reason'] as const;

/**
 * Every row comes out with `valid` (true | false | invalid | error), `hash` (the normalized hash sent, empty when
 * the identifier was rejected locally) and `reason`. `invalid` is a row no re-run can fix (a malformed identifier
 * or token); `error` is a check that failed and may succeed when run again.
 */
export async function validateTokenBatch(run: TokenBatchRun): Promise<ValidateBatchCounts> {
  const cols = findColumns(run.source, true, run.phoneRegionColumn);
  const layout = outputLayout(run.source.header, VALIDATE_COLUMNS);
  const counts: ValidateBatchCounts = { rows: 0, valid: 0, invalid: 0, rejected: 0, error: 0 };
  const finish = (
    row: InputRow,
    valid: 'true' | 'false' | 'invalid' | 'error',
    hash: string,
    reason: string,
  ): string[] => {
    counts.rows++;
    if (valid === 'true') counts.valid++;
    else if (valid === 'false') counts.invalid++;
    else if (valid === 'invalid') counts.rejected++;
    else counts.error++;
    const cells = [...row.cells];
    while (cells.length < layout.header.length) cells.push('');
    [valid, hash, reason].forEach((v, i) => {
      cells[layout.positions[i]!] = v;
    });
    return cells;
  };
  await runRows(run, layout.header, async (row, signal) => {
    const prep = prepRow(row, cols, run);
    if (!prep.ok) return finish(row, 'invalid', '', prep.reason);
    const prepared = prepareTokenInput(prep.kind, prep.value, prep.options);
    tallyPhone(run, prep.value, prepared);
    if (!prepared.ok) return finish(row, 'invalid', '', prepared.reason);
    const token = (row.cells[cols.token] ?? '').trim();
    if (token === '') return finish(row, 'invalid', prepared.hash, 'empty token');
    try {
      const match = await run.client.tokenValidate({ token, ...prepared.input }, { signal });
      return finish(
        row,
        match ? 'true' : 'false',
        prepared.hash,
        match ? '' : 'the token was not generated from this identifier',
      );
    } catch (err) {
      const failure = failOrStop(err, signal);
      // a token the service cannot read stays unreadable however often it is sent
      if (failure.kind === 'client_error' && /^Invalid token/i.test(failure.message))
        return finish(row, 'invalid', prepared.hash, `the service cannot read this token (${failure.message})`);
      return finish(row, 'error', prepared.hash, failure.message);
    }
  });
  return counts;
}

// ---------------------------------------------------------------------------------------------------------------

export interface GenerateBatchCounts {
  rows: number;
  success: number;
  optout: number;
  insufficient_user_consent: number;
  invalid: number;
  error: number;
}

export const IDENTITY_COLUMNS = [
  'advertising_token',
  'refresh_token',
  'identity_expires',
  'refresh_from',
  'refresh_expires',
  'refresh_response_key',
] as const satisfies readonly (keyof TokenIdentity)[];

export const GENERATE_COLUMNS = [...IDENTITY_COLUMNS, 'status', 'reason'] as const;

export type GenerateRowStatus = 'success' | 'optout' | 'insufficient_user_consent' | 'invalid' | 'error';

/** One identity per row: the row, the §2.2 fields (empty unless `success`), `status` and `reason`. */
export async function generateTokenBatch(run: TokenBatchRun): Promise<GenerateBatchCounts> {
  const cols = findColumns(run.source, false, run.phoneRegionColumn);
  const layout = outputLayout(run.source.header, GENERATE_COLUMNS);
  const counts: GenerateBatchCounts = {
    rows: 0,
    success: 0,
    optout: 0,
    insufficient_user_consent: 0,
    invalid: 0,
    error: 0,
  };
  const isNull = (cell: string): boolean => cell === NULL_MARKER || (run.nullValues?.includes(cell) ?? false);
  /** The row's own consent string, else the run's; undefined sends none. */
  const consentOf = (row: InputRow): { text: string; own: boolean } | undefined => {
    const cell = cols.consent >= 0 ? (row.cells[cols.consent] ?? '').trim() : '';
    if (cell !== '' && !isNull(cell)) return { text: cell, own: true };
    return run.tcfConsentString !== undefined ? { text: run.tcfConsentString, own: false } : undefined;
  };
  const finish = (row: InputRow, status: GenerateRowStatus, reason: string, identity?: TokenIdentity): string[] => {
    counts.rows++;
    counts[status]++;
    const cells = [...row.cells];
    while (cells.length < layout.header.length) cells.push('');
    const values = [...IDENTITY_COLUMNS.map((f) => (identity ? String(identity[f]) : '')), status, reason];
    values.forEach((v, i) => {
      cells[layout.positions[i]!] = v;
    });
    return cells;
  };
  await runRows(run, layout.header, async (row, signal) => {
    const prep = prepRow(row, cols, run);
    if (!prep.ok) return finish(row, 'invalid', prep.reason);
    const prepared = prepareTokenInput(prep.kind, prep.value, prep.options);
    tallyPhone(run, prep.value, prepared);
    if (!prepared.ok) return finish(row, 'invalid', prepared.reason);
    const consent = consentOf(row);
    try {
      const input = consent !== undefined ? { ...prepared.input, tcf_consent_string: consent.text } : prepared.input;
      const result = await run.client.tokenGenerate(input, { signal });
      if (result.status === 'success') return finish(row, 'success', '', result.identity);
      if (result.status === 'optout') return finish(row, 'optout', 'the user opted out');
      return finish(
        row,
        'insufficient_user_consent',
        'the TCF consent string lacks the consent EUID needs from vendor 21',
      );
    } catch (err) {
      const failure = failOrStop(err, signal);
      if (consent !== undefined && isUnreadableConsent(failure)) {
        if (!consent.own) throw new RunConsentRefused(failure.message);
        // a row's own unreadable string is a fault of the row, like a malformed identifier
        return finish(row, 'invalid', `tcf_consent_string: ${failure.message}`);
      }
      return finish(row, 'error', failure.message);
    }
  });
  return counts;
}
