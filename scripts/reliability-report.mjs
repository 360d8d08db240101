#!/usr/bin/env node
// Prints the README's reliability table (markdown) from the figures the last reliability run recorded.
//
//   npm run test:reliability && npm run report:reliability
//   node scripts/reliability-report.mjs [FILE]      # another results file
import { readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
// Where test/reliability/results.ts writes them (an ignored path: generated figures stay out of git).
const DEFAULT_FILE = join(ROOT, 'test', 'reliability', '.results', 'results.json');

/** The areas the table is made of; a run that lacks one (a filtered or failed run) cannot render the table. */
const AREAS = [
  'faults',
  'crash_map',
  'crash_remap_due',
  'crash_optout_check',
  'crash_token_refresh',
  'bad_input',
  'service_hardening',
  'secrets_pii',
  'clock_skew',
];

function fail(message) {
  process.stderr.write(`report:reliability: ${message}\n`);
  process.exit(1);
}

function readResults(file) {
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    fail(`no figures at ${relative(process.cwd(), file)}; run \`npm run test:reliability\` first`);
  }
  try {
    return JSON.parse(text);
  } catch {
    fail(`${relative(process.cwd(), file)} is not JSON; run \`npm run test:reliability\` again to rewrite it`);
  }
}

const n = (v) => Number(v ?? 0).toLocaleString('en-US');
const count = (v, word) => `${n(v)} ${word}${Number(v) === 1 ? '' : 's'}`;
const sum = (areas, key) => areas.reduce((total, a) => total + Number(a[key] ?? 0), 0);

/** The table's rows: what was tried, and what held, from the recorded figures. */
export function renderTable(results) {
  const areas = results.areas ?? {};
  const missing = AREAS.filter((a) => areas[a] === undefined);
  if (missing.length > 0) {
    throw new Error(`the last run recorded no figures for ${missing.join(', ')}; run the whole reliability suite`);
  }
  const { faults, bad_input: bad, service_hardening: fuzz, secrets_pii: secrets, clock_skew: clock } = areas;
  const crashAreas = ['crash_map', 'crash_remap_due', 'crash_optout_check', 'crash_token_refresh'].map((a) => areas[a]);
  const [crashMap, crashRemap, crashOptout, crashToken] = crashAreas;
  const all = Object.values(areas);
  const rows = [
    [
      'faults: 429 at 0.5, rate-limit bursts, 500s, dropped connections, 1.5 s latency, all at once, a service ' +
        'restarted mid-run, an exhausted retry budget',
      `${n(faults.faults_injected)} faults and ${count(faults.restarts, 'restart')} injected, ${n(faults.delayed_answers)} ` +
        `answers delayed, ${n(faults.runs)} runs; every run finished or marked rows \`error\` (exit 3), and a re-run ` +
        'completed it',
    ],
    [
      `crashes: SIGKILL / SIGINT / SIGTERM at seeded points (map --state ${n(crashMap.crashes)}, remap-due ` +
        `${n(crashRemap.crashes)}, optout-check --state ${n(crashOptout.crashes)}, token refresh --update ` +
        `${n(crashToken.crashes)})`,
      `${n(sum(crashAreas, 'crashes'))} kills; SQLite integrity ok every time, no half-written entry, ` +
        `${n(sum(crashAreas, 'items_resent'))} identifiers sent twice, ${n(crashToken.torn_files)} torn identity ` +
        "files; every change and opt-out of a killed run's committed batches reported by the re-run (journaled in " +
        'the state)',
    ],
    [
      `bad input: every file of \`test/fixtures/bad-input/\` plus a generated 10 MB and 17 MB line ` +
        `(${n(bad.bad_input_files)} files), through the built CLI`,
      `${n(bad.cli_runs)} CLI runs, each a per-row status or one error line naming file and line; 0 stack traces`,
    ],
    [
      'fuzz: seeded random and mutated requests to `serve`',
      `${n(fuzz.fuzz_requests)} requests; ${n(fuzz.status_5xx)} server errors, ${n(fuzz.dropped)} dropped ` +
        `connections; memory +${n(Number(fuzz.rss_after_mb) - Number(fuzz.rss_before_mb))} MB after warm-up`,
    ],
    ...(areas.environment === undefined
      ? []
      : [
          [
            'environment: terminals of 0 x 0 and 80 x 0, a dumb terminal, SIGTERM, SIGHUP and a terminal closed ' +
              'mid-run, a proxy between the tool and the service',
            `${n(areas.environment.environment_faults)} runs; each ended in bounded time, the output after a re-run ` +
              `equal to an undisturbed run's, ${n(areas.environment.temp_files_left)} temp files left`,
          ],
        ]),
    ...(areas.malformed_answers === undefined
      ? []
      : [
          [
            'malformed answers: a proxy that opens real answers, breaks one item (every shape of the wire contract) ' +
              'and seals them again, for map v3 and v2, remap-due and optout-check',
            `${n(areas.malformed_answers.malformed_runs)} runs; each exit 3 with \`error\` rows and nothing of the ` +
              "poisoned batches stored; an honest re-run's output equal to an undisturbed run's",
          ],
        ]),
    [
      'outputs compared with an undisturbed run',
      `${n(sum(all, 'outputs_compared'))} comparisons (${n(sum(all, 'rows_compared'))} rows), all equal; ` +
        `**rows lost: ${n(sum(all, 'rows_lost'))}**`,
    ],
    [
      'secrets and personal data searched in stderr, summaries, `--summary-json` and state files',
      `${n(secrets.needles)} values searched, ${n(secrets.leaks)} found`,
    ],
    [
      'a client clock 5 minutes off',
      `${n(clock.clear_clock_skew_errors)} of ${n(clock.skewed_runs)} runs: one "clock skew" line, exit 1`,
    ],
  ];
  const day = String(results.updated_at ?? '').slice(0, 10) || 'unknown date';
  return [
    `Figures of the last run (${day}, scale ${results.scale ?? 1}):`,
    '',
    '| what was tried | what held |',
    '|---|---|',
    ...rows.map(([tried, held]) => `| ${tried} | ${held} |`),
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = process.argv[2] ?? DEFAULT_FILE;
  try {
    process.stdout.write(`${renderTable(readResults(file))}\n`);
  } catch (err) {
    fail(err instanceof Error ? err.message : String(err));
  }
}
