import { randomBytes } from 'node:crypto';
import type { DiiType } from '../../identity/index.js';
import type { HandlerResult, RefreshResult, TokenHandlerDeps, TokenHandlers } from '../contracts.js';
import { decodeAdvertisingToken, encodeAdvertisingToken } from './advertising-token.js';
import { readDii } from './dii-request.js';
import { deriveTokenKeys } from './keys.js';
import {
  REFRESH_WRAPPER_LENGTH,
  decodeRefreshToken,
  encodeRefreshToken,
  unwrapRefreshToken,
  wrapRefreshToken,
} from './refresh-token.js';
import { testIdentityOfFirstLevel } from './test-identities.js';
import { MESSAGE_INVALID_CONSENT, checkUserConsent } from './user-consent.js';
import {
  PRIVACY_BIT_LEGACY,
  REFRESH_CUTOFF_MS,
  type OperatorIdentity,
  type PublisherIdentity,
} from './token-fields.js';

/** The one publisher site the local service issues tokens for; validate refuses tokens of any other site. */
export const LOCAL_PUBLISHER: PublisherIdentity = { siteId: 999, publisherId: 0, clientKeyId: 0 };
/** A public operator writes itself as site 0, type Service (1). */
export const LOCAL_OPERATOR: OperatorIdentity = { siteId: 0, type: 1, version: 0, keyId: 0 };

const clientError = (message: string) => ({ http: 400 as const, json: { status: 'client_error', message } });
const OPTOUT = { status: 'optout' } as const;
const INSUFFICIENT_CONSENT = { status: 'insufficient_user_consent' } as const;

/** What a new identity is made from: who it is (type, F), since when, and for whom. */
interface IdentitySource {
  type: DiiType;
  firstLevel: Buffer;
  establishedMs: number;
  privacyBits: number;
  publisher: PublisherIdentity;
}

