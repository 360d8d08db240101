import { seeded } from './seeded-random.js';

const quote = (s: string): string => `"${s.replace(/"/g, '""')}"`;

/**
 * A CSV (header id,email,phone,email_hash,note) with what makes CSV hard: quoted cells holding "", the
 * delimiter and line breaks of every kind; line ends mixed per line; empty lines (a leading one too); short and
 * long rows and trailing delimiters; emails with capitals, gmail dots and +tags; invalid emails and phones;
 * hex and base64 hashes; quotes inside unquoted values (O"Brien) and after a closed quoted value ("ab"cd).
 */
export function trickyCsv(rows: number, seed: number, delimiter = ','): string {
  const rnd = seeded(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
  const hex = (n: number): string =>
    Array.from({ length: n }, () => '0123456789abcdef'[Math.floor(rnd() * 16)]).join('');
  const bytes32 = (): Buffer => Buffer.from(Array.from({ length: 32 }, () => Math.floor(rnd() * 256)));
  const breaks = ['\n', '\r\n', '\r'];
  const email = (i: number): string =>
    pick([
      `User.${i}@Example.COM`,
      `first.last.${i % 40}+tag${i}@gmail.com`,
      `F.I.R.S.T${i % 30}@GoogleMail.com`,
      ` spaced${i}@example.org `,
      `no-at-${i}`,
      `a${i}@b`,
      '',
      `"x${delimiter}y"@example.com`,
      `user${i % 25}@example.com`,
    ]);
  const phone = (i: number): string =>
    pick([
      `+1415555${String(i % 10000).padStart(4, '0')}`,
      '415-555-0100',
      '+1',
      '',
      `+44207946${String(i % 1000).padStart(4, '0')}`,
    ]);
  const emailHash = (): string =>
    pick([hex(64), hex(64).toUpperCase(), bytes32().toString('base64'), 'zzz', '', hex(63)]);
  const note = (i: number): string =>
    pick([
      `plain ${i}`,
      '',
      quote(`say "hi"${delimiter} ${i}`),
      quote(`two${pick(breaks)}lines${pick(breaks)}or three`),
      `O"Brien ${i}`,
      `"ab"cd${i}`,
      quote(''),
      quote(`${pick(breaks)}`),
      'é😀ü',
    ]);
  const field = (s: string): string => (s.includes(delimiter) || s.includes('"') || /[\r\n]/.test(s) ? quote(s) : s);
  let text = rnd() < 0.5 ? pick(breaks) : '';
  text += `${['id', 'email', 'phone', 'email_hash', 'note'].join(delimiter)}\n`;
  for (let i = 0; i < rows; i++) {
    let cells = [String(i), field(email(i)), field(phone(i)), emailHash(), note(i)];
    const shape = rnd();
    if (shape < 0.04) cells = cells.slice(0, 2 + Math.floor(rnd() * 3));
    else if (shape < 0.07) cells.push(`extra${i}`);
    else if (shape < 0.1) cells.push('');
    text += cells.join(delimiter) + pick(breaks);
    if (rnd() < 0.06) text += pick(breaks).repeat(1 + Math.floor(rnd() * 2));
  }
  return text;
}

/**
 * The same table of values written two ways: every field quoted (as warehouse unloads write them), or only the
 * fields that must be. Values hold quotes, the delimiter and line breaks of every kind, next to ordinary
 * emails, phones and hashes; line ends are mixed, some rows are ragged. Both texts read back as the same cells.
 */
export function sameTableTwoWays(rows: number, seed: number, delimiter = ','): { allQuoted: string; minimal: string } {
  const rnd = seeded(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
  const hex = (n: number): string =>
    Array.from({ length: n }, () => '0123456789abcdef'[Math.floor(rnd() * 16)]).join('');
  const breaks = ['\n', '\r\n', '\r'];
  const values = (i: number): string[] => [
    `C${i}`,
    pick([
      `User.${i}@Example.COM`,
      ` spaced${i}@example.org `,
      `no-at-${i}`,
      '',
      `"x${delimiter}y"@example.com`,
      `user${i % 25}@example.com`,
    ]),
    pick([`+1415555${String(i % 10000).padStart(4, '0')}`, '415-555-0100', '', '007', '02134']),
    pick([hex(64), hex(64).toUpperCase(), '', 'zzz']),
    pick([`plain ${i}`, '', `say "hi"${delimiter} ${i}`, `two${pick(breaks)}lines`, `O"Brien ${i}`, '"', 'é😀ü']),
  ];
  const minimalField = (v: string): string =>
    v.includes(delimiter) || v.includes('"') || /[\r\n]/.test(v) ? quote(v) : v;
  const header = ['id', 'email', 'phone', 'email_hash', 'note'];
  let allQuoted = `${header.map(quote).join(delimiter)}\n`;
  let minimal = `${header.join(delimiter)}\n`;
  for (let i = 0; i < rows; i++) {
    let cells = values(i);
    const shape = rnd();
    if (shape < 0.04) cells = cells.slice(0, 2 + Math.floor(rnd() * 3));
    else if (shape < 0.07) cells.push(`extra${i}`);
    const end = pick(breaks);
    allQuoted += cells.map(quote).join(delimiter) + end;
    minimal += cells.map(minimalField).join(delimiter) + end;
  }
  return { allQuoted, minimal };
}
