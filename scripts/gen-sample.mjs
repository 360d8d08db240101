#!/usr/bin/env node
// Writes samples/customers.csv: 3,000 realistic customer rows (seeded, so the file never changes unless this
// script does), with the test identities of docs/wire-protocol.md §7 at fixed places so that every status shows up
// when the sample is mapped against the local service.
//
//   node scripts/gen-sample.mjs [--out samples/customers.csv]
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { rowGenerator } from '../bench/gen-input.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const outFlag = process.argv.indexOf('--out');
const OUT = outFlag !== -1 ? process.argv[outFlag + 1] : join(ROOT, 'samples', 'customers.csv');
const ROWS = 3000;
const SEED = 20240501;

const sha = (s, enc) => createHash('sha256').update(s).digest(enc);

/** Row number (1-based) -> the row to put there instead of a generated one. */
const SPECIAL = new Map([
  [17, { email: 'optout@example.com', phone: '+00000000000', emailHash: '' }],
  [230, { email: 'refresh-optout@example.com', phone: '+00000000002', emailHash: '' }],
  [555, { email: 'validate@example.com', phone: '+12345678901', emailHash: '' }],
  [1024, { email: '', phone: '', emailHash: sha('optout@example.com', 'base64') }],
  [1500, { email: ' Optout@Example.com ', phone: '', emailHash: '' }],
  [2048, { email: '', phone: '', emailHash: sha('validate@example.com', 'hex') }],
  [2999, { email: 'VALIDATE@example.com', phone: '+00000000000', emailHash: '' }],
]);

const cell = (v) => (/[",\n\r]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v);
const next = rowGenerator(SEED);
const lines = ['id,email,phone,email_hash,signup_date'];
for (let i = 1; i <= ROWS; i++) {
  const generated = next();
  const r = { ...generated, ...SPECIAL.get(i) };
  lines.push([`C${String(i).padStart(5, '0')}`, cell(r.email), cell(r.phone), r.emailHash, r.signupDate].join(','));
}
writeFileSync(OUT, `${lines.join('\n')}\n`);
console.error(`gen-sample: ${ROWS} rows (seed ${SEED}) to ${OUT}`);
