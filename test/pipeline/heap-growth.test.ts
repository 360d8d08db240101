import { afterEach, describe, expect, it, vi } from 'vitest';

const setFlags = vi.fn();
vi.mock('node:v8', async (importOriginal) => ({
  ...(await importOriginal<typeof import('node:v8')>()),
  setFlagsFromString: setFlags,
}));

/** A fresh copy of the module: it applies the step once per process, so each case loads its own. */
async function freshModule(): Promise<typeof import('../../src/pipeline/run/heap-growth.js')> {
  vi.resetModules();
  return import('../../src/pipeline/run/heap-growth.js');
}

afterEach(() => setFlags.mockClear());

describe('boundHeapGrowth', () => {
  it('sets the growth step once, however often it is called', async () => {
    const { boundHeapGrowth, HEAP_GROWING_PERCENT } = await freshModule();
    boundHeapGrowth([]);
    boundHeapGrowth([]);
    expect(setFlags).toHaveBeenCalledTimes(1);
    expect(setFlags).toHaveBeenCalledWith(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  });

  it.each([['--heap-growing-percent=200'], ['--heap_growing_percent=10'], ['--heap-growing-percent']])(
    "leaves a value given on node's command line (%s) alone",
    async (arg) => {
      const { boundHeapGrowth } = await freshModule();
      boundHeapGrowth(['--enable-source-maps', arg]);
      expect(setFlags).not.toHaveBeenCalled();
    },
  );

  it('is not fooled by another heap flag', async () => {
    const { boundHeapGrowth } = await freshModule();
    boundHeapGrowth(['--max-old-space-size=4096']);
    expect(setFlags).toHaveBeenCalledTimes(1);
  });
});
