#!/usr/bin/env node
// Cost of phone normalization per number: E.164 cells as the service takes them (no region) against
// national-format cells read with --phone-region US, all valid and with a tenth invalid (the refusal path). Runs the
// built library (npm run build first).
// Not a test: the figures depend on the machine; compare the rates of one run, side by side.
//
//   node bench/phones.mjs [--count 1000000] [--runs 3]
import { parsePhoneRegion, prepareIdentifier } from '../dist/identity/index.js';
import { seededRandom } from './gen-input.mjs';
import { numberOption } from './args.mjs';

const COUNT = numberOption('--count', 1_000_000);
const RUNS = numberOption('--runs', 3);

// Area codes in service, so the national cells are valid numbers and the run measures the accepting path.
const AREAS = [
  '201',
  '202',
  '212',
  '213',
  '305',
  '310',
  '312',
  '404',
  '415',
  '512',
  '602',
  '617',
  '646',
  '702',
  '713',
  '718',
  '773',
  '818',
  '917',
  '971',
];
const WRITINGS = [
  (a, x, l) => `(${a}) ${x}-${l}`,
  (a, x, l) => `${a}-${x}-${l}`,
  (a, x, l) => `${a}.${x}.${l}`,
  (a, x, l) => `${a}${x}${l}`,
  (a, x, l) => `+1 ${a} ${x} ${l}`,
  (a, x, l) => `1-${a}-${x}-${l}`,
];

function makeCells() {
  const random = seededRandom(20261123);
  const national = new Array(COUNT);
  const e164 = new Array(COUNT);
  const mixed = new Array(COUNT);
  for (let i = 0; i < COUNT; i++) {
    const area = AREAS[Math.floor(random() * AREAS.length)];
    const exchange = String(200 + Math.floor(random() * 800));
    const line = String(Math.floor(random() * 10_000)).padStart(4, '0');
    national[i] = WRITINGS[i % WRITINGS.length](area, exchange, line);
    e164[i] = `+1${area}${exchange}${line}`;
    // one cell in ten refused, as in a real export: a length the plan has but digits it does not (an area code
    // or exchange that starts with 0 or 1), or a digit too few
    const bad = i % 30;
    mixed[i] =
      bad === 0
        ? `(${area}) 1${exchange.slice(1)}-${line}`
        : bad === 10
          ? `(0${area.slice(1)}) ${exchange}-${line}`
          : bad === 20
            ? `${area}-${exchange}-${line.slice(1)}`
            : national[i];
  }
  return { national, e164, mixed };
}

function run(cells, options) {
  let accepted = 0;
  const start = process.hrtime.bigint();
  for (const cell of cells) if (prepareIdentifier('phone', cell, options).ok) accepted++;
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  return { rate: cells.length / seconds, accepted };
}

const { national, e164, mixed } = makeCells();
const us = { phoneRegion: parsePhoneRegion('US') };
const cases = [
  ['E.164 cells, no region (today)', e164, undefined],
  ['E.164 cells, --phone-region US', e164, us],
  ['national cells, --phone-region US', national, us],
  ['national, a tenth invalid, region US', mixed, us],
];
const rates = cases.map(() => []);
const accepted = cases.map(() => 0);
// interleaved, so a burst of load on a shared machine falls on every case alike
for (let r = 0; r < RUNS; r++) {
  cases.forEach(([, cells, options], k) => {
    const got = run(cells, options);
    rates[k].push(got.rate);
    accepted[k] = got.accepted;
  });
}
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const base = median(rates[0]);
console.log(
  `phones: ${COUNT.toLocaleString('en-US')} cells per case, median of ${RUNS} interleaved runs (prepare: normalize + SHA-256)`,
);
cases.forEach(([name], k) => {
  const m = median(rates[k]);
  console.log(
    `  ${name.padEnd(36)} ${Math.round(m).toLocaleString('en-US').padStart(10)} numbers/s  ${(m / base).toFixed(2)}x  accepted ${accepted[k].toLocaleString('en-US')}`,
  );
});
