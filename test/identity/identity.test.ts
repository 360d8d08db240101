import { describe, expect, it } from 'vitest';
import {
  detectKind,
  isNormalizedPhone,
  normalizeEmail,
  normalizeHash,
  prepareAuto,
  prepareIdentifier,
  sha256Base64,
} from '../../src/identity/index.js';

// docs/wire-protocol.md §6.4, and the rest of the published set.
const EMAIL_VECTORS: Array<[string, string, string]> = [
  ['USER@example.com', 'user@example.com', 'tMmiiTI7IaAcPpQPFQ65uMVCWH8av9jw4cwf/F5HVRQ='],
  ['MyEmail@example.com', 'myemail@example.com', 'FsGNM28LJQ8OLZB0Us65ZYp07NrovJSGTCMSKnLMJ6U='],
  ['My.Email@example.com', 'my.email@example.com', '4itTvG+HEnTzpiqzejyu1yFPwU1nYhWpaiQvz62hyB8='],
  ['JaneSaoirse+Work@example.com', 'janesaoirse+work@example.com', 'KKruSBUjDNO069iMUVImVQZm6RrAGZKeOtrD9mwogYA='],
  ['Jane.Saoirse@gmail.com', 'janesaoirse@gmail.com', 'ku4mBX7Z3qJTXWyLFB1INzkyR2WZGW4ANSJUiW21iI8='],
  ['JaneSaoirse+Work@gmail.com', 'janesaoirse@gmail.com', 'ku4mBX7Z3qJTXWyLFB1INzkyR2WZGW4ANSJUiW21iI8='],
  ['TEst.TEST@Test.com ', 'test.test@test.com', 'dvECjPKZHya0/SIhSGwP0m8SgTv1vzLxPULUOsm880M='],
  ['TEst.TEst+123@GMail.Com', 'testtest@gmail.com', 'LkLfFrut8Tc3h/fIvYDiBKSbaMiau/DtaLBPQYszdMw='],
  ['test+test@gmail.com', 'test@gmail.com', 'h5JGBrQTGorO7q6IaFMfu5cSqqB6XTp1aybOD11spnQ='],
  ['+test@test.com', '+test@test.com', 'weFizOVVWKlLfyorbBU8oxYDv4HJtTZCPMyZ4THzUQE='],
  ['  testtest@test.com  ', 'testtest@test.com', 'd1Lr/s4GLLX3SvQVMoQdIMfbQPMAGZYry+2V+0pZlQg='],
  ['😊testtest@test.com', '😊testtest@test.com', 'fAFEUqApQ0V/M9mLj/IO54CgKgtQuARKsOMqtFklD4k='],
  ['foo@bar.com', 'foo@bar.com', 'DH5qQFhi5ALrdqcPiib8cy0Hwykx6frpqxWCkR0uijs='],
  ['user2@example.com', 'user2@example.com', 'KzsrnOhCq4tqbGFMsflgS7ig1QLRr0nFJrcrEIlOlbU='],
];

describe('email normalization (operator-exact)', () => {
  it.each(EMAIL_VECTORS)('%s -> %s -> %s', (input, normalized, b64) => {
    expect(normalizeEmail(input)).toBe(normalized);
    expect(sha256Base64(normalized)).toBe(b64);
    expect(prepareIdentifier('email', input)).toEqual({ ok: true, type: 'email', hash: b64 });
  });

  it('the un-normalized gmail hash of the docs is what you get without normalizing', () => {
    expect(sha256Base64('JANESaoirse@gmail.com')).toBe('VpLXEp5N1bj/V1WzjgZsC+FfuYdntAOywSVIO00FD/E=');
    expect(prepareIdentifier('email', 'JANESaoirse@gmail.com')).not.toEqual({
      ok: true,
      type: 'email',
      hash: 'VpLXEp5N1bj/V1WzjgZsC+FfuYdntAOywSVIO00FD/E=',
    });
  });

  it.each(['', ' @', '@', 'a@', '@b', '@b.com', '+', ' ', '+@gmail.com', '.+@gmail.com', 'a@ba@z.com'])(
    'operator invalid example %j',
    (input) => {
      expect(normalizeEmail(input)).toBeNull();
      expect(prepareIdentifier('email', input).ok).toBe(false);
    },
  );

  it('keeps the quirks: ASCII-only lowercasing, spaces dropped in the local part, tabs kept, inner domain spaces kept', () => {
    expect(normalizeEmail('ÉLODIE@Example.com')).toBe('Élodie@example.com');
    expect(normalizeEmail('jane doe@example.com')).toBe('janedoe@example.com');
    expect(normalizeEmail('user@example.com\t')).toBe('user@example.com\t');
    expect(normalizeEmail('user@exa mple.com  ')).toBe('user@exa mple.com');
    expect(normalizeEmail('jane.doe@googlemail.com')).toBe('jane.doe@googlemail.com');
    expect(normalizeEmail('j.a.n.e+x.y@gmail.com')).toBe('jane@gmail.com');
    expect(normalizeEmail('j.a+x@example.com')).toBe('j.a+x@example.com');
  });
});

