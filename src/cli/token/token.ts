/**
 * The work of `uid2-batch token generate | refresh | validate | test-identities` (docs/wire-protocol.md §4,
 * §5.1-5.2, §7), from the options commander parsed; registered by token-command.ts. Each returns the exit code.
 */
import { TEST_IDENTITIES, TEST_IDENTITIES_DOCS_NOTE } from '../../pipeline/tokens/tokens.js';
import type { PhoneRegion } from '../../identity/index.js';
import { connectionFlags, outputFlags, sinkCompression } from '../shared/options.js';
import { chooseRegion } from '../../pipeline/map/column-options.js';
import { phoneRegionFlag } from '../shared/phone-region-option.js';
import { nullValuesOf } from '../shared/null-value-option.js';
import type { TokenBatchFlags } from './token-batch.js';
import { connector, resolveFor } from './token-connect.js';
import { runTokenGenerate } from './token-generate.js';
import { processIo, type IdentifierFlags } from './token-io.js';
import { runTokenRefresh, type TokenRefreshFlags } from './token-refresh.js';
import { runTokenValidate } from './token-validate.js';

function str(opts: Record<string, unknown>, key: string): string | undefined {
  return typeof opts[key] === 'string' ? (opts[key] as string) : undefined;
}

function identifierFlags(opts: Record<string, unknown>): IdentifierFlags {
  return {
    email: str(opts, 'email'),
    phone: str(opts, 'phone'),
    emailHash: str(opts, 'emailHash'),
    phoneHash: str(opts, 'phoneHash'),
  };
}

function batchFlags(opts: Record<string, unknown>): TokenBatchFlags {
  return {
    input: str(opts, 'input'),
    output: str(opts, 'output'),
    format: outputFlags(opts).format,
    ...sinkCompression(outputFlags(opts)),
    ...(typeof opts.concurrency === 'number' ? { concurrency: opts.concurrency } : {}),
    quiet: opts.quiet === true,
    ...(str(opts, 'summaryJson') !== undefined ? { summaryJson: str(opts, 'summaryJson') } : {}),
    ...phoneRegionOf(opts),
    ...(str(opts, 'phoneRegionCol') !== undefined ? { phoneRegionColumn: str(opts, 'phoneRegionCol') } : {}),
    ...(nullValuesOf(opts) !== undefined ? { nullValues: nullValuesOf(opts) } : {}),
  };
}

/** --phone-region, else the phone_region of the profile the connection flags choose (read without credentials). */
function phoneRegionOf(opts: Record<string, unknown>): { phoneRegion?: PhoneRegion } {
  // registered as text by token-command.ts (help loads no phone rules): checked here
  const flag = typeof opts.phoneRegion === 'string' ? phoneRegionFlag(opts.phoneRegion) : undefined;
  const region =
    flag ?? chooseRegion(undefined, resolveFor(connectionFlags(opts), { apiKey: false, clientSecret: false }));
  return region === undefined ? {} : { phoneRegion: region };
}

export function generate(opts: Record<string, unknown>): Promise<number> {
  const consent = str(opts, 'tcfConsentString');
  return runTokenGenerate(
    {
      ...identifierFlags(opts),
      ...batchFlags(opts),
      out: str(opts, 'out'),
      ...(consent !== undefined ? { tcfConsentString: consent } : {}),
    },
    { io: processIo(), connect: connector(connectionFlags(opts)) },
  );
}

export function refresh(opts: Record<string, unknown>): Promise<number> {
  const flags: TokenRefreshFlags = {
    in: str(opts, 'in'),
    refreshTokenFile: str(opts, 'refreshTokenFile'),
    refreshResponseKeyFile: str(opts, 'refreshResponseKeyFile'),
    refreshToken: str(opts, 'refreshToken'),
    refreshResponseKey: str(opts, 'refreshResponseKey'),
    update: opts.update === true,
    force: opts.force === true,
    out: str(opts, 'out'),
  };
  return runTokenRefresh(flags, { io: processIo(), connect: connector(connectionFlags(opts)) });
}

export function validate(opts: Record<string, unknown>): Promise<number> {
  return runTokenValidate(
    { ...identifierFlags(opts), ...batchFlags(opts), token: str(opts, 'token') },
    { io: processIo(), connect: connector(connectionFlags(opts)) },
  );
}

export function formatTestIdentities(json: boolean): string {
  if (json) {
    const identities = TEST_IDENTITIES.map((t) => ({
      identifier: t.value,
      identifier_type: t.type,
      hash: t.hash,
      outcome: t.outcome,
      expected: t.expected,
    }));
    return `${JSON.stringify({ identities, note: TEST_IDENTITIES_DOCS_NOTE }, null, 2)}\n`;
  }
  const w = Math.max(...TEST_IDENTITIES.map((t) => t.value.length));
  const lines = TEST_IDENTITIES.map(
    (t) => `${t.value.padEnd(w)}  ${t.type.padEnd(5)}  ${t.hash}  ${t.outcome.padEnd(14)}  ${t.expected}`,
  );
  return (
    `${'identifier'.padEnd(w)}  ${'type'.padEnd(5)}  ${'hash (base64 SHA-256)'.padEnd(44)}  ${'outcome'.padEnd(14)}  expected\n` +
    `${lines.join('\n')}\n\n` +
    `Matching is on the type and the hash: sending the value or its hash is the same, but a phone hash sent as\n` +
    `--email-hash does not match. Try: uid2-batch token generate --email optout@example.com\n` +
    `Note: ${TEST_IDENTITIES_DOCS_NOTE}\n`
  );
}
