// The request window of the bench report: the time-weighted mean in flight between the 20th request and the last.
import { describe, expect, it } from 'vitest';
import { WindowOccupancy } from '../../../src/pipeline/workers/bench-report.js';

describe('WindowOccupancy', () => {
  it('weighs each count by how long it lasted, from the from-th creation to the last', () => {
    const w = new WindowOccupancy(2);
    const a = {};
    const b = {};
    const c = {};
    w.create(a, 0); // 1 in flight until 10 (before the window)
    w.create(b, 10); // the 2nd: the window opens, 2 in flight
    w.end(a, 14); // 2 for 4 ms
    w.create(c, 20); // 1 for 6 ms; the last creation closes the window
    w.end(b, 30);
    w.end(c, 40);
    expect(w.figures()).toEqual({ requests: 3, max_in_flight: 2, mean_in_flight: (2 * 4 + 1 * 6) / 10, window_ms: 10 });
  });

  it('counts a request that ends twice (trailers, then an error) once', () => {
    const w = new WindowOccupancy(1);
    const a = {};
    const b = {};
    w.create(a, 0);
    w.end(a, 5);
    w.end(a, 6);
    w.create(b, 10);
    expect(w.figures().mean_in_flight).toBe(0.5);
  });

  it('has no mean before the window opens', () => {
    const w = new WindowOccupancy(20);
    w.create({}, 0);
    expect(w.figures().mean_in_flight).toBeNaN();
  });
});
