import { describe, expect, it } from 'vitest';
import { formatCount, formatDuration, formatRate } from '../../src/pipeline/run/summary.js';
import { seeded } from '../helpers/seeded-random.js';

// The summary's figures are written by hand, as en-US Intl writes them: held to Intl here, on the edges of its
// rounding (the shortest decimal rounded half away from zero, not the double's exact value) and on seeded values.
const INTEGER = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const ONE_DECIMAL = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });

const EDGES = (
  '0 -0 0.04 -0.04 0.05 0.15 0.25 0.45 0.95 1.005 2.5 3.5 -2.5 5.55 6.05 9.94 9.95 9.96 10 999.5 1000 9999.95 ' +
  '999999.5 1e6 123456789.5 9007199254740992 1e-7 -1e-7 1e20 1e21 1e22 NaN Infinity -Infinity'
)
  .split(' ')
  .map(Number);

function values(): number[] {
  const random = seeded(28);
  const out = [...EDGES];
  for (let i = 0; i < 20_000; i++) {
    const r = random();
    out.push(r * 10, Math.round(r * 1000) / 100, Math.round(r * 1e5) / 20, r * 1e9, Math.round(r * 1e7), -r * 100);
  }
  return out;
}

describe('the summary line writes its figures as en-US Intl does', () => {
  it('counts: comma thousands, whole', () => {
    const wrong = values().filter((n) => formatCount(n) !== INTEGER.format(n));
    expect(wrong).toEqual([]);
    expect(formatCount(1234567)).toBe('1,234,567');
  });

  it('rates: whole from 10, one decimal below', () => {
    const wrong = values().filter((n) => formatRate(n) !== (n >= 10 ? INTEGER.format(n) : ONE_DECIMAL.format(n)));
    expect(wrong).toEqual([]);
    expect(formatRate(0.15)).toBe('0.2');
    expect(formatRate(8333.4)).toBe('8,333');
  });

  it('durations under 10 s with one decimal', () => {
    const wrong = values()
      .filter((n) => n >= 0 && n < 10)
      .filter((n) => formatDuration(n) !== `${ONE_DECIMAL.format(n)} s`);
    expect(wrong).toEqual([]);
    expect(formatDuration(2.25)).toBe('2.3 s');
  });
});