describe('phone check (no normalization)', () => {
  it.each(['+1234567890', '+12345678901', '+123456789012345', '+441234567890'])('valid %s', (p) => {
    expect(isNormalizedPhone(p)).toBe(true);
  });
  it.each([
    '+123456789',
    '+1234567890123456',
    '+1234567890 ',
    '+12345+67890',
    '555-555-5555',
    '(555) 555-5555',
    '1234567890',
    '',
    '+',
    '+١٢٣٤٥٦٧٨٩٠',
  ])('invalid %j', (p) => {
    expect(isNormalizedPhone(p)).toBe(false);
    expect(prepareIdentifier('phone', p).ok).toBe(false);
  });
  it('hashes the phone verbatim', () => {
    expect(prepareIdentifier('phone', '+12345678901')).toEqual({
      ok: true,
      type: 'phone',
      hash: 'EObwtHBUqDNZR33LNSMdtt5cafsYFuGmuY4ZLenlue4=',
    });
    expect(prepareIdentifier('phone', '+441234567890')).toEqual({
      ok: true,
      type: 'phone',
      hash: 'Rx8SW4ZyKqbPypXmswDNuq0SPxStFXBTG/yvPns/2NQ=',
    });
  });
  it('the docs phone vector needs the user to normalize it first', () => {
    expect(prepareIdentifier('phone', '1 (234) 567-8901').ok).toBe(false);
  });
});

describe('hash validation', () => {
  const b64 = 'DH5qQFhi5ALrdqcPiib8cy0Hwykx6frpqxWCkR0uijs=';
  const hex = Buffer.from(b64, 'base64').toString('hex');
  it('accepts 44-char base64 and converts 64-char hex, any case', () => {
    expect(normalizeHash(b64)).toBe(b64);
    expect(normalizeHash(hex)).toBe(b64);
    expect(normalizeHash(hex.toUpperCase())).toBe(b64);
    expect(prepareIdentifier('phone_hash', hex)).toEqual({ ok: true, type: 'phone', hash: b64 });
  });
  it('accepts 44 chars decoding to 31 or 33 bytes, as the operator does', () => {
    expect(normalizeHash(`${'A'.repeat(42)}==`)).not.toBeNull();
    expect(normalizeHash('A'.repeat(44))).not.toBeNull();
  });
  it.each([
    ['43 chars (no padding)', b64.slice(0, 43)],
    ['45 chars', `${b64}A`],
    ['63 hex', hex.slice(0, 63)],
    ['65 hex', `${hex}a`],
    ['66 hex', `${hex}ab`],
    ['url-safe alphabet', `${b64.replace(/\+|\//g, '-').replace('=', '').padEnd(43, '_')}_`],
    ['padding in the middle', `AAAA=AAA${'A'.repeat(36)}`],
    ['non-hex 64', 'g'.repeat(64)],
  ])('rejects %s', (_label, value) => {
    expect(normalizeHash(value)).toBeNull();
    expect(prepareIdentifier('email_hash', value).ok).toBe(false);
  });
});

describe('kind detection', () => {
  it('detects each kind from the cell', () => {
    expect(detectKind('a@b.com')).toBe('email');
    expect(detectKind('+12345678901')).toBe('phone');
    expect(detectKind('tMmiiTI7IaAcPpQPFQ65uMVCWH8av9jw4cwf/F5HVRQ=')).toBe('hash');
    expect(detectKind('b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514')).toBe('hash');
    expect(detectKind('hello')).toBeNull();
  });
  it('refuses to guess what a bare hash stands for', () => {
    const h = 'tMmiiTI7IaAcPpQPFQ65uMVCWH8av9jw4cwf/F5HVRQ=';
    expect(prepareAuto(h, undefined).ok).toBe(false);
    expect(prepareAuto(h, 'phone')).toEqual({ ok: true, type: 'phone', hash: h });
    expect(prepareAuto('USER@example.com', undefined)).toEqual({ ok: true, type: 'email', hash: h });
  });
  it('never puts the value into a reason', () => {
    const r = prepareIdentifier('email', 'secret-person@');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).not.toContain('secret-person');
  });
});
