// Test sets: unit (fast, in-process), e2e (the built CLI against the local service), reliability (faults, crashes,
// bad input; records its figures), scripts (the project's own scripts, which do not depend on the Node version the
// suite runs on). `npm test` runs all four; `--project NAME` picks one.
import { defineConfig } from 'vitest/config';

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
        },
      },
      { extends: true, test: { name: 'e2e', include: ['test/e2e/**/*.test.ts'] } },
      { extends: true, test: { name: 'reliability', include: ['test/reliability/**/*.test.ts'] } },
      { extends: true, test: { name: 'scripts', include: ['test/scripts/**/*.test.ts'] } },
    ],
  },
});
