import { clientError, success, type ApiAnswer, type HandlerContext } from './answer.js';

/**
 * POST /v2/identity/buckets (docs/wire-protocol.md §5.5): every bucket whose last rotation is at or after
 * since_timestamp, a zone-less ISO local date-time read as UTC (java.time ISO_LOCAL_DATE_TIME: seconds optional,
 * up to 9 fraction digits, no zone, no integers). The answer is a bare array.
 */

const MISSING = 'missing parameter since_timestamp';
const INVALID_DATE = 'invalid date, must conform to ISO 8601';

const ISO_LOCAL_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$/;

export function handleBuckets(request: Record<string, unknown> | null, ctx: HandlerContext): ApiAnswer {
  const value = request === null ? undefined : request.since_timestamp;
  if (value === undefined || value === null) return clientError(MISSING);
  const sinceMs = typeof value === 'string' ? parseIsoLocalDateTimeMs(value) : null;
  if (sinceMs === null) return clientError(INVALID_DATE);
  const { engine, at } = ctx;
  const buckets = engine.buckets;
  const items: string[] = [];
  let dayText = '';
  let dayOfText = Number.NaN;
  buckets.forEachRotatedSince(sinceMs, at.nowMs, (bucket, day) => {
    if (day !== dayOfText) {
      dayOfText = day;
      dayText = formatApiDateTime(day * 86_400_000);
    }
    items.push(`{"bucket_id":"${buckets.bucketId(bucket)}","last_updated":"${dayText}"}`);
  });
  return success(`[${items.join(',')}]`);
}

/**
 * Unix ms of an ISO local date-time taken as UTC, rounded up to the next whole ms (a bucket time, always whole
 * ms, is at or after it exactly when it is at or after the rounded value). Null when java.time would refuse it.
 */
export function parseIsoLocalDateTimeMs(text: string): number | null {
  const m = ISO_LOCAL_DATE_TIME.exec(text);
  if (m === null) return null;
  const [year, month, day, hour, minute] = [m[1], m[2], m[3], m[4], m[5]].map(Number) as [
    number,
    number,
    number,
    number,
    number,
  ];
  const second = m[6] === undefined ? 0 : Number(m[6]);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return null;
  if (hour > 23 || minute > 59 || second > 59) return null;
  const fraction = m[7] ?? '';
  const nanos = Number(fraction.padEnd(9, '0'));
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, 0);
  return date.getTime() + Math.ceil(nanos / 1e6);
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** yyyy-MM-ddTHH:mm:ss.SSS, UTC, no zone suffix: the API's last_updated format. */
export function formatApiDateTime(ms: number): string {
  return new Date(ms).toISOString().slice(0, 23);
}
