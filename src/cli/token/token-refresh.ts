import {
  REFRESH_TOKEN_LENGTH,
  checkRefreshResponseKey,
  parseIdentity,
  refreshIdentity,
  refreshInputOf,
  refreshTiming,
  type RefreshInput,
  type RefreshOutcome,
} from '../../pipeline/tokens/tokens.js';
import { EXIT, UserError } from '../shared/exit-codes.js';
import { printIdentity } from './token-generate.js';
import { readAll, readTextFile, readValueFile } from './token-files.js';
import { note, withConnection, type Connect, type TokenIo } from './token-io.js';
import { REFRESH_EXIT } from './token-numbers.js';

export { REFRESH_EXIT } from './token-numbers.js';

export interface TokenRefreshFlags {
  /** Identity JSON file ('-' = stdin). */
  in?: string;
  refreshTokenFile?: string;
  refreshResponseKeyFile?: string;
  /** Discouraged: argv is visible in `ps` and shell history. */
  refreshToken?: string;
  refreshResponseKey?: string;
  /** With --in FILE: rewrite FILE with the new identity. */
  update?: boolean;
  /** Send even after refresh_expires. */
  force?: boolean;
  /** Save the new identity here (0600, atomic). */
  out?: string;
}

export interface TokenRefreshDeps {
  io: TokenIo;
  connect: Connect;
}

async function readRefreshInput(flags: TokenRefreshFlags, io: TokenIo): Promise<RefreshInput> {
  const pieces = [flags.refreshTokenFile, flags.refreshResponseKeyFile, flags.refreshToken, flags.refreshResponseKey];
  const byPieces = pieces.some((p) => p !== undefined);
  if (flags.in !== undefined && byPieces) {
    throw new UserError('give the identity either with --in FILE or as a refresh token and key, not both');
  }
  if (flags.update && (flags.in === undefined || flags.in === '-')) {
    throw new UserError(
      '--update rewrites the identity file: it needs --in FILE (use --out FILE to save a new identity elsewhere)',
    );
  }
  if (flags.update && flags.out !== undefined)
    throw new UserError('give --update (rewrite the --in file) or --out FILE, not both');
  if (byPieces) {
    if (flags.refreshTokenFile !== undefined && flags.refreshToken !== undefined)
      throw new UserError('give --refresh-token-file or --refresh-token, not both');
    if (flags.refreshResponseKeyFile !== undefined && flags.refreshResponseKey !== undefined) {
      throw new UserError('give --refresh-response-key-file or --refresh-response-key, not both');
    }
    const argv = [
      flags.refreshToken !== undefined ? '--refresh-token' : '',
      flags.refreshResponseKey !== undefined ? '--refresh-response-key' : '',
    ].filter(Boolean);
    if (argv.length > 0) {
      note(
        io,
        `warning: ${argv.join(' and ')} on the command line can be read from \`ps\` and shell history; prefer --in FILE, the *-file options or stdin`,
      );
    }
    const refreshToken =
      flags.refreshTokenFile !== undefined
        ? readValueFile(flags.refreshTokenFile, '--refresh-token-file')
        : flags.refreshToken?.trim();
    const refreshResponseKey =
      flags.refreshResponseKeyFile !== undefined
        ? readValueFile(flags.refreshResponseKeyFile, '--refresh-response-key-file')
        : flags.refreshResponseKey?.trim();
    if (!refreshToken)
      throw new UserError(
        'the refresh token is missing: give --refresh-token-file FILE too (or --in FILE with the whole identity)',
      );
    if (!refreshResponseKey) {
      throw new UserError(
        'the refresh_response_key is missing: the answer can only be decrypted with it; give --refresh-response-key-file FILE (or --in FILE with the whole identity)',
      );
    }
    return { refreshToken, refreshResponseKey };
  }

  let text: string;
  let where: string;
  if (flags.in !== undefined && flags.in !== '-') {
    text = readTextFile(flags.in, '--in');
    where = flags.in;
  } else {
    if (flags.in === undefined && io.stdin.isTTY) {
      throw new UserError(
        'give the identity to refresh: --in FILE (as saved by token generate --out), pipe its JSON to stdin, or --refresh-token-file F --refresh-response-key-file F',
      );
    }
    text = await readAll(io.stdin);
    where = 'the identity on stdin';
  }
  const parsed = parseIdentity(text);
  if (!parsed.ok) throw new UserError(`${where} ${parsed.problem}`);
  return refreshInputOf(parsed.identity);
}

