import { describe, expect, it } from 'vitest';
import { ServerError, UnauthorizedError, type OptedOutItem } from '../../src/protocol/index.js';
import { FakeOptoutService, rawUid } from './optout-fakes.js';
import {
  checkRawUidRows,
  EMPTY_RAW_UID,
  INVALID_RAW_UID,
  pickRawUidColumn,
  rawUidOfCell,
  verdictCells,
  type CheckedRow,
} from '../../src/pipeline/optout/optout-sweep.js';
import { formatOptoutSummary, optoutSummary, verdictLayout } from '../../src/pipeline/jobs/optout-check-job.js';
import type { ServiceClient } from '../../src/client/index.js';
import type { InputRow } from '../../src/pipeline/io/table.js';

async function* chunks(rows: string[][], size = 7): AsyncGenerator<InputRow[]> {
  for (let i = 0; i < rows.length; i += size) {
    yield rows.slice(i, i + size).map((cells, j) => ({ line: i + j + 2, cells }));
  }
}

const SINCE = Date.UTC(2026, 0, 15, 12, 30, 0);

describe('checkRawUidRows', () => {
  it('answers every row in input order: opted out with its time, not opted out, invalid or missing (never sent)', async () => {
    const rows: string[][] = [];
    const optedOut = new Map<string, number>();
    for (let i = 0; i < 250; i++) {
      if (i % 25 === 3) rows.push([`row${i}`, 'not-a-raw-uid']);
      else if (i % 25 === 4) rows.push([`row${i}`, '']);
      else rows.push([`row${i}`, rawUid(i)]);
      if (i % 10 === 1) optedOut.set(rawUid(i), SINCE + i * 1000);
    }
    const service = new FakeOptoutService(optedOut);
    const out: CheckedRow[] = [];
    const result = await checkRawUidRows(chunks(rows), {
      column: 1,
      check: service.check,
      batchSize: 40,
      onRows: (r) => void out.push(...r),
    });

    expect(result.outcome).toEqual({ kind: 'completed' });
    expect(out.map((r) => r.row.cells[0])).toEqual(rows.map((r) => r[0]));
    for (let i = 0; i < 250; i++) {
      const verdict = out[i].verdict;
      if (i % 25 === 3) expect(verdict).toEqual({ kind: 'invalid', reason: INVALID_RAW_UID });
      else if (i % 25 === 4) expect(verdict).toEqual({ kind: 'missing', reason: EMPTY_RAW_UID });
      else if (i % 10 === 1) expect(verdict).toEqual({ kind: 'opted_out', sinceMs: SINCE + i * 1000 });
      else expect(verdict).toEqual({ kind: 'not_opted_out' });
    }
    expect(service.sent.every((id) => id.length === 44)).toBe(true);
    expect(service.sent.length).toBe(230);
    expect(service.calls.every((c) => c.length <= 40)).toBe(true);
    expect(result.counts.status).toEqual({ opted_out: 25, not_opted_out: 205, invalid: 10, missing: 10, error: 0 });
    // the summary says missing, as map's does for an empty cell
    const stats = { requests: 7, retries: 0, http429: 0 } as ServiceClient['stats'];
    const summary = optoutSummary('optout-check', result, { stats } as ServiceClient, 0, 1000);
    expect(summary.status).toMatchObject({ invalid: 10, missing: 10 });
    expect(formatOptoutSummary(summary)).toMatch(/ 10 invalid, 10 missing, 0 error;/);
    expect(result.counts.rows).toBe(250);
  });

  it('sends one batch at a time by default: the next only after the previous was answered', async () => {
    const rows = Array.from({ length: 1_000 }, (_, i) => [rawUid(i)]);
    const service = new FakeOptoutService(new Map(), { latencyMs: 2 });
    await checkRawUidRows(chunks(rows, 100), {
      column: 0,
      check: service.check,
      batchSize: 50,
      onRows: () => undefined,
    });
    expect(service.calls.length).toBe(20);
    expect(service.peakInFlight).toBe(1);
  });

  it('with a private operator, several batches are in flight, and rows still leave in input order', async () => {
    const rows = Array.from({ length: 1_000 }, (_, i) => [String(i), rawUid(i)]);
    const optedOut = new Map(rows.filter((_, i) => i % 7 === 0).map((r, i) => [r[1], SINCE + i]));
    let seed = 11;
    const service = new FakeOptoutService(optedOut, { latencyMs: 3 });
    const slow = async (ids: string[], signal: AbortSignal): Promise<OptedOutItem[]> => {
      seed = (seed * 48271) % 2147483647;
      await new Promise((r) => setTimeout(r, seed % 4));
      return service.check(ids, signal);
    };
    const out: CheckedRow[] = [];
    await checkRawUidRows(chunks(rows, 64), {
      column: 1,
      check: slow,
      batchSize: 50,
      concurrency: 4,
      onRows: (r) => void out.push(...r),
    });
    expect(service.peakInFlight).toBeGreaterThan(1);
    expect(service.peakInFlight).toBeLessThanOrEqual(4);
    expect(out.map((r) => r.row.cells[0])).toEqual(rows.map((r) => r[0]));
    expect(out.filter((r) => r.verdict.kind === 'opted_out').length).toBe(optedOut.size);
  });

  it('sends a raw UID repeated within a batch once, and answers every row of it', async () => {
    const rows = [[rawUid(1)], [rawUid(2)], [rawUid(1)], [rawUid(1)]];
    const service = new FakeOptoutService(new Map([[rawUid(1), SINCE]]));
    const out: CheckedRow[] = [];
    await checkRawUidRows(chunks(rows), { column: 0, check: service.check, onRows: (r) => void out.push(...r) });
    expect(service.calls).toEqual([[rawUid(1), rawUid(2)]]);
    expect(out.map((r) => r.verdict.kind)).toEqual(['opted_out', 'not_opted_out', 'opted_out', 'opted_out']);
  });

  it('a batch that fails after the retries marks its rows error; the other batches are answered', async () => {
    const rows = Array.from({ length: 100 }, (_, i) => [rawUid(i)]);
    const service = new FakeOptoutService(new Map(), {
      failOn: (call) => (call === 2 ? new ServerError(503, 'server_error', undefined) : undefined),
    });
    const out: CheckedRow[] = [];
    const result = await checkRawUidRows(chunks(rows), {
      column: 0,
      check: service.check,
      batchSize: 30,
      onRows: (r) => void out.push(...r),
    });
    expect(result.outcome.kind).toBe('completed');
    expect(out.slice(30, 60).every((r) => r.verdict.kind === 'error')).toBe(true);
    expect(out.filter((r) => r.verdict.kind === 'error').length).toBe(30);
    expect(result.counts.batchesFailed).toBe(1);
    expect(result.counts.status.error).toBe(30);
  });

  it('a 401 stops the run: nothing more is sent', async () => {
    const rows = Array.from({ length: 100 }, (_, i) => [rawUid(i)]);
    const service = new FakeOptoutService(new Map(), {
      failOn: () => new UnauthorizedError(401, 'unauthorized', undefined),
    });
    const result = await checkRawUidRows(chunks(rows), {
      column: 0,
      check: service.check,
      batchSize: 30,
      onRows: () => undefined,
    });
    expect(result.outcome.kind).toBe('auth-refused');
    expect(service.calls.length).toBe(1);
  });

  it('a long row (shifted columns) is reported, not sent', async () => {
    const source = (async function* (): AsyncGenerator<InputRow[]> {
      yield [
        { line: 2, cells: [rawUid(1)] },
        { line: 3, cells: [rawUid(2)], problem: { kind: 'long_row', cells: 2, expected: 1 } },
      ];
    })();
    const service = new FakeOptoutService(new Map());
    const out: CheckedRow[] = [];
    await checkRawUidRows(source, { column: 0, check: service.check, onRows: (r) => void out.push(...r) });
    expect(service.sent).toEqual([rawUid(1)]);
    expect(out[1].verdict).toMatchObject({ kind: 'invalid', reason: expect.stringMatching(/header has 1/) });
  });
});

