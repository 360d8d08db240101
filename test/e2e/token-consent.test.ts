import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { runCli, serveConnection, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';
import { FULL_GRANTS, PYTHON_CLIENT_TC_STRING, tcString } from '../helpers/tc-strings.js';

/** `token generate` with TCF consent strings, the built CLI against `serve --scope euid` in its own process. */

let euid: ServeProcess;
let dir: string;
const GRANTED = tcString(FULL_GRANTS);

beforeAll(async () => {
  ensureBuilt();
  euid = await startServe(['--scope', 'euid']);
  dir = mkdtempSync(join(tmpdir(), 'uid2-token-consent-e2e-'));
}, 120_000);

afterAll(async () => {
  await euid?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function generate(args: string[]) {
  const conn = serveConnection(euid);
  return runCli(['token', 'generate', ...args, ...conn.args], { env: conn.env });
}

describe.concurrent('token generate --tcf-consent-string on EUID', () => {
  it('without consent prints {"status":"insufficient_user_consent"} and exits 5, as an opt-out does', async () => {
    const out = join(dir, 'never-written.json');
    const r = await generate([
      '--email',
      'consent.user@example.com',
      '--tcf-consent-string',
      PYTHON_CLIENT_TC_STRING,
      '--out',
      out,
    ]);
    expect(r.code, r.stderr).toBe(5);
    expect(JSON.parse(r.stdout)).toEqual({ status: 'insufficient_user_consent' });
    expect(r.stderr).toMatch(/insufficient_user_consent: .*vendor 21.*was not written/);
    expect(() => readFileSync(out)).toThrow();
  });

  it('with the consent EUID needs prints the identity', async () => {
    const r = await generate(['--email', 'consent.user@example.com', '--tcf-consent-string', GRANTED]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).advertising_token).toMatch(/^[A-Za-z0-9+/=_-]{20,}$/);
  });

  it('a string the service cannot read is bad input: one line naming the flag, exit 2', async () => {
    const r = await generate(['--email', 'consent.user@example.com', '--tcf-consent-string', 'garbled']);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/--tcf-consent-string: the service cannot read it \(User consent is invalid\)/);
  });

  it('an empty --tcf-consent-string is a usage error (exit 2)', async () => {
    const r = await generate(['--email', 'consent.user@example.com', '--tcf-consent-string', '']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--tcf-consent-string is empty/);
  });

  it('--input: a tcf_consent_string column per row, the flag for rows that leave it empty; statuses as data', async () => {
    const input = join(dir, 'consent.csv');
    writeFileSync(
      input,
      'identifier,identifier_type,tcf_consent_string\n' +
        `no.consent@example.com,email,${PYTHON_CLIENT_TC_STRING}\n` +
        'flag.consent@example.com,email,\n' +
        'optout@example.com,email,\n' +
        'garbled.consent@example.com,email,garbled\n',
    );
    const output = join(dir, 'consent-out.csv');
    const r = await generate(['--input', input, '-o', output, '--tcf-consent-string', GRANTED]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      /token generate: 4 rows .*1 success, 1 optout, 1 insufficient_user_consent, 1 invalid, 0 error/,
    );
    const rows = parse(readFileSync(output, 'utf8'), { columns: true }) as Record<string, string>[];
    expect(rows.map((x) => x.status)).toEqual(['insufficient_user_consent', 'success', 'optout', 'invalid']);
    expect(rows[0]!.advertising_token).toBe('');
    expect(rows[0]!.reason).toMatch(/vendor 21/);
    expect(rows[3]!.reason).toMatch(/tcf_consent_string: .*User consent is invalid/);
    expect(rows[1]!.refresh_token).toHaveLength(388);
  });

  it('--input with a --tcf-consent-string the service cannot read stops: exit 2, no output file', async () => {
    const input = join(dir, 'flag-garbled.csv');
    writeFileSync(input, 'identifier,identifier_type\na@example.com,email\nb@example.com,email\n');
    const output = join(dir, 'flag-garbled-out.csv');
    const r = await generate(['--input', input, '-o', output, '--tcf-consent-string', 'garbled']);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/--tcf-consent-string: the service cannot read it .*\(no output file written\)/);
    expect(() => readFileSync(output)).toThrow();
  });
});
