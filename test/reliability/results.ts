import { mkdirSync, readFileSync, renameSync, rmdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll } from 'vitest';
import { SCALE } from './harness.js';

/**
 * The figures of the last run of the reliability suite, in test/reliability/.results/results.json (ignored by git:
 * generated figures; `npm run report:reliability` renders them as the README's table): each test file records
 * its area when it ends, and the totals are summed again each time. Test files run in parallel workers, so a
 * lock directory serializes the read-modify-write.
 */

export const RESULTS_PATH = join(dirname(fileURLToPath(import.meta.url)), '.results', 'results.json');
const LOCK = `${RESULTS_PATH}.lock`;

/** The figures the README's table shows; every area contributes what it measured. */
export interface AreaFigures {
  faults_injected?: number;
  crashes?: number;
  bad_input_files?: number;
  fuzz_requests?: number;
  rows_lost?: number;
  outputs_compared?: number;
  [detail: string]: number | string | boolean | undefined;
}

const TOTAL_KEYS = [
  'faults_injected',
  'crashes',
  'bad_input_files',
  'fuzz_requests',
  'rows_lost',
  'outputs_compared',
] as const;

interface ResultsFile {
  about: string;
  scale: number;
  updated_at: string;
  totals: Record<(typeof TOTAL_KEYS)[number], number>;
  areas: Record<string, AreaFigures & { recorded_at: string; scale: number }>;
}

function lock(): void {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      mkdirSync(LOCK);
      return;
    } catch {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${LOCK}; remove it if no test is running`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
    }
  }
}

function read(): ResultsFile {
  try {
    const parsed = JSON.parse(readFileSync(RESULTS_PATH, 'utf8')) as Partial<ResultsFile>;
    if (parsed.areas && typeof parsed.areas === 'object') return parsed as ResultsFile;
  } catch {
    // first run, or a damaged file: start over
  }
  return {
    about: '',
    scale: SCALE,
    updated_at: '',
    totals: { faults_injected: 0, crashes: 0, bad_input_files: 0, fuzz_requests: 0, rows_lost: 0, outputs_compared: 0 },
    areas: {},
  };
}

/** Records one area's figures (replacing its previous ones) and recomputes the totals. */
export function recordResults(area: string, figures: AreaFigures): void {
  mkdirSync(dirname(RESULTS_PATH), { recursive: true });
  lock();
  try {
    const file = read();
    const now = new Date().toISOString();
    file.areas[area] = { ...figures, recorded_at: now, scale: SCALE };
    const totals = Object.fromEntries(TOTAL_KEYS.map((k) => [k, 0])) as ResultsFile['totals'];
    for (const figures of Object.values(file.areas)) {
      for (const k of TOTAL_KEYS) {
        const v = figures[k];
        if (typeof v === 'number') totals[k] += v;
      }
    }
    const out: ResultsFile = {
      about:
        'Written by the reliability suite (npm run test:reliability, also part of npm test) at the end of each test file: what it tried and what held in its last run.',
      scale: SCALE,
      updated_at: now,
      totals,
      areas: Object.fromEntries(Object.entries(file.areas).sort(([a], [b]) => a.localeCompare(b))),
    };
    const temp = `${RESULTS_PATH}.${process.pid}.tmp`;
    writeFileSync(temp, `${JSON.stringify(out, null, 2)}\n`);
    renameSync(temp, RESULTS_PATH);
  } finally {
    rmdirSync(LOCK);
  }
}

/** The tests of a suite and of its inner suites. */
interface TaskLike {
  type: string;
  tasks?: TaskLike[];
  result?: { state?: string };
}

function allTests(task: TaskLike): TaskLike[] {
  return task.type === 'test' ? [task] : (task.tasks ?? []).flatMap(allTests);
}

/**
 * Records `area` when the test file ends, if every one of its tests ran and passed: a broken or filtered (-t) run
 * must not overwrite the figures of the last complete one. Call once at the top level of a test file.
 */
export function recordWhenPassed(area: string, figures: () => AreaFigures): void {
  // biome-ignore lint/correctness/noEmptyPattern: vitest hands hooks their fixtures first (it requires an object pattern) and the suite second
  afterAll(({}, suite) => {
    const tests = allTests(suite as unknown as TaskLike);
    if (tests.length > 0 && tests.every((t) => t.result?.state === 'pass')) recordResults(area, figures());
  });
}
