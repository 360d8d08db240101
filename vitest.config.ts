// Test sets: unit (fast, in-process), e2e (the built CLI against the local service), reliability (faults, crashes,
// bad input; records its figures), scripts (the project's own scripts, which do not depend on the Node version the
// suite runs on). `npm test` runs all of them; `--project NAME` picks one (`--project 'e2e*'` takes e2e and
// e2e-timed).
//
// Two groups run one after the other:
// - first, one file per core: the unit files (in-process work) and the end-to-end, reliability and scripts files
//   listed in SHARES_A_CORE, which start CLI processes but hold no deadline a busy core could miss;
// - then the other end-to-end and reliability files (the -timed projects), one at a time: a kill mid-run, a slow
//   answer, a retry's wait or a lock's must hold with a core to spare.
// A new end-to-end or reliability file runs in the second group until it is listed here.
import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

const SHARES_A_CORE = [
  'test/e2e/bench-report.test.ts',
  'test/e2e/deploy-doc.test.ts',
  'test/e2e/hash-encoding.test.ts',
  'test/e2e/map-bad-rows.test.ts',
  'test/e2e/map-formats.test.ts',
  'test/e2e/map-local.test.ts',
  'test/e2e/map-parts.test.ts',
  'test/e2e/map-shard.test.ts',
  'test/e2e/metrics-file.test.ts',
  'test/e2e/null-markers.test.ts',
  'test/e2e/optout-sweep-state.test.ts',
  'test/e2e/output-paths.test.ts',
  'test/e2e/outputs-together.test.ts',
  'test/e2e/phone-region-column.test.ts',
  'test/e2e/phone-region-hint.test.ts',
  'test/e2e/phone-region.test.ts',
  'test/e2e/proxy.test.ts',
  'test/e2e/state-damaged.test.ts',
  'test/e2e/state-postgres-dry-run.test.ts',
  'test/e2e/state-postgres.test.ts',
  'test/e2e/state-shard.test.ts',
  'test/e2e/summary-json.test.ts',
  'test/e2e/token-consent.test.ts',
  'test/e2e/usage-errors.test.ts',
  'test/reliability/bad-input.test.ts',
  'test/reliability/malformed-answers.test.ts',
  'test/reliability/secrets.test.ts',
];

const inFolder = (folder: string) => SHARES_A_CORE.filter((file) => file.startsWith(`test/${folder}/`));

const FIRST = { maxWorkers: availableParallelism(), sequence: { groupOrder: 0 } };
const AFTER = { sequence: { groupOrder: 1 } };

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/**/*.test.ts'],
          exclude: ['test/e2e/**', 'test/reliability/**', 'test/scripts/**'],
          ...FIRST,
        },
      },
      { extends: true, test: { name: 'e2e', include: inFolder('e2e'), ...FIRST } },
      { extends: true, test: { name: 'reliability', include: inFolder('reliability'), ...FIRST } },
      { extends: true, test: { name: 'scripts', include: ['test/scripts/**/*.test.ts'], ...FIRST } },
      {
        extends: true,
        test: { name: 'e2e-timed', include: ['test/e2e/**/*.test.ts'], exclude: inFolder('e2e'), ...AFTER },
      },
      {
        extends: true,
        test: {
          name: 'reliability-timed',
          include: ['test/reliability/**/*.test.ts'],
          exclude: inFolder('reliability'),
          ...AFTER,
        },
      },
    ],
  },
});