export function createTokenHandlers(deps: TokenHandlerDeps): TokenHandlers {
  const { engine, clock, lifetimes } = deps;
  const keys = deriveTokenKeys(deps.seed);
  // The operator works in whole milliseconds; a fractional clock must not leak into tokens or answers.
  const nowMs = () => Math.floor(clock.nowMs());

  function issueIdentity(source: IdentitySource, now: number): Record<string, unknown> {
    const identityExpires = now + lifetimes.identityExpiresS * 1000;
    const refreshExpires = now + lifetimes.refreshExpiresS * 1000;
    const refreshFrom = now + lifetimes.refreshFromS * 1000;
    const common = {
      scope: engine.scope,
      type: source.type,
      createdMs: now,
      operator: LOCAL_OPERATOR,
      publisher: source.publisher,
      privacyBits: source.privacyBits,
      establishedMs: source.establishedMs,
    };
    const advertisingToken = encodeAdvertisingToken(keys, {
      ...common,
      expiresMs: identityExpires,
      refreshedMs: now,
      rawUid: Buffer.from(engine.rawUid(source.type, source.firstLevel, now), 'base64'),
    });
    const innerRefreshToken = encodeRefreshToken(keys, {
      ...common,
      expiresMs: refreshExpires,
      firstLevel: source.firstLevel,
    });
    const responseKey = randomBytes(32);
    return {
      advertising_token: advertisingToken,
      refresh_token: wrapRefreshToken(keys, engine.scope, innerRefreshToken, responseKey),
      identity_expires: identityExpires,
      refresh_expires: refreshExpires,
      refresh_from: refreshFrom,
      refresh_response_key: responseKey.toString('base64'),
    };
  }

  function generate(request: unknown): HandlerResult {
    const dii = readDii(request);
    if (!dii.ok) return clientError(dii.message);
    // The operator reads consent after the identifier and before opt-out: an opted-out user without consent is told
    // about the consent.
    const consent = checkUserConsent(engine.scope, request as Record<string, unknown>);
    if (consent === 'invalid') return clientError(MESSAGE_INVALID_CONSENT);
    if (consent === 'insufficient') return { http: 200, json: { ...INSUFFICIENT_CONSENT } };
    const now = nowMs();
    const firstLevel = engine.firstLevelHash(dii.hash);
    const role = engine.testIdentity(dii.type, dii.hash);
    // The refresh-optout and validate identities are forced in: they must get tokens to be of any use.
    const optedOut = role === 'optout' || (role === null && engine.isOptedOut(dii.type, dii.hash, firstLevel, now));
    if (optedOut) return { http: 200, json: { ...OPTOUT } };
    const body = issueIdentity(
      { type: dii.type, firstLevel, establishedMs: now, privacyBits: PRIVACY_BIT_LEGACY, publisher: LOCAL_PUBLISHER },
      now,
    );
    return { http: 200, json: { status: 'success', body } };
  }

  function validate(request: unknown): HandlerResult {
    const dii = readDii(request);
    if (!dii.ok) return clientError(dii.message);
    const tokenText = (request as Record<string, unknown>).token;
    if (typeof tokenText !== 'string') return clientError('Invalid token');
    const decoded = decodeAdvertisingToken(keys, tokenText);
    if (!decoded.ok || decoded.token.scope !== engine.scope) return clientError('Invalid token');
    if (decoded.token.publisher.siteId !== LOCAL_PUBLISHER.siteId) return clientError('Unauthorised to validate token');
    // Expiry is deliberately not checked: validate answers "was this token made from this DII".
    const now = nowMs();
    const current = Buffer.from(engine.rawUid(dii.type, engine.firstLevelHash(dii.hash), now), 'base64');
    return { http: 200, json: { status: 'success', body: current.equals(decoded.token.rawUid) } };
  }

  function refresh(body: string, authenticated: boolean): RefreshResult {
    // The operator hides why a token is bad from callers without an API key.
    const invalidToken = () =>
      authenticated
        ? { http: 400 as const, json: { status: 'invalid_token', message: 'Invalid Token presented' } }
        : { http: 400 as const, json: { status: 'error', message: 'Error refreshing token' } };
    const expiredToken = () =>
      authenticated
        ? { http: 400 as const, json: { status: 'expired_token', message: 'Expired Token presented' } }
        : { http: 400 as const, json: { status: 'error', message: 'Error refreshing token' } };

    // Any other length is a legacy v1 token to the operator; the local service never issued one, so it is invalid.
    if (body.length !== REFRESH_WRAPPER_LENGTH) return invalidToken();

    const opened = unwrapRefreshToken(keys, body);
    if (!opened.ok) {
      switch (opened.failure) {
        case 'not-base64':
          return clientError('Invalid body: Body is not valid base64.');
        case 'unknown-key':
          return clientError(`Invalid key: Generator of this token (Key ID: ${opened.keyId}) does not exist.`);
        case 'decrypt-failed':
          return clientError('Invalid data: Check encryption method and encryption key.');
        case 'bad-format':
          return clientError('Invalid format: Payload is not valid json or missing required data.');
      }
    }
    const responseKey = opened.responseKey;

    const decoded = decodeRefreshToken(keys, opened.innerToken);
    if (!decoded.ok) {
      return decoded.reason === 'decrypt-failed'
        ? { http: 500, json: { status: 'unknown', message: 'Unknown error while refreshing token v2' } }
        : invalidToken();
    }
    const token = decoded.token;
    if (token.scope !== engine.scope) return invalidToken();

    const optout = (): RefreshResult => ({ http: 200, json: { ...OPTOUT }, responseKey });
    if (token.establishedMs < REFRESH_CUTOFF_MS) return optout();
    const now = nowMs();
    if (token.expiresMs < now) return expiredToken();

    const role = testIdentityOfFirstLevel(engine, token.type, token.firstLevel);
    // The token holds F, not the DII hash: the engine's opt-out registry is keyed on F (docs/wire-protocol.md §8.4),
    // and the hash is only needed for the always-optout test identities, which `role` already covers.
    const optedOut =
      role === 'optout' ||
      role === 'refresh-optout' ||
      (role === null && engine.isOptedOut(token.type, '', token.firstLevel, now));
    if (optedOut) return optout();

    const identity = issueIdentity(
      {
        type: token.type,
        firstLevel: token.firstLevel,
        establishedMs: token.establishedMs,
        privacyBits: token.privacyBits,
        publisher: token.publisher,
      },
      now,
    );
    return { http: 200, json: { status: 'success', body: identity }, responseKey };
  }

  return { generate, validate, refresh };
}
