// The entries the state benches commit and look up, made in one place so that the file's figures
// (bench/state.mjs) and the database's (bench/state-postgres.mjs) are of the same data.
import { hash } from 'node:crypto';

export const DAY = 86_400;
// a UTC midnight: the service floors r to one, so all entries of a day share r (the worst case for ties)
export const TODAY = Math.floor(Date.UTC(2026, 0, 15) / 1000);

/** A base64 SHA-256, as the hashes and raw UIDs of real entries look. */
export const b64 = (s) => hash('sha256', s, 'base64');

/** MurmurHash3's finalizer: a bijection of 32-bit integers that spreads every input bit over the output. */
function mix(x) {
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return x ^ (x >>> 16);
}

const WORDS = new Int32Array(8);
const BYTES = Buffer.from(WORDS.buffer);

/**
 * 32 bytes as random-looking as a SHA-256's, in base64 like b64's, made for number i (below 2^32) of a stream: a
 * few multiplications instead of a hash call. The build phase makes two or three a row inside its timed part, and
 * SHA-256 there cost the bench about as much CPU as the store's own work. The first word is a bijection of i within a
 * stream, so no two numbers of one stream share a value; every other word depends on the stream too.
 */
export function pseudoB64(stream, i) {
  const salt = Math.imul(stream + 1, 0x9e3779b9);
  const first = mix(i ^ salt);
  WORDS[0] = first;
  for (let k = 1; k < 8; k++) WORDS[k] = mix(first + Math.imul(salt ^ k, 0x27d4eb2f));
  return BYTES.toString('base64');
}

// the streams of pseudoB64: an entry's hash, its raw UID, its previous raw UID, and a remap's new raw UID
const HASH = 0;
const RAW_UID = 1;
const PREVIOUS = 2;
const REMAPPED = 3;

/** Entry i's DII type: a third are phones. */
export const typeOf = (i) => (i % 3 === 0 ? 'phone' : 'email');

/** The key of stored entry i. */
export const storedKey = (i) => ({ type: typeOf(i), hash: pseudoB64(HASH, i) });

/** The first answer of entry i: mapped, one in 20 with a previous raw UID, refresh spread over a year. */
export function firstAnswer(i) {
  return {
    type: typeOf(i),
    hash: pseudoB64(HASH, i),
    outcome: {
      kind: 'mapped',
      u: pseudoB64(RAW_UID, i),
      p: i % 20 === 0 ? pseudoB64(PREVIOUS, i) : null,
      r: TODAY + (1 + (i % 365)) * DAY,
    },
  };
}

/** A remap's answer for entry i: a new raw UID, refreshed in 400 days. */
export function remapAnswer(i) {
  return {
    type: typeOf(i),
    hash: pseudoB64(HASH, i),
    outcome: { kind: 'mapped', u: pseudoB64(REMAPPED, i), p: null, r: TODAY + 400 * DAY },
  };
}
