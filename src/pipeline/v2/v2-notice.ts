/**
 * The deprecation notice of the v2 identity endpoints (docs/wire-protocol.md §5.4-5.5: /v2/identity/map and
 * /v2/identity/buckets are deprecated on 2026-09-30). Said once per run of a command that sends them.
 */

export const V2_DEPRECATION_DATE = '2026-09-30';
const V2_DEPRECATION_MS = Date.UTC(2026, 8, 30);

/** One stderr line: what is deprecated, when, and the v3 command to use instead. */
export function v2DeprecationWarning(endpoint: string, instead: string, nowMs: number): string {
  const when =
    nowMs >= V2_DEPRECATION_MS
      ? `its deprecation date, ${V2_DEPRECATION_DATE}, has passed and the service may refuse it`
      : `it is deprecated on ${V2_DEPRECATION_DATE}`;
  return `uid2-batch: warning: ${endpoint} is the v2 API: ${when}; ${instead}\n`;
}
