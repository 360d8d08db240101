import { afterAll, describe, expect, it } from 'vitest';
import { nextDue, nextDueOf, nothingDueLine } from '../../src/pipeline/jobs/remap-report.js';
import { openFileState } from '../../src/state/file-backend.js';
import type { EntryUpdate } from '../../src/state/index.js';
import { b64, ENV, tmpStates } from '../state/tmp-state.js';

// A run with nothing due says when the next entries come due: however far that is (a --now in the past of the
// service that mapped them, a service whose clock was moved ahead), never that there is no refresh time.
const t = tmpStates('uid2-next-due-');
afterAll(() => t.cleanup());

const DAY = 86_400;
const MIDNIGHT = Date.UTC(2026, 10, 28) / 1000;

function mapped(label: string, r: number): EntryUpdate {
  return { type: 'email', hash: b64(label), outcome: { kind: 'mapped', u: b64(`u-${label}`), p: null, r } };
}

describe('nextDue and the line of a run with nothing due', () => {
  it('finds entries that come due years after now, and counts that day', () => {
    const s = t.open(t.file());
    s.commitBatch(
      [mapped('a', MIDNIGHT + 900 * DAY), mapped('b', MIDNIGHT + 900 * DAY), mapped('c', MIDNIGHT + 901 * DAY)],
      MIDNIGHT,
    );
    const next = nextDue(s, MIDNIGHT - DAY);
    expect(next).toEqual({ day: new Date((MIDNIGHT + 900 * DAY) * 1000).toISOString().slice(0, 10), count: 2 });
    const line = nothingDueLine(next, MIDNIGHT - DAY);
    expect(line).not.toMatch(/no entry with a refresh time/);
    expect(line).toContain(`the next 2 entries come due on ${next?.day}`);
  });

  it('a state that names the first day itself (firstDueDay, as a database does) gives the same answer', async () => {
    const path = t.file();
    const s = t.open(path);
    // by id: an entry late on the first day, one early on it, one a day later; one due long before now
    s.commitBatch([mapped('f', MIDNIGHT + 900 * DAY + 7200)], MIDNIGHT);
    s.commitBatch([mapped('g', MIDNIGHT + 900 * DAY + 60), mapped('h', MIDNIGHT + 901 * DAY)], MIDNIGHT);
    const expected = nextDue(s, MIDNIGHT - DAY);
    s.close();
    expect(expected).toEqual({ day: new Date((MIDNIGHT + 900 * DAY) * 1000).toISOString().slice(0, 10), count: 2 });
    const backend = await openFileState(path, { envFingerprint: ENV });
    try {
      expect(await backend.firstDueDay(MIDNIGHT - DAY)).toBe(MIDNIGHT + 900 * DAY);
      expect(await backend.firstDueDay(MIDNIGHT + 900 * DAY + 60)).toBe(MIDNIGHT + 900 * DAY);
      expect(await backend.firstDueDay(MIDNIGHT + 900 * DAY + 7200)).toBe(MIDNIGHT + 901 * DAY);
      expect(await backend.firstDueDay(MIDNIGHT + 901 * DAY)).toBeNull();
      expect(await nextDueOf(backend, MIDNIGHT - DAY)).toEqual(expected);
    } finally {
      await backend.close();
    }
  });

  it('within the next days, as before', () => {
    const s = t.open(t.file());
    s.commitBatch([mapped('d', MIDNIGHT + 3 * DAY), mapped('e', MIDNIGHT + 5 * DAY)], MIDNIGHT);
    expect(nextDue(s, MIDNIGHT + 3600)).toEqual({
      day: new Date((MIDNIGHT + 3 * DAY) * 1000).toISOString().slice(0, 10),
      count: 1,
    });
  });

  it('a state with no entry that has a refresh time (only tombstones) says so', () => {
    const s = t.open(t.file());
    s.commitBatch([{ type: 'email', hash: b64('gone'), outcome: { kind: 'optout' } }], MIDNIGHT);
    expect(nextDue(s, MIDNIGHT)).toBeNull();
    expect(nothingDueLine(null, MIDNIGHT)).toMatch(/no entry with a refresh time/);
  });
});
