// Test sets: unit (fast, in-process), e2e (the built CLI against the local service), reliability (faults, crashes,
// bad input; records its figures). `npm test` runs all three; `--project NAME` picks one.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: ['test/e2e/**', 'test/reliability/**'] },
      },
      { extends: true, test: { name: 'e2e', include: ['test/e2e/**/*.test.ts'] } },
      { extends: true, test: { name: 'reliability', include: ['test/reliability/**/*.test.ts'] } },
    ],
  },
});