function minutes(ms: number): string {
  if (ms < 90_000) return `${Math.round(ms / 1000)} s`;
  if (ms < 2 * 3600_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3600_000).toFixed(1)} h`;
}

/** `token refresh`. Returns the exit code: 0, or one of REFRESH_EXIT, or the shared ones. */
export async function runTokenRefresh(flags: TokenRefreshFlags, deps: TokenRefreshDeps): Promise<number> {
  const { io } = deps;
  const input = await readRefreshInput(flags, io);
  const keyProblem = checkRefreshResponseKey(input.refreshResponseKey);
  if (keyProblem) throw new UserError(keyProblem);

  const timing = refreshTiming(input, io.now());
  if (timing.kind === 'expired') {
    const when = new Date(input.refreshExpires!).toISOString();
    if (!flags.force) {
      note(
        io,
        `expired: this refresh token expired ${minutes(timing.agoMs)} ago (refresh_expires ${when}); the service would answer expired_token. Generate a new identity (or pass --force to send it anyway)`,
      );
      return REFRESH_EXIT.expiredToken;
    }
    note(io, `warning: refresh_expires (${when}) has passed; sending anyway because of --force`);
  } else if (timing.kind === 'early') {
    note(
      io,
      `warning: refresh_from is ${minutes(timing.inMs)} away (${new Date(input.refreshFrom!).toISOString()}); refreshing this early works but the SDKs wait until then`,
    );
  }

  const outcome = await withConnection(deps.connect, { apiKey: false, clientSecret: false }, ({ client }) =>
    refreshIdentity(client, input),
  );
  return report(outcome, input, flags, io);
}

function report(outcome: RefreshOutcome, input: RefreshInput, flags: TokenRefreshFlags, io: TokenIo): number {
  const lengthHint =
    input.refreshToken.length === REFRESH_TOKEN_LENGTH
      ? ''
      : ` (it has ${input.refreshToken.length} characters; current refresh tokens have ${REFRESH_TOKEN_LENGTH})`;
  switch (outcome.kind) {
    case 'success':
      printIdentity(outcome.identity, flags.update ? flags.in : flags.out, io);
      return EXIT.ok;
    case 'optout':
      io.stdout.write(`${JSON.stringify({ status: 'optout' })}\n`);
      note(
        io,
        `optout: the user has opted out; discard this identity and stop using its tokens (log the user out)${flags.update ? `; ${flags.in} was left unchanged` : ''}`,
      );
      return REFRESH_EXIT.optout;
    case 'invalid_token':
      note(
        io,
        `invalid_token: the service does not accept this refresh token (${outcome.message})${lengthHint}: it is damaged, or from another environment or scope. Generate a new identity`,
      );
      return REFRESH_EXIT.invalidToken;
    case 'unreadable':
      note(
        io,
        `invalid refresh token: the service cannot read it (${outcome.message})${lengthHint}: it is truncated or altered, or was issued by another service. Generate a new identity`,
      );
      return REFRESH_EXIT.invalidToken;
    case 'expired_token':
      note(io, `expired_token: the refresh token has expired (${outcome.message}). Generate a new identity`);
      return REFRESH_EXIT.expiredToken;
    case 'error':
      note(
        io,
        `error: the service refused the refresh token without saying why (${outcome.message}): it is invalid or expired. ` +
          'Callers without an API key get no detail: set UID2_API_KEY (or --api-key-file) to learn which, or generate a new identity',
      );
      return REFRESH_EXIT.refreshError;
    case 'key_mismatch':
      throw new UserError(outcome.message);
    case 'unauthorized':
      throw new UserError(
        `the service refused the API key sent with the refresh (401: ${outcome.message}); refresh needs no key: unset it or fix it`,
        EXIT.auth,
      );
  }
}
