// Test sets: unit (fast, in-process), e2e (the built CLI against the local service), reliability (faults, crashes,
// bad input; records its figures), scripts (the project's own scripts, which do not depend on the Node version the
// suite runs on). `npm test` runs all four; `--project NAME` picks one.
//
// The unit files run first, one per core: they are in-process work. The others run afterwards, one file fewer at a
// time than there are cores (Vitest's default, one at a time on 2 cores): each starts CLI processes and services of
// its own, and their deadlines (a kill mid-run, a slow answer) must hold with a core to spare.
import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

const AFTER_UNIT = { sequence: { groupOrder: 1 } };

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
          maxWorkers: availableParallelism(),
          sequence: { groupOrder: 0 },
        },
      },
      { extends: true, test: { name: 'e2e', include: ['test/e2e/**/*.test.ts'], ...AFTER_UNIT } },
      { extends: true, test: { name: 'reliability', include: ['test/reliability/**/*.test.ts'], ...AFTER_UNIT } },
      { extends: true, test: { name: 'scripts', include: ['test/scripts/**/*.test.ts'], ...AFTER_UNIT } },
    ],
  },
});