describe('raw UID cells and output columns', () => {
  it('keeps the case, trims spaces, refuses other shapes', () => {
    const id = rawUid(5);
    expect(rawUidOfCell(` ${id}\t`)).toEqual({ ok: true, rawUid: id });
    // raw UIDs are case-sensitive: another case is another raw UID, sent as written
    expect(rawUidOfCell(id.toLowerCase())).toEqual({ ok: true, rawUid: id.toLowerCase() });
    expect(rawUidOfCell(id.slice(0, 43))).toEqual({ ok: false, reason: INVALID_RAW_UID });
    expect(rawUidOfCell('a'.repeat(64))).toEqual({ ok: false, reason: INVALID_RAW_UID });
  });

  it('writes the opt-out time as ISO 8601 UTC from milliseconds', () => {
    expect(verdictCells({ kind: 'opted_out', sinceMs: SINCE })).toEqual([
      'true',
      String(Date.UTC(2026, 0, 15, 12, 30) / 1000),
      '',
    ]);
    expect(verdictCells({ kind: 'opted_out', sinceMs: SINCE }, 'iso')).toEqual(['true', '2026-01-15T12:30:00Z', '']);
    expect(verdictCells({ kind: 'not_opted_out' })).toEqual(['false', '', '']);
    expect(verdictCells({ kind: 'invalid', reason: INVALID_RAW_UID })).toEqual(['', '', INVALID_RAW_UID]);
  });

  it('finds the raw UID column by its name, or by --col', () => {
    expect(pickRawUidColumn(['email', 'raw_uid'], undefined)).toEqual({ ok: true, index: 1 });
    expect(pickRawUidColumn(['id', 'Advertising ID'], undefined)).toEqual({ ok: true, index: 1 });
    expect(pickRawUidColumn(['RAW_UID2', 'x'], undefined)).toEqual({ ok: true, index: 0 });
    expect(pickRawUidColumn(['anything'], undefined)).toEqual({ ok: true, index: 0 });
    expect(pickRawUidColumn(['a', 'b'], 'B')).toEqual({ ok: true, index: 1 });
    const none = pickRawUidColumn(['a', 'b'], undefined);
    expect(none.ok === false && none.message).toMatch(/--col/);
    const many = pickRawUidColumn(['uid', 'raw_uid'], undefined);
    expect(many.ok === false && many.message).toMatch(/several columns.*'uid', 'raw_uid'/);
    // map's own output: <prefix>raw_uid is a raw UID, <prefix>prev_raw_uid the previous one
    expect(
      pickRawUidColumn(
        ['email', 'Email_Address_raw_uid', 'Email_Address_prev_raw_uid', 'Email_Address_status'],
        undefined,
      ),
    ).toEqual({ ok: true, index: 1 });
    expect(pickRawUidColumn(['id', 'uid2_raw_uid', 'uid2_prev_raw_uid'], undefined)).toEqual({ ok: true, index: 1 });
    const two = pickRawUidColumn(['email_raw_uid', 'email_prev_raw_uid', 'phone_raw_uid'], undefined);
    expect(two.ok === false && two.message).toMatch(/several columns.*'email_raw_uid', 'phone_raw_uid'.*--col/);
    const missing = pickRawUidColumn(['a', 'b'], 'c');
    expect(missing.ok === false && missing.message).toMatch(/--col 'c' is not a column.*'a', 'b'/);
  });

  it("verdict columns: appended, named apart from map's own reason; an earlier check's are written over", () => {
    const mapped = ['id', 'raw_uid', 'prev_raw_uid', 'refresh_from', 'status', 'reason'];
    const layout = verdictLayout(mapped);
    expect(layout.header).toEqual([...mapped, 'opted_out', 'opted_out_since', 'reason_2']);
    expect(layout.types).toEqual([
      'input',
      'input',
      'input',
      'input',
      'input',
      'input',
      'boolean',
      'unix_time',
      'string',
    ]);
    expect(layout.place(['1', 'u', '', '9', 'mapped', ''], ['true', '5', ''])).toEqual([
      '1',
      'u',
      '',
      '9',
      'mapped',
      '',
      'true',
      '5',
      '',
    ]);
    const again = verdictLayout(layout.header, 'iso');
    expect(again.header).toEqual(layout.header);
    expect(again.types.slice(6)).toEqual(['boolean', 'iso_time', 'string']);
    expect(again.place(['1', 'u', '', '9', 'mapped', '', 'true', '5', ''], ['false', '', ''])).toEqual([
      '1',
      'u',
      '',
      '9',
      'mapped',
      '',
      'false',
      '',
      '',
    ]);
    expect(verdictLayout(['raw_uid', 'opted_out', 'opted_out_since', 'reason']).header).toEqual([
      'raw_uid',
      'opted_out',
      'opted_out_since',
      'reason',
    ]);
  });
});
