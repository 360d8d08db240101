/** Registers `uid2-batch token generate | refresh | validate | test-identities`; each loads its work when it runs. */
import type { Command } from 'commander';
import { addConnectionOptions, addOutputOptions, wholeNumber } from '../shared/options.js';
import { addNullValueOption } from '../shared/null-value-option.js';
import { addPhoneRegionText } from '../shared/phone-region-flag.js';
import { DEFAULT_TOKEN_CONCURRENCY, MAX_TOKEN_CONCURRENCY, REFRESH_EXIT } from './token-numbers.js';

const PII_NOTE =
  'An email or phone given as a flag value stays in shell history and is visible in `ps`: pass "-" instead\n' +
  '(e.g. --email -) and pipe the value on stdin. The value is normalized and hashed here; only the hash is sent.';

function addIdentifierOptions(cmd: Command): Command {
  cmd
    .option('--email <email>', 'email address ("-" reads it from stdin)')
    .option(
      '--phone <phone>',
      'phone number in E.164 form, e.g. +12345678901, or national with --phone-region ("-" reads it from stdin)',
    )
    .option('--email-hash <hash>', 'base64 SHA-256 of the normalized email (64-char hex is accepted)')
    .option('--phone-hash <hash>', 'base64 SHA-256 of the phone number (64-char hex is accepted)');
  return addPhoneRegionText(cmd, true);
}

function addBatchOptions(cmd: Command, what: string): Command {
  cmd.option('--input <file>', `${what} ("-" reads stdin; .jsonl/.ndjson are JSONL, anything else CSV)`);
  addNullValueOption(cmd);
  addOutputOptions(cmd);
  return cmd.option(
    '--concurrency <n>',
    `requests in flight for --input (default ${DEFAULT_TOKEN_CONCURRENCY}); each is retried on 429, 5xx and network errors`,
    wholeNumber('--concurrency', 1, MAX_TOKEN_CONCURRENCY),
  );
}

export function registerTokenCommand(program: Command): void {
  const token = program
    .command('token')
    .description('generate, refresh and validate tokens (for publishers integrating), and list the test identities');

  const generate = token
    .command('generate')
    .description(
      'generate an identity (advertising token + refresh token) for one email, phone or hash, or one per row with --input',
    );
  addIdentifierOptions(generate);
  generate.option(
    '--out <file>',
    'also save the identity JSON here (mode 0600, written atomically) for token refresh --in',
  );
  generate.option(
    '--tcf-consent-string <string>',
    "the user's IAB TCF consent string, sent with the request (EUID reads it, UID2 ignores it); with --input, for the rows\n" +
      'whose tcf_consent_string column is empty or absent',
  );
  addBatchOptions(
    generate,
    'CSV/JSONL with the columns identifier, identifier_type (email|phone|email_hash|phone_hash): one identity per row',
  );
  addConnectionOptions(generate);
  generate.addHelpText(
    'after',
    `\n${PII_NOTE}\n\nPrints the identity JSON on stdout (advertising_token, refresh_token, identity_expires, refresh_from,\n` +
      'refresh_expires, refresh_response_key; times in Unix ms). An opted-out user prints {"status":"optout"} and exits 5.\n' +
      'With --input: every row plus those fields, status (success|optout|insufficient_user_consent|invalid|error) and\n' +
      'reason; an opted-out row is data (exit 0), and exit 3 if a row ended in error. A tcf_consent_string column gives\n' +
      'each row\'s consent string. On EUID, consent that does not allow a token prints {"status":"insufficient_user_consent"}\n' +
      'and exits 5 as an opt-out does; with --input such a row is data, like an opted-out row.\n' +
      'Exit codes: 0 done; 1 failed; 2 usage or invalid identifier; 3 some rows in error; 4 the key was refused (401);\n' +
      '5 the one identity given opted out, or its consent does not allow a token (not with --input).',
  );
  generate.action(async (opts: Record<string, unknown>) => {
    process.exitCode = await (await import('./token.js')).generate(opts);
  });

  const refresh = token
    .command('refresh')
    .description(
      'exchange a refresh token for a new identity (no API key needed; sent if configured, so the service says why a token is refused)',
    )
    .option(
      '--in <file>',
      'identity JSON as printed or saved by token generate ("-" = stdin; stdin is also the default)',
    )
    .option('--update', 'with --in FILE: rewrite FILE with the new identity (atomically, mode 0600)')
    .option('--out <file>', 'save the new identity JSON here (mode 0600, written atomically)')
    .option('--refresh-token-file <file>', 'file holding the refresh_token (instead of a whole identity)')
    .option(
      '--refresh-response-key-file <file>',
      'file holding the refresh_response_key that came with that refresh_token',
    )
    .option('--refresh-token <token>', 'the refresh_token itself (visible in `ps` and shell history: prefer the file)')
    .option('--force', 'send even though refresh_expires has passed');
  addConnectionOptions(refresh);
  refresh.addHelpText(
    'after',
    '\nThe answer is decrypted with the refresh_response_key that came with the refresh_token; every generate and refresh\n' +
      'returns a new pair: keep the newest, as only the key issued with a refresh_token opens its answer. A warning is\n' +
      'printed before refresh_from.\n\n' +
      'Exit codes:\n' +
      '  0  new identity printed (and saved with --update / --out)\n' +
      `  ${REFRESH_EXIT.optout}  optout: the user opted out; discard the identity ({"status":"optout"} on stdout)\n` +
      `  ${REFRESH_EXIT.invalidToken}  invalid_token, or a refresh token the service cannot read: generate a new identity\n` +
      `  ${REFRESH_EXIT.expiredToken}  expired_token, or refused here because refresh_expires has passed (--force sends it anyway)\n` +
      `  ${REFRESH_EXIT.refreshError}  error: refused without a reason, as the service answers callers without an API key\n` +
      '     (invalid or expired; set UID2_API_KEY to learn which)\n' +
      '  1  failed (network, service error); 2 usage error or a refresh_response_key that does not fit the token;\n' +
      '  4  an API key was sent and refused (401).',
  );
  refresh.action(async (opts: Record<string, unknown>) => {
    process.exitCode = await (await import('./token.js')).refresh(opts);
  });

  const validate = token
    .command('validate')
    .description(
      'check that an advertising token was generated from an identifier: prints true (exit 0) or false (exit 1)',
    )
    .option('--token <token>', 'advertising token ("-" reads it from stdin)');
  addIdentifierOptions(validate);
  addBatchOptions(
    validate,
    'CSV/JSONL with the columns identifier, identifier_type (email|phone|email_hash|phone_hash), token',
  );
  addConnectionOptions(validate);
  validate.addHelpText(
    'after',
    `\n${PII_NOTE}\n\nfalse nearly always means the identifier was formatted differently when the token was made: emails are\n` +
      'normalized (trimmed, lowercased, gmail.com dots and +suffix dropped), phones must be E.164, hashes 44-char base64.\n' +
      'With --input: every row plus valid (true|false|error), hash (the normalized hash sent) and reason.\n' +
      'Exit codes: 0 true (or a batch without errors); 1 false; 2 usage or invalid identifier; 3 some rows in error; 4 key refused.',
  );
  validate.action(async (opts: Record<string, unknown>) => {
    process.exitCode = await (await import('./token.js')).validate(opts);
  });

  token
    .command('test-identities')
    .description('list the test identities and what the service does with each (optout, refresh-optout, validate)')
    .option('--json', 'print them as JSON')
    .action(async (opts: Record<string, unknown>) => {
      process.stdout.write((await import('./token.js')).formatTestIdentities(opts.json === true));
    });
}
