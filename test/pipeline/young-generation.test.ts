import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';

const setFlags = vi.fn();
let newSpaceMb = 0;
vi.mock('node:v8', async (importOriginal) => ({
  ...(await importOriginal<typeof import('node:v8')>()),
  setFlagsFromString: setFlags,
  getHeapSpaceStatistics: () => [
    { space_name: 'old_space', space_size: 64 * 1024 * 1024 },
    { space_name: 'new_space', space_size: newSpaceMb * 1024 * 1024 },
  ],
}));

/** The observers the module under test made: their callbacks are called here in place of collections. */
const observers: { callback: () => void; disconnected: boolean }[] = [];
vi.mock('node:perf_hooks', async (importOriginal) => ({
  ...(await importOriginal<typeof import('node:perf_hooks')>()),
  PerformanceObserver: class {
    private readonly entry: { callback: () => void; disconnected: boolean };
    constructor(callback: () => void) {
      this.entry = { callback, disconnected: false };
      observers.push(this.entry);
    }
    observe(): void {}
    disconnect(): void {
      this.entry.disconnected = true;
    }
  },
}));

/** A fresh copy of the module: it keeps its state per process, so each case loads its own. */
async function freshModule(): Promise<typeof import('../../src/pipeline/run/young-generation.js')> {
  vi.resetModules();
  return import('../../src/pipeline/run/young-generation.js');
}

function collect(): void {
  for (const o of observers) if (!o.disconnected) o.callback();
}

afterEach(async () => {
  // a case that left the bound on would leave its 'worker' listener behind
  (await import('../../src/pipeline/run/young-generation.js')).releaseYoungGeneration();
  setFlags.mockClear();
  observers.length = 0;
  newSpaceMb = 0;
});

describe('boundYoungGeneration', () => {
  it('stops the growth once a collection finds the new space at its size, not before', async () => {
    const { boundYoungGeneration, NEW_SPACE_MB } = await freshModule();
    boundYoungGeneration([]);
    newSpaceMb = NEW_SPACE_MB / 2;
    collect();
    expect(setFlags).not.toHaveBeenCalled();
    newSpaceMb = NEW_SPACE_MB;
    collect();
    expect(setFlags).toHaveBeenCalledWith('--semi-space-growth-factor=1');
    // worker threads started from now on begin at their own maximum, as they cannot grow
    expect(setFlags).toHaveBeenCalledWith(expect.stringMatching(/^--min-semi-space-size=[1-9]/));
  });

  it('stops it again once a worker thread is running, as creating its isolate undid it', async () => {
    const { boundYoungGeneration, NEW_SPACE_MB } = await freshModule();
    boundYoungGeneration([]);
    newSpaceMb = NEW_SPACE_MB;
    collect();
    setFlags.mockClear();
    const worker = new EventEmitter();
    process.emit('worker', worker as never);
    expect(setFlags).not.toHaveBeenCalled();
    worker.emit('online');
    expect(setFlags).toHaveBeenCalledWith('--semi-space-growth-factor=1');
  });

  it('gives V8 its own growth back when released, and stops watching', async () => {
    const { boundYoungGeneration, releaseYoungGeneration, NEW_SPACE_MB } = await freshModule();
    boundYoungGeneration([]);
    newSpaceMb = NEW_SPACE_MB;
    collect();
    setFlags.mockClear();
    const listeners = process.listenerCount('worker');
    releaseYoungGeneration();
    expect(setFlags).toHaveBeenCalledWith('--semi-space-growth-factor=2');
    expect(setFlags).toHaveBeenCalledWith('--min-semi-space-size=0');
    expect(process.listenerCount('worker')).toBe(listeners - 1);
    setFlags.mockClear();
    collect();
    expect(setFlags).not.toHaveBeenCalled();
  });

  it('sets nothing when released before the new space reached its size', async () => {
    const { boundYoungGeneration, releaseYoungGeneration } = await freshModule();
    boundYoungGeneration([]);
    releaseYoungGeneration();
    expect(setFlags).not.toHaveBeenCalled();
  });

  it.each([['--max-semi-space-size=4'], ['--semi_space_growth_factor=1'], ['--min-semi-space-size=2']])(
    "leaves a size given on node's command line (%s) alone",
    async (arg) => {
      const { boundYoungGeneration, NEW_SPACE_MB } = await freshModule();
      boundYoungGeneration(['--enable-source-maps', arg]);
      expect(observers).toHaveLength(0);
      newSpaceMb = NEW_SPACE_MB;
      collect();
      expect(setFlags).not.toHaveBeenCalled();
    },
  );
});
