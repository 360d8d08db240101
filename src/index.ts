/**
 * uid2-batch as a library: a typed client of the UID2/EUID identity service, the local service for tests, and the
 * streaming engine behind `uid2-batch map` (docs/library.md).
 *
 * ```ts
 * import { IdentityClient, startLocalService } from 'uid2-batch';
 *
 * const svc = await startLocalService();
 * const client = new IdentityClient({ baseUrl: svc.url, apiKey: svc.apiKey, clientSecret: svc.clientSecret });
 * const token = await client.generateToken({ email: 'user@example.com' });     // { status: 'success', identity }
 * const map = await client.mapIdentities({ email: ['jane@example.com'] });      // map.email[0].rawUid
 * await client.close();
 * await svc.stop();
 * ```
 *
 * For tables of any size, mapRows streams rows through the same engine as the CLI:
 *
 * ```ts
 * import { mapRows } from 'uid2-batch';
 *
 * const rows = [['1', 'jane@example.com'], ['2', '+14155550100']];
 * for await (const row of mapRows(rows, {
 *   columns: [{ index: 1, kind: 'auto' }],
 *   baseUrl: 'https://operator-integ.uidapi.com',
 *   apiKey: process.env.UID2_API_KEY,
 *   clientSecret: process.env.UID2_CLIENT_SECRET,
 * })) {
 *   console.log(row.cells[0], row.results[0]);   // { status: 'mapped', rawUid, prevRawUid, refreshFrom, reason: null }
 * }
 * ```
 *
 * Rows come back in input order, one per input row. Emails and phones are normalized and hashed locally: only
 * hashes are sent. Requests carry up to 5,000 identifiers, at most `concurrency` (default 20) in flight.
 * @packageDocumentation
 */
import { envFingerprint } from './config/index.js';
import type { RemapState } from './pipeline/remap/remap-engine.js';
import { openState, type StateFile } from './state/index.js';

export {
  IdentityClient,
  type CallOptions,
  type GenerateTokenOptions,
  type GenerateTokenResult,
  type IdentityClientOptions,
  type IdentityMapResult,
  type MapIdentitiesInput,
  type MapIdentitiesResult,
  type PhoneCallOptions,
  type RefreshTokenResult,
  type RemapDueChange,
  type RemapDueOptions,
  type RemapDueResult,
} from './sdk/identity-client.js';
export type { Identifier, RefreshableIdentity } from './sdk/argument-checks.js';
export type { RemapCounts, RemapState } from './pipeline/remap/remap-engine.js';
export type { ServiceTargetOptions } from './sdk/service-target.js';
export {
  startLocalService,
  type LocalServiceHandle,
  type LocalServiceOptions,
  type FaultOptions,
  type IdentityScope,
  type Role,
  type ServiceOptions,
  type ServiceStatsSnapshot,
  type TokenLifetimes,
} from './sdk/local-service.js';
export {
  AbortError,
  ArgumentError,
  ClientError,
  ClockSkewError,
  DecryptError,
  ExpiredTokenError,
  InvalidTokenError,
  NetworkError,
  RateLimitedError,
  ServerError,
  ServiceRefusedError,
  TimeoutError,
  Uid2Error,
  UnauthorizedError,
  UnexpectedResponseError,
  type ErrorCode,
} from './sdk/errors.js';
export { hashIdentifier, normalizePhone } from './sdk/identifiers.js';
export {
  mapRows,
  MapInterruptedError,
  type IdentifierResult,
  type MapColumn,
  type MappedRow,
  type MapRowsOptions,
  type MapRowsSummary,
} from './sdk/map-rows.js';
export type {
  DiiInput,
  MappedV3,
  MapV2Request,
  MapV2ResponseBody,
  MapV3Item,
  MapV3Request,
  MapV3ResponseBody,
  MapV3Answers,
  ScannedAnswers,
  MappedV2,
  OptedOutItem,
  SaltBucket,
  TokenGenerateRequest,
  TokenGenerateResult,
  TokenIdentity,
  TokenResult,
  TokenValidateRequest,
  UnmappedV2,
  UnmappedV3,
} from './protocol/index.js';
export type { CallOptions as ServiceCallOptions, NetworkFailure, ProxyAddress } from './client/index.js';

export type {
  DiiType,
  IdentifierKind,
  InvalidReason,
  NormalizedPhone,
  PhoneInvalidReason,
  PhoneRegion,
  Prepared,
  PrepareOptions,
  UnknownCountryReason,
  UnknownPhoneRegion,
} from './identity/index.js';
export {
  normalizeEmail,
  isNormalizedPhone,
  normalizeHash,
  sha256Base64,
  prepareIdentifier,
  prepareAuto,
} from './identity/index.js';
export { parsePhoneRegion, PhoneRegionError, regionOfCountry } from './identity/index.js';
export { createServiceClient, describeProxyRoute, type ProxyRoute, type ProxySettings } from './client/index.js';
export {
  resolveConfig,
  resolveProxy,
  defaultConfigDeps,
  type ConfigDeps,
  type ConnectionFlags,
  type CredentialSource,
  type EnvironmentInfo,
  type EnvSource,
  type IdentityScopeName,
  type ResolvedConfig,
  type ResolveOptions,
} from './config/index.js';
export { CredentialsRefusedError, ServiceUnreachableError } from './pipeline/run/unreachable-service.js';
export type { ClientOptions, ClientStats, ServiceClient, RetryEvent } from './client/index.js';
export {
  MapEngine,
  type EngineColumn,
  type EngineState,
  type MapEngineOptions,
  type MapRunCounts,
  type MapRunOutcome,
  type MapRunResult,
} from './pipeline/map/map-engine.js';
export { AdaptiveConcurrency, type AdaptiveConcurrencyOptions } from './pipeline/run/adaptive-limiter.js';
export { outputHeader, outputRows, RESULT_COLUMNS } from './pipeline/map/result-columns.js';
export type { RowChunk } from './pipeline/map/row-chunk.js';
export type { InputRow } from './pipeline/io/table.js';
export type { StateFile } from './state/index.js';
export { readStateInfo, type StateInfoReport } from './pipeline/jobs/state-info.js';
export { exportState, type StateExportOptions } from './pipeline/jobs/state-export.js';

/**
 * Opens (or creates) a state file for mapRows against `baseUrl`, with the same environment check as the CLI's
 * `--state`, so a file made here and one made by `uid2-batch map --state` are interchangeable. Give it to mapRows
 * (`state`) and to IdentityClient.remapDue. Close it when done (`store.close()`).
 */
export function openStateFor(
  path: string,
  options: { baseUrl: string; scope?: 'UID2' | 'EUID'; readonly?: boolean },
): StateFile & RemapState {
  const fingerprint = envFingerprint({
    env: { name: 'library', baseUrl: new URL(options.baseUrl).origin, scope: options.scope ?? 'UID2', isPublic: true },
    isLocal: false,
    apiKeySource: 'none',
    clientSecretSource: 'none',
    envSource: 'flag',
  });
  const store = openState(path, { envFingerprint: fingerprint, api: 'v3', readonly: options.readonly ?? false });
  if (!options.readonly) store.lock();
  return store;
}
