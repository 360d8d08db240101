import { describe, expect, it } from 'vitest';
import { createProgress, loadSpinner } from '../../src/cli/shared/progress.js';

/** A terminal that records what is written to it. */
function terminal() {
  const chunks: string[] = [];
  return {
    chunks,
    stream: {
      isTTY: true,
      columns: 120,
      write: (s: string) => chunks.push(String(s)) > 0,
      cursorTo: () => true,
      moveCursor: () => true,
      clearLine: () => true,
    },
  };
}

const noTimers = { setInterval: () => ({}), clearInterval: () => {} };

describe('the spinner is loaded only for a terminal', () => {
  it('before loadSpinner a terminal gets plain lines; a pipe does not load it; a terminal does', async () => {
    const early = createProgress({ label: 'map', stream: terminal().stream, env: {}, timers: noTimers });
    expect(early.mode).toBe('lines');
    early.stop();

    await loadSpinner({ isTTY: false });
    const piped = createProgress({ label: 'map', stream: terminal().stream, env: {}, timers: noTimers });
    expect(piped.mode).toBe('lines');
    piped.stop();

    await loadSpinner({ isTTY: true });
    const { stream } = terminal();
    const spinning = createProgress({ label: 'map', stream, env: { NO_COLOR: '1' }, timers: noTimers });
    expect(spinning.mode).toBe('spinner');
    spinning.stop();
  });
});
