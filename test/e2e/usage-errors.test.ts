// Usage errors of the built CLI, commander's own included: a secret typed as a flag value is never echoed, control
// characters are escaped, and --summary-json gets the same line as stderr in its `error`.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';

const dir = tempDir('usage-errors');
const SAMPLE = join(ROOT, 'samples', 'customers.csv');
const SECRET = 'CanarySecret4Qx9Zr7Lw2';

beforeAll(() => ensureBuilt(), 120_000);
afterAll(() => dir.remove());

const summaryAt = (path: string): Record<string, unknown> =>
  JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;

describe('usage errors', () => {
  it('--client_secret=VALUE (underscore): refused like --client-secret, the value never shown', async () => {
    const s = join(dir.path, 'underscore.json');
    const r = await runCli(['map', SAMPLE, `--client_secret=${SECRET}`, '--summary-json', s]);
    expect(r.code).toBe(2);
    expect(r.stderr).not.toContain(SECRET);
    expect(r.stderr).toContain('UID2_CLIENT_SECRET');
    expect(JSON.stringify(summaryAt(s))).not.toContain(SECRET);
  });

  it('an unknown secret-looking flag: commander says so without the value, and the summary has the line', async () => {
    const s = join(dir.path, 'unknown.json');
    const r = await runCli(['map', SAMPLE, `--client_secret_key=${SECRET}`, '--summary-json', s]);
    expect(r.code).toBe(2);
    expect(r.stderr).not.toContain(SECRET);
    const first = r.stderr.split('\n')[0];
    expect(first).toBe("error: unknown option '--client_secret_key=<hidden>'");
    expect(summaryAt(s)).toEqual({
      command: 'map',
      outcome: 'failed',
      exit_code: 2,
      error: "unknown option '--client_secret_key=<hidden>'",
    });
  });

  it('an invalid choice holding ESC and BEL: escaped on stderr and in the summary', async () => {
    const s = join(dir.path, 'choice.json');
    const r = await runCli(['map', SAMPLE, '--format', 'x\u001b[31mred\u0007', '--summary-json', s]);
    expect(r.code).toBe(2);
    expect(r.stderr.includes('\u001b') || r.stderr.includes('\u0007')).toBe(false);
    expect(r.stderr).toContain("argument 'x\\u001b[31mred\\u0007' is invalid");
    expect(summaryAt(s).error).toBe(r.stderr.split('\n')[0].replace(/^error: /, ''));
  });

  it('an unknown command of 5,000 characters is cut to 80', async () => {
    const r = await runCli([`m${'a'.repeat(4_999)}`]);
    expect(r.code).toBe(2);
    expect(r.stderr.split('\n')[0]).toBe(`error: unknown command 'm${'a'.repeat(79)}…' (5,000 characters)`);
  });
});
