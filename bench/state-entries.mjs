// The entries the state benches commit and look up, made in one place so that the file's figures
// (bench/state.mjs) and the database's (bench/state-postgres.mjs) are of the same data.
import { hash } from 'node:crypto';

export const DAY = 86_400;
// a UTC midnight: the service floors r to one, so all entries of a day share r (the worst case for ties)
export const TODAY = Math.floor(Date.UTC(2026, 0, 15) / 1000);

/** A base64 SHA-256, as the hashes and raw UIDs of real entries look. */
export const b64 = (s) => hash('sha256', s, 'base64');

/** Entry i's DII type: a third are phones. */
export const typeOf = (i) => (i % 3 === 0 ? 'phone' : 'email');

/** The key of stored entry i. */
export const storedKey = (i) => ({ type: typeOf(i), hash: b64(`identifier-${i}`) });

/** The first answer of entry i: mapped, one in 20 with a previous raw UID, refresh spread over a year. */
export function firstAnswer(i) {
  return {
    ...storedKey(i),
    outcome: {
      kind: 'mapped',
      u: b64(`raw-${i}`),
      p: i % 20 === 0 ? b64(`prev-${i}`) : null,
      r: TODAY + (1 + (i % 365)) * DAY,
    },
  };
}
