#!/usr/bin/env node
// Seeded generator of realistic identifier rows, for benchmarks and for samples/customers.csv.
//
//   node bench/gen-input.mjs --rows 1000000 --seed 42 --out bench/data/1m.csv [--kind mixed|email|phone] [--quote all]
//
// The same seed always gives the same file. `mixed` (default) writes id,email,phone,email_hash,signup_date with
// every kind of messiness the mapper has to handle; `email` and `phone` write id plus that one column.
// `--quote all` writes the same rows with every field quoted, header included (as many warehouse unloads do).
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

/** mulberry32: tiny, fast, and the same sequence on every platform. */
export function seededRandom(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const FIRST = [
  'james',
  'mary',
  'john',
  'patricia',
  'robert',
  'jennifer',
  'michael',
  'linda',
  'william',
  'elizabeth',
  'david',
  'barbara',
  'aisha',
  'chen',
  'sofia',
  'mateo',
  'olga',
  'kenji',
  'fatima',
  'liam',
  'noor',
  'emma',
  'raj',
  'zoe',
];
const LAST = [
  'smith',
  'johnson',
  'williams',
  'brown',
  'jones',
  'garcia',
  'miller',
  'davis',
  'rodriguez',
  'martinez',
  'nguyen',
  'kim',
  'okafor',
  'muller',
  'rossi',
  'tanaka',
  'silva',
  'kowalski',
  'haddad',
  'obrien',
];
/** gmail.com for its dot/+tag rule; the rest are reserved example domains, so no real mailbox is named. */
const DOMAINS = [
  'gmail.com',
  'gmail.com',
  'gmail.com',
  'example.com',
  'example.org',
  'example.net',
  'mail.example.com',
  'corp.example.org',
];
/** Six years of days, made once: formatting a Date per row would cost more than the rest of the row. */
const DATES = Array.from({ length: 6 * 365 }, (_, d) =>
  new Date(Date.UTC(2019, 0, 1) + d * 86_400_000).toISOString().slice(0, 10),
);
const TAGS = ['news', 'shop', 'promo', 'work', '2024'];
const BAD_EMAILS = [
  'john.doe@',
  '@example.com',
  'jane at example.com',
  'a@b@example.com',
  'no-at-sign.example.com',
  'mary@',
  '+@gmail.com',
];
const BAD_PHONES = [
  '(555) 555-0100',
  '555-555-0123',
  '+1 415 555 0134',
  '4155550145',
  '+1-212-555-0156',
  '+44 7700 900123',
  '+123456789',
  '+1234567890123456',
];

/**
 * Returns `next()` giving one row object { email, phone, emailHash, signupDate } at a time. Probabilities are
 * per row; `pick` keeps them readable.
 */
export function rowGenerator(seed) {
  const random = seededRandom(seed);
  const int = (n) => Math.floor(random() * n);
  const pick = (xs) => xs[int(xs.length)];
  const chance = (p) => random() < p;
  const recent = [];

  function person() {
    const first = pick(FIRST);
    const last = pick(LAST);
    const n = int(10000);
    return { first, last, n };
  }

  function cleanEmail(p, domain) {
    const style = int(4);
    const local =
      style === 0
        ? `${p.first}.${p.last}${p.n}`
        : style === 1
          ? `${p.first}${p.last}${p.n}`
          : style === 2
            ? `${p.first}_${p.last}${p.n}`
            : `${p.first[0]}${p.last}${p.n}`;
    return `${local}@${domain}`;
  }

  /** What people type and systems store: mixed case, gmail dots and +tags, stray spaces. */
  function messyEmail(p) {
    const domain = pick(DOMAINS);
    let email = cleanEmail(p, domain);
    if (domain === 'gmail.com' && chance(0.3)) email = email.replace('@', `+${pick(TAGS)}@`);
    if (domain === 'gmail.com' && chance(0.2)) email = email.replace(/^([a-z]+)([a-z])/, '$1.$2');
    if (chance(0.25)) email = email.replace(/(^|[._])([a-z])/g, (_, sep, ch) => sep + ch.toUpperCase());
    if (chance(0.05)) email = email.toUpperCase();
    if (chance(0.04)) email = ` ${email}`;
    if (chance(0.04)) email = `${email}  `;
    return email;
  }

  /** Fictional ranges only: US 555-01xx, UK 07700 900xxx, AU 0491 570xxx. */
  function phone() {
    const r = int(10);
    if (r < 6) return `+1${pick(['212', '415', '312', '617', '206'])}55501${String(int(100)).padStart(2, '0')}`;
    if (r < 8) return `+447700900${String(int(1000)).padStart(3, '0')}`;
    return `+61491570${String(int(1000)).padStart(3, '0')}`;
  }

  function hashOf(email, hex) {
    const h = createHash('sha256')
      .update(email.trim().toLowerCase())
      .digest(hex ? 'hex' : 'base64');
    return hex && chance(0.5) ? h.toUpperCase() : h;
  }

  function signupDate() {
    return DATES[int(DATES.length)];
  }

  return function next() {
    let email = '';
    let ph = '';
    let emailHash = '';
    if (recent.length > 0 && chance(0.04)) {
      // the same customer again, sometimes typed differently
      const again = pick(recent);
      email = chance(0.5) ? again.email : again.email.toUpperCase().trim();
      ph = again.phone;
    } else {
      const p = person();
      const r = random();
      if (r < 0.04) email = pick(BAD_EMAILS);
      else if (r < 0.09) email = '';
      else email = messyEmail(p);
      if (chance(0.6)) ph = chance(0.1) ? pick(BAD_PHONES) : phone();
      if (chance(0.1)) {
        const other = cleanEmail(person(), pick(DOMAINS));
        emailHash = chance(0.03) ? hashOf(other, false).slice(0, 43) : hashOf(other, chance(0.3));
      }
      if (email !== '' && recent.length < 200 && chance(0.05)) recent.push({ email, phone: ph });
    }
    return { email, phone: ph, emailHash, signupDate: signupDate() };
  };
}

/** CSV cell: quoted only when it must be (the generator never makes quotes or newlines, but a comma could come). */
function minimalCell(v) {
  return /[",\n\r]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v;
}

/** CSV cell, always quoted. */
function quotedCell(v) {
  return `"${v.replace(/"/g, '""')}"`;
}

/** `quote`: 'minimal' (only what must be) or 'all' (every field, header included); the rows are the same. */
export async function writeRows({ rows, seed, out, kind = 'mixed', quote = 'minimal' }) {
  const next = rowGenerator(seed);
  const stream = createWriteStream(out);
  const all = quote === 'all';
  const cell = all ? quotedCell : minimalCell;
  const bare = all ? quotedCell : (v) => v;
  const names =
    kind === 'email'
      ? ['id', 'email']
      : kind === 'phone'
        ? ['id', 'phone']
        : ['id', 'email', 'phone', 'email_hash', 'signup_date'];
  stream.write(`${names.map(bare).join(',')}\n`);
  const width = String(rows).length;
  let buf = '';
  for (let i = 1; i <= rows; i++) {
    const r = next();
    const id = bare(`C${String(i).padStart(width, '0')}`);
    if (kind === 'email') buf += `${id},${cell(r.email)}\n`;
    else if (kind === 'phone') buf += `${id},${cell(r.phone)}\n`;
    else buf += `${id},${cell(r.email)},${cell(r.phone)},${bare(r.emailHash)},${bare(r.signupDate)}\n`;
    if (buf.length > 1 << 20) {
      if (!stream.write(buf)) await once(stream, 'drain');
      buf = '';
    }
  }
  stream.end(buf);
  await once(stream, 'finish');
}

function parseArgs(argv) {
  const args = { rows: 100_000, seed: 1, out: '', kind: 'mixed', quote: 'minimal' };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (flag === '--rows') args.rows = Number(value);
    else if (flag === '--seed') args.seed = Number(value);
    else if (flag === '--out') args.out = value;
    else if (flag === '--kind') args.kind = value;
    else if (flag === '--quote') args.quote = value;
    else throw new Error(`unknown flag ${flag}`);
  }
  if (!Number.isInteger(args.rows) || args.rows < 0) throw new Error('--rows must be a whole number');
  if (!Number.isInteger(args.seed)) throw new Error('--seed must be a whole number');
  if (!args.out) throw new Error('--out FILE is required');
  if (!['mixed', 'email', 'phone'].includes(args.kind)) throw new Error('--kind must be mixed, email or phone');
  if (!['minimal', 'all'].includes(args.quote)) throw new Error('--quote must be minimal or all');
  return args;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    const args = parseArgs(process.argv.slice(2));
    const started = performance.now();
    await writeRows(args);
    console.error(
      `gen-input: ${args.rows} rows (${args.kind}, quote ${args.quote}, seed ${args.seed}) to ${args.out} in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
  } catch (err) {
    console.error(
      `gen-input: ${err.message}\nusage: node bench/gen-input.mjs --rows N --seed S --out FILE [--kind mixed|email|phone] [--quote minimal|all]`,
    );
    process.exitCode = 2;
  }
}
