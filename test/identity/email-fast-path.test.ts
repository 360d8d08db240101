import { describe, expect, it } from 'vitest';
import { normalizeEmail } from '../../src/identity/index.js';

/**
 * The operator's walk, character by character (InputUtil.normalizeEmailString), kept here as the model that
 * normalizeEmail's printable-ASCII fast path must agree with on every input.
 */
function operatorModel(input: string): string | null {
  let local = '';
  let gmailLocal = '';
  let domain = '';
  let pendingSpaces = '';
  let inDomain = false;
  let inExtension = false;
  for (const ch of input.split('')) {
    const c = ch >= 'A' && ch <= 'Z' ? ch.toLowerCase() : ch;
    if (!inDomain) {
      if (c === ' ') continue;
      if (c === '@') inDomain = true;
      else {
        local += c;
        if (c === '+') inExtension = true;
        else if (c !== '.' && !inExtension) gmailLocal += c;
      }
      continue;
    }
    if (c === '@') return null;
    if (c === ' ') {
      pendingSpaces += ' ';
      continue;
    }
    domain += pendingSpaces + c;
    pendingSpaces = '';
  }
  if (domain.length === 0) return null;
  const use = domain === 'gmail.com' ? gmailLocal : local;
  return use.length === 0 ? null : `${use}@${domain}`;
}

/** Seeded, so a failure names an input that can be replayed. */
function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), s | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PIECES = [
  'a',
  'B',
  'z',
  'Z',
  '0',
  '.',
  '+',
  '@',
  ' ',
  '  ',
  '\t',
  '\u00a0',
  'É',
  'é',
  '_',
  '-',
  'gmail.com',
  'GMAIL.COM',
  'Gmail.com ',
  'example.org',
  '@gmail.com',
  'x@',
  '\u{1F600}',
];

describe('normalizeEmail fast path', () => {
  it('agrees with the operator model on 20,000 random inputs built from the tricky pieces', () => {
    const random = seeded(8);
    const mismatches: string[] = [];
    for (let n = 0; n < 20_000; n++) {
      let s = '';
      const parts = 1 + Math.floor(random() * 8);
      for (let i = 0; i < parts; i++) s += PIECES[Math.floor(random() * PIECES.length)];
      if (normalizeEmail(s) !== operatorModel(s)) mismatches.push(JSON.stringify(s));
    }
    expect(mismatches.slice(0, 5)).toEqual([]);
  });

  it.each([
    ['  John.Doe+News@Gmail.com  ', 'johndoe@gmail.com'],
    ['Jane.Doe+x@Example.org', 'jane.doe+x@example.org'],
    ['a@gmail.com.', 'a@gmail.com.'],
    ['.+x@gmail.com', null],
    ['a@b@c', null],
    ['abc@', null],
    ['@example.org', null],
    ['  ', null],
    ['a b@example.org', 'ab@example.org'],
    ['a@exa mple.org ', 'a@exa mple.org'],
    ['a\t@example.org', 'a\t@example.org'],
    ['ÄB@example.org', 'Äb@example.org'],
  ])('%j -> %j', (input, expected) => {
    expect(normalizeEmail(input)).toBe(expected);
    expect(operatorModel(input)).toBe(expected);
  });
});
