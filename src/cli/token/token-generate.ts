import {
  classifyFailure,
  isUnreadableConsent,
  prepareTokenInput,
  type TokenIdentity,
} from '../../pipeline/tokens/tokens.js';
import { EXIT, UserError } from '../shared/exit-codes.js';
import { runTokenBatch, type TokenBatchFlags, type TokenBatchDeps } from './token-batch.js';
import { identityJson, writePrivateFileAtomic } from './token-files.js';
import {
  adviseFailure,
  flagOf,
  identifierValue,
  note,
  pickIdentifier,
  withConnection,
  type Connect,
  type IdentifierFlags,
  type TokenIo,
  UNREADABLE_CONSENT_FLAG,
} from './token-io.js';

export interface TokenGenerateFlags extends IdentifierFlags, TokenBatchFlags {
  /** Single identity: save it here (0600, atomic) for the next refresh. */
  out?: string;
}

export interface TokenGenerateDeps extends TokenBatchDeps {
  io: TokenIo;
  connect: Connect;
}

/** Why an identifier was refused, without repeating it (it is personal data). */
export function invalidIdentifierMessage(flag: string, reason: string): string {
  const hint = reason === 'invalid email' ? ': it needs text before and after a single @' : '';
  return `${flag}: ${reason}${hint} (the value is not repeated here)`;
}

/** `token generate`: one identity from a flag, or one per row with --input. Returns the exit code. */
export async function runTokenGenerate(flags: TokenGenerateFlags, deps: TokenGenerateDeps): Promise<number> {
  if (flags.tcfConsentString !== undefined && flags.tcfConsentString.trim() === '')
    throw new UserError(
      '--tcf-consent-string is empty: give the TCF consent string as the consent platform wrote it, or leave the flag out',
    );
  const picked = pickIdentifier(flags);
  if (flags.input !== undefined) {
    if (picked) throw new UserError(`give either ${flagOf(picked.kind)} or --input FILE, not both`);
    if (flags.out !== undefined)
      throw new UserError('--out saves a single identity; with --input, name the output file with -o FILE');
    return runTokenBatch('generate', flags, deps);
  }
  if (flags.phoneRegionColumn !== undefined)
    throw new UserError('--phone-region-col names a column of --input FILE; for one identifier give --phone-region CC');
  if (!picked)
    throw new UserError(
      'give the identifier with --email, --phone, --email-hash or --phone-hash (or a file of them with --input FILE)',
    );

  const value = await identifierValue(picked.kind, picked.value, deps.io);
  const prepared = prepareTokenInput(picked.kind, value, flags);
  if (!prepared.ok) throw new UserError(invalidIdentifierMessage(flagOf(picked.kind), prepared.reason));

  const result = await withConnection(deps.connect, { apiKey: true, clientSecret: true }, async ({ client }) => {
    try {
      const consent = flags.tcfConsentString !== undefined ? { tcf_consent_string: flags.tcfConsentString } : {};
      return await client.tokenGenerate({ ...prepared.input, ...consent });
    } catch (err) {
      if (flags.tcfConsentString !== undefined && isUnreadableConsent(classifyFailure(err)))
        throw new UserError(UNREADABLE_CONSENT_FLAG);
      return adviseFailure(err, 'GENERATOR');
    }
  });

  if (result.status === 'optout') {
    deps.io.stdout.write(`${JSON.stringify({ status: 'optout' })}\n`);
    note(
      deps.io,
      `optout: this user has opted out, so the service issues no token${flags.out !== undefined ? `; ${flags.out} was not written` : ''}`,
    );
    // as token refresh says it: a script tells "opted out" from "here is a token" by the code alone
    return EXIT.optout;
  }
  if (result.status === 'insufficient_user_consent') {
    deps.io.stdout.write(`${JSON.stringify({ status: 'insufficient_user_consent' })}\n`);
    note(
      deps.io,
      'insufficient_user_consent: the TCF consent string lacks the consent EUID needs from vendor 21 (The Trade Desk), ' +
        `so the service issues no token${flags.out !== undefined ? `; ${flags.out} was not written` : ''}`,
    );
    // no token, as for an opted-out user: the same code, told apart by the status on stdout
    return EXIT.optout;
  }
  printIdentity(result.identity, flags.out, deps.io);
  return EXIT.ok;
}

export function printIdentity(identity: TokenIdentity, out: string | undefined, io: TokenIo): void {
  const json = identityJson(identity);
  io.stdout.write(json);
  if (out !== undefined) {
    writePrivateFileAtomic(out, json, 'identity file');
    note(io, `identity saved to ${out} (mode 0600); refresh it with: uid2-batch token refresh --in ${out} --update`);
  }
}
