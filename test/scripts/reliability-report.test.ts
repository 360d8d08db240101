// scripts/reliability-report.mjs: the README's reliability table from a results file, or one clear error line.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/map-e2e-data.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SCRIPT = join(ROOT, 'scripts', 'reliability-report.mjs');

const crash = (crashes: number, resent: number) => ({ crashes, items_resent: resent, outputs_compared: 1 });
const RESULTS = {
  scale: 2,
  updated_at: '2026-01-02T03:04:05.000Z',
  areas: {
    faults: {
      faults_injected: 1234,
      restarts: 2,
      delayed_answers: 7,
      runs: 9,
      outputs_compared: 3,
      rows_compared: 1000,
      rows_lost: 0,
    },
    crash_map: { ...crash(12, 1), rows_compared: 500 },
    crash_remap_due: crash(10, 0),
    crash_optout_check: crash(8, 0),
    crash_token_refresh: { crashes: 6, torn_files: 0 },
    bad_input: { bad_input_files: 69, cli_runs: 130 },
    service_hardening: { fuzz_requests: 10000, status_5xx: 0, dropped: 0, rss_before_mb: 170, rss_after_mb: 181 },
    secrets_pii: { needles: 197, leaks: 0 },
    clock_skew: { skewed_runs: 14, clear_clock_skew_errors: 13 },
  },
};

function report(results: unknown): { status: number | null; stdout: string; stderr: string } {
  const file = dir.file(`results-${Math.random().toString(36).slice(2)}.json`, JSON.stringify(results));
  const run = spawnSync(process.execPath, [SCRIPT, file], { encoding: 'utf8' });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

const dir = tempDir('reliability-report');
afterAll(() => dir.remove());

describe('reliability report', () => {
  it('renders the table from the recorded figures, summing across areas', () => {
    const { status, stdout, stderr } = report(RESULTS);
    expect(stderr).toBe('');
    expect(status).toBe(0);
    expect(stdout).toContain('Figures of the last run (2026-01-02, scale 2):');
    expect(stdout).toContain('| what was tried | what held |');
    expect(stdout).toContain('1,234 faults and 2 restarts injected, 7 answers delayed, 9 runs');
    expect(stdout).toContain('(map --state 12, remap-due 10, optout-check --state 8, token refresh --update 6)');
    expect(stdout).toContain(
      '36 kills; SQLite integrity ok every time, no half-written entry, 1 identifiers sent twice',
    );
    expect(stdout).toContain('6 comparisons (1,500 rows), all equal; **rows lost: 0**');
    expect(stdout).toContain('memory +11 MB after warm-up');
    expect(stdout).toContain('13 of 14 runs');
    expect(stdout.trimEnd().split('\n')).toHaveLength(4 + 7);
  });

  it('refuses a run that lacks an area, in one line', () => {
    const { faults: _faults, ...areas } = RESULTS.areas;
    const { status, stdout, stderr } = report({ ...RESULTS, areas });
    expect(status).toBe(1);
    expect(stdout).toBe('');
    expect(stderr).toBe(
      'report:reliability: the last run recorded no figures for faults; run the whole reliability suite\n',
    );
  });

  it('names the missing file and the command that writes it', () => {
    const run = spawnSync(process.execPath, [SCRIPT, join(dir.path, 'absent.json')], { encoding: 'utf8' });
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(
      /^report:reliability: no figures at .*absent\.json; run `npm run test:reliability` first\n$/,
    );
  });
});
