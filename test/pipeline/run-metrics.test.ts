import { describe, expect, it } from 'vitest';
import { escapeLabelValue, formatRunMetrics } from '../../src/pipeline/run/run-metrics.js';
import { makeSummary } from '../../src/pipeline/run/summary.js';
import { parsePrometheusText, sampleValue } from '../helpers/prometheus-text.js';

const END = { command: 'map', exitCode: 3, endedMs: 1_795_000_000_250, durationS: 9 };

describe('formatRunMetrics', () => {
  const summary = makeSummary({
    command: 'map',
    rows: 1200,
    status: { mapped: 1000, optout: 7, invalid: 150, error: 43 },
    unique_identifiers: 1100,
    from_state: 12,
    requests: 3,
    retries: 2,
    http_429: 1,
    startedMs: 0,
    endedMs: 4_500,
    extra: { batches_failed: 1, bytes_read: 65_536, changed: 5 },
  });

  it('writes the summary figures, strictly in the text format, with HELP and TYPE for each metric', () => {
    const file = parsePrometheusText(formatRunMetrics(summary, END));
    const command = { command: 'map' };
    expect(sampleValue(file, 'uid2_batch_rows_total', command)).toBe(1200);
    for (const [status, n] of Object.entries(summary.status))
      expect(sampleValue(file, 'uid2_batch_identifiers_total', { command: 'map', status })).toBe(n);
    expect(sampleValue(file, 'uid2_batch_unique_identifiers_total', command)).toBe(1100);
    expect(sampleValue(file, 'uid2_batch_from_state_total', command)).toBe(12);
    expect(sampleValue(file, 'uid2_batch_requests_total', command)).toBe(3);
    expect(sampleValue(file, 'uid2_batch_retries_total', command)).toBe(2);
    expect(sampleValue(file, 'uid2_batch_http_429_total', command)).toBe(1);
    expect(sampleValue(file, 'uid2_batch_failed_batches_total', command)).toBe(1);
    expect(sampleValue(file, 'uid2_batch_bytes_read_total', command)).toBe(65_536);
    expect(sampleValue(file, 'uid2_batch_changed_total', command)).toBe(5);
    expect(sampleValue(file, 'uid2_batch_run_duration_seconds', command)).toBe(4.5);
    expect(sampleValue(file, 'uid2_batch_exit_code', command)).toBe(3);
    expect(sampleValue(file, 'uid2_batch_last_run_timestamp_seconds', command)).toBe(1_795_000_000.25);
    for (const name of new Set(file.samples.map((s) => s.name))) {
      expect(file.types[name], name).toBe(name.endsWith('_total') ? 'counter' : 'gauge');
      expect(file.help[name], name).toBeTruthy();
    }
    // a figure the summary does not have is left out, not written as 0
    expect(sampleValue(file, 'uid2_batch_bytes_written_total', command)).toBeUndefined();
  });

  it("optout-check's raw UIDs that did not opt out are a status of their own", () => {
    const optout = makeSummary({
      command: 'optout-check',
      rows: 9,
      status: { optout: 2, invalid: 1 },
      startedMs: 0,
      endedMs: 1,
      extra: { not_opted_out: 6 },
    });
    const file = parsePrometheusText(formatRunMetrics(optout, { ...END, command: 'optout-check' }));
    const status = (s: string) =>
      sampleValue(file, 'uid2_batch_identifiers_total', { command: 'optout-check', status: s });
    expect([status('optout'), status('not_opted_out'), status('invalid')]).toEqual([2, 6, 1]);
  });

  it('a run that made no summary: only its duration, exit code and end time', () => {
    const file = parsePrometheusText(formatRunMetrics(undefined, { ...END, command: 'remap-due', exitCode: 2 }));
    expect(new Set(file.samples.map((s) => s.name))).toEqual(
      new Set(['uid2_batch_run_duration_seconds', 'uid2_batch_exit_code', 'uid2_batch_last_run_timestamp_seconds']),
    );
    expect(sampleValue(file, 'uid2_batch_exit_code', { command: 'remap-due' })).toBe(2);
    expect(sampleValue(file, 'uid2_batch_run_duration_seconds', { command: 'remap-due' })).toBe(9);
  });

  it('escapes label values by the format: backslash, double quote, line feed', () => {
    const odd = 'a\\b"c\nd';
    expect(escapeLabelValue(odd)).toBe('a\\\\b\\"c\\nd');
    const file = parsePrometheusText(formatRunMetrics(undefined, { ...END, command: odd }));
    expect(sampleValue(file, 'uid2_batch_exit_code', { command: odd })).toBe(3);
  });
});

describe('the strict reader the tests use', () => {
  it('refuses what the format does not allow', () => {
    const good = '# HELP m_total x\n# TYPE m_total counter\nm_total{a="b"} 1\n';
    expect(() => parsePrometheusText(good)).not.toThrow();
    expect(() => parsePrometheusText(good.slice(0, -1))).toThrow(/line feed/);
    expect(() => parsePrometheusText('m_total{a="b\\x"} 1\n')).toThrow(/escape/);
    expect(() => parsePrometheusText('m_total{a="b} 1\n')).toThrow(/unterminated/);
    expect(() => parsePrometheusText('m_total{a="b"} one\n')).toThrow(/bad value/);
    expect(() => parsePrometheusText('m_total 1\n# TYPE m_total counter\n')).toThrow(/after its samples/);
    expect(() => parsePrometheusText('m 1\nn 1\nm 2\n')).toThrow(/not together/);
    expect(() => parsePrometheusText('1m 1\n')).toThrow(/metric name/);
    expect(() => parsePrometheusText('m 1\nm 2\n')).toThrow(/twice/);
  });
});
