// optout-check --state --sweep-fraction over successive runs: id order from the saved cursor, once per cycle.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { openState } from '../../src/state/index.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import {
  buildState,
  loopbackFingerprint,
  optOut,
  readEntries,
  runCli,
  startServe,
  type Served,
  type StoredKey,
} from '../helpers/remap-e2e.js';

const N = 200;
const keys: StoredKey[] = Array.from({ length: N }, (_, i) => ({
  type: 'email' as const,
  hash: sha256Base64(`cycle${i}@example.com`),
}));

let dir: string;
let served: Served;
let statePath: string;
/** Entry id by hash. */
let idOf: Map<string, number>;

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'uid2-sweep-e2e-'));
  served = await startServe();
  statePath = join(dir, 'state.db');
  await buildState(statePath, served, keys);
  idOf = new Map([...readEntries(statePath, served, keys).values()].map((e) => [e.hash, e.id]));
}, 120_000);

afterAll(async () => {
  await served?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** One nightly run; the ids of the entries it checked, in the order written. */
async function nightly(n: number): Promise<number[]> {
  const out = join(dir, `night-${n}.csv`);
  const run = await runCli(['optout-check', '--state', statePath, '--sweep-fraction', '0.3', '-o', out, '-q'], {
    served,
  });
  expect(run.code, run.stderr).toBe(0);
  const rows = parse(readFileSync(out, 'utf8'), { columns: true }) as Record<string, string>[];
  const ids: number[] = [];
  for (const row of rows) {
    const id = idOf.get(row.hash);
    if (id === undefined) throw new Error(`an output row names no stored entry: ${row.hash}`);
    // u and p of one entry are two rows
    if (ids.at(-1) !== id) ids.push(id);
  }
  return ids;
}

function savedCursor(): string | null {
  const state = openState(statePath, { envFingerprint: loopbackFingerprint(served), readonly: true });
  try {
    return state.getMeta('sweep_after');
  } finally {
    state.close();
  }
}

describe('optout-check --state --sweep-fraction over successive nights', () => {
  it('checks every entry once per cycle in id order, from where the last night stopped, skipping tombstones', async () => {
    const all = [...idOf.values()].sort((a, b) => a - b);
    expect(all.length).toBe(N);
    expect(savedCursor()).toBeNull();

    const first = await nightly(1);
    expect(first).toEqual(all.slice(0, 60));
    expect(savedCursor()).toBe(String(all[59]));

    // an identity of the next night's range opts out: that night tombstones it, and later nights skip it
    const quitter = keys.find((k) => idOf.get(k.hash) === all[70]) as StoredKey;
    await optOut(served.url, { email_hash: quitter.hash });
    const order = [...first];
    for (let n = 2; n <= 4; n++) order.push(...(await nightly(n)));
    // 0.3 of 200 entries, then of the 199 left with a raw UID: 60 a night, the fourth night crosses the end
    expect(order.length).toBe(240);
    expect(order.slice(0, 200)).toEqual(all);
    const second = all.filter((id) => id !== all[70]).slice(0, 40);
    expect(order.slice(200)).toEqual(second);
    expect(savedCursor()).toBe(String(second.at(-1)));
    const stored = readEntries(statePath, served, [quitter]);
    expect(stored.get(`email:${quitter.hash}`)).toMatchObject({ status: 'optout', u: null });
  }, 120_000);
});
