/** Instants as people and the API write them: ISO 8601 (zone-less means UTC) or Unix seconds. */
const HAS_ZONE = /(?:[zZ]|[+-]\d{2}(?::?\d{2})?)$/;
const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;
const ISO_LIKE = /^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:[zZ]|[+-]\d{2}(?::?\d{2})?)?)?$/;

/**
 * An instant given by a person: ISO 8601 (a zone-less date-time is UTC, like the API's own timestamps) or Unix
 * seconds as digits. Null when it is neither.
 */
export function parseInstantMs(text: string): number | null {
  const value = text.trim();
  if (/^\d{1,11}(?:\.\d{1,3})?$/.test(value)) return Math.round(Number(value) * 1000);
  if (!ISO_LIKE.test(value)) return null;
  const normalized = DATE_ONLY.test(value) || HAS_ZONE.test(value) ? value : `${value}Z`;
  const ms = Date.parse(normalized.replace(' ', 'T'));
  return Number.isFinite(ms) ? ms : null;
}
