import type { DiiType } from '../../identity/index.js';

// HyperLogLog with 2^14 registers: 16 KB per DII type, standard error about 0.8%.
const P = 14;
const M = 1 << P;

const B64 = new Int8Array(128).fill(-1);
'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'.split('').forEach((c, i) => {
  B64[c.charCodeAt(0)] = i;
});

/**
 * Estimates how many distinct (DII type, hash) pairs a run saw, in fixed memory: the engine counts exactly as
 * long as it remembers every identifier, and falls back to this estimate on inputs too large for that. The
 * hashes are base64 SHA-256 values, so their first characters are already uniformly random bits: no second
 * hash is needed.
 */
export class DistinctEstimate {
  private readonly registers: [Uint8Array, Uint8Array] = [new Uint8Array(M), new Uint8Array(M)];

  /** Observes a hash given as its text's bytes, from byte `at` of `hashes` (PreparedRows.hashes). */
  add(type: DiiType, hashes: Uint8Array, at: number): void {
    this.observe(this.registers[type === 'email' ? 0 : 1], hashes, at);
  }

  get count(): number {
    return Math.round(estimate(this.registers[0]) + estimate(this.registers[1]));
  }

  private observe(registers: Uint8Array, hash: Uint8Array, at: number): void {
    // 48 bits from 8 base64 characters: 14 pick the register, the other 34 give the rank
    const c2 = sextet(hash, at + 2);
    const index = (sextet(hash, at) << 8) | (sextet(hash, at + 1) << 2) | (c2 >> 4);
    const high = c2 & 15;
    const low =
      (sextet(hash, at + 3) << 24) |
      (sextet(hash, at + 4) << 18) |
      (sextet(hash, at + 5) << 12) |
      (sextet(hash, at + 6) << 6) |
      sextet(hash, at + 7);
    let rank: number;
    if (high !== 0) rank = Math.clz32(high) - 28 + 1;
    else if (low !== 0) rank = 4 + (Math.clz32(low) - 2) + 1;
    else rank = 35;
    if (rank > registers[index]) registers[index] = rank;
  }
}

function sextet(hash: Uint8Array, i: number): number {
  const v = B64[hash[i] & 127];
  return Math.max(v, 0);
}

function estimate(registers: Uint8Array): number {
  let sum = 0;
  let zeros = 0;
  for (let i = 0; i < M; i++) {
    sum += 2 ** -registers[i];
    if (registers[i] === 0) zeros++;
  }
  if (zeros === M) return 0;
  const alpha = 0.7213 / (1 + 1.079 / M);
  const raw = (alpha * M * M) / sum;
  return raw <= 2.5 * M && zeros > 0 ? M * Math.log(M / zeros) : raw;
}
