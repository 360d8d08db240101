import { classifyFailure, prepareTokenInput } from '../../pipeline/tokens/tokens.js';
import { EXIT, UserError } from '../shared/exit-codes.js';
import { invalidIdentifierMessage } from './token-generate.js';
import { runTokenBatch, type TokenBatchDeps, type TokenBatchFlags } from './token-batch.js';
import { readAll, stripLineEnding } from './token-files.js';
import {
  adviseFailure,
  flagOf,
  identifierValue,
  note,
  pickIdentifier,
  withConnection,
  type IdentifierFlags,
} from './token-io.js';

export interface TokenValidateFlags extends IdentifierFlags, TokenBatchFlags {
  /** The advertising token; '-' reads it from stdin. */
  token?: string;
}

/** Spec §4.3: false nearly always means the identifier was formatted differently when the token was made. */
export const FALSE_HINT =
  'the token was not generated from this identifier. The usual cause is input formatting: emails are normalized ' +
  '(trimmed, lowercased; for gmail.com the dots and +suffix dropped) before hashing; phones must be E.164 (+ then ' +
  '10 to 15 digits, no spaces or punctuation); a hash must be the 44-character base64 (not hex) SHA-256 of the ' +
  'normalized value.';

/** `token validate`: true / false for one token (exit 0 / 1; 6 for a token the service cannot read), or the Token Validator's CSV with --input. */
export async function runTokenValidate(flags: TokenValidateFlags, deps: TokenBatchDeps): Promise<number> {
  const picked = pickIdentifier(flags);
  if (flags.input !== undefined) {
    if (picked || flags.token !== undefined)
      throw new UserError(
        'with --input FILE the identifiers and tokens come from the file: drop --token and the identifier flag',
      );
    return runTokenBatch('validate', flags, deps);
  }
  if (flags.phoneRegionColumn !== undefined)
    throw new UserError('--phone-region-col names a column of --input FILE; for one identifier give --phone-region CC');
  if (flags.token === undefined)
    throw new UserError(
      'give the advertising token with --token T (or --token - to read it from stdin), or a file with --input FILE',
    );
  if (!picked)
    throw new UserError('give the identifier the token was made from: --email, --phone, --email-hash or --phone-hash');
  if (flags.token === '-' && picked.value === '-')
    throw new UserError(`only one value can come from stdin: give --token or ${flagOf(picked.kind)} directly`);

  const token = flags.token === '-' ? stripLineEnding(await readAll(deps.io.stdin)).trim() : flags.token.trim();
  if (token === '') throw new UserError('--token is empty');
  const value = await identifierValue(picked.kind, picked.value, deps.io);
  const prepared = prepareTokenInput(picked.kind, value, flags);
  if (!prepared.ok) throw new UserError(invalidIdentifierMessage(flagOf(picked.kind), prepared.reason));

  const match = await withConnection(deps.connect, { apiKey: true, clientSecret: true }, async ({ client }) => {
    try {
      return await client.tokenValidate({ token, ...prepared.input });
    } catch (err) {
      const failure = classifyFailure(err);
      if (failure.kind === 'client_error' && /^Invalid token/i.test(failure.message)) {
        // not `false` (exit 1): this token was not made from anything, so no identifier can match it
        throw new UserError(
          'the service cannot read this advertising token (400 Invalid token): pass the advertising_token exactly as token generate printed it, from the same environment',
          EXIT.invalidToken,
        );
      }
      if (failure.kind === 'client_error' && /Unauthori[sz]ed to validate/i.test(failure.message)) {
        throw new UserError(
          "the token was generated with another participant's credentials (400 Unauthorised to validate token): validate only tokens made with your own API key",
          EXIT.failed,
        );
      }
      return adviseFailure(err, 'GENERATOR');
    }
  });

  deps.io.stdout.write(`${match}\n`);
  if (!match) {
    note(deps.io, `false: ${FALSE_HINT}`);
    note(deps.io, `sent ${prepared.type}_hash ${prepared.hash}: compare it with the hash the token was generated from`);
  }
  return match ? EXIT.ok : EXIT.failed;
}
