import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { openState } from '../../src/state/index.js';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import {
  advanceDays,
  buildState,
  loopbackFingerprint,
  readEntries,
  runCli,
  serviceStats,
  startServe,
  type Served,
  type StoredKey,
} from '../helpers/remap-e2e.js';
import Database from '../helpers/sqlite-driver.js';

const emails = Array.from({ length: 800 }, (_, i) => `damaged${i}@example.com`);
const keys: StoredKey[] = emails.map((e) => ({ type: 'email', hash: sha256Base64(e) }));

let dir: string;
let served: Served;
let statePath: string;

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'uid2-damaged-e2e-'));
  served = await startServe();
  statePath = join(dir, 'state.db');
  await buildState(statePath, served, keys);
  // one more commit through a store with a short tail merges the entries into key blocks, as a big file has them
  const store = openState(statePath, { envFingerprint: loopbackFingerprint(served), tailEntries: 100 });
  store.commitBatch([{ type: 'email', hash: sha256Base64('extra@example.com'), outcome: { kind: 'invalid' } }], 1);
  store.close();
}, 120_000);

afterAll(async () => {
  await served?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A copy of the state with one byte flipped, in the file, inside each of these records or blocks. */
function damagedCopy(name: string, blobs: readonly Buffer[]): string {
  const bytes = readFileSync(statePath);
  for (const blob of blobs) {
    let flipped = 0;
    for (let at = bytes.indexOf(blob); at >= 0; at = bytes.indexOf(blob, at + 1)) {
      bytes[at + Math.floor(blob.length / 2)] ^= 0x5a;
      flipped++;
    }
    expect(flipped).toBeGreaterThan(0);
  }
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return path;
}

function keyBlocks(): Buffer[] {
  const db = new Database(statePath, { readonly: true });
  try {
    return db
      .prepare('SELECT keys FROM key_blocks UNION ALL SELECT keys FROM key_blocks_recent')
      .pluck()
      .all() as Buffer[];
  } finally {
    db.close();
  }
}

function recordsOf(ids: readonly number[]): Buffer[] {
  const db = new Database(statePath, { readonly: true });
  try {
    const get = db.prepare('SELECT record FROM entries WHERE id = ?').pluck();
    return ids.map((id) => get.get(id) as Buffer);
  } finally {
    db.close();
  }
}

const DAMAGED_LINE =
  /^uid2-batch: state file .*\.db is damaged \((an entry record|a key block) fails its checksum\); restore it from a backup, or save what is still readable with `uid2-batch state export .*` and map again with a new --state file$/m;

describe('a damaged state file (built CLI against serve)', () => {
  it('remap-due stops with exit 1 and one line, sends nothing and writes no changes file', async () => {
    const entries = readEntries(statePath, served, keys);
    const nowS = Math.floor((await advanceDays(served.url, 60)) / 1000);
    const due = [...entries.values()].filter((e) => e.r !== null && e.r <= nowS);
    expect(due.length).toBeGreaterThan(10);
    const path = damagedCopy('remap.db', recordsOf(due.slice(0, 3).map((e) => e.id)));
    const before = await serviceStats(served.url);
    const out = join(dir, 'changes.csv');
    const run = await runCli(['remap-due', '--state', path, '--now', String(nowS), '-o', out], { served });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toMatch(DAMAGED_LINE);
    expect(run.stderr).not.toMatch(/re-run|resume|\n\s+at /);
    expect(existsSync(out)).toBe(false);
    expect((await serviceStats(served.url)).items).toEqual(before.items);
  });

  it('map --state stops with exit 1 on a damaged record or key block it reads, and writes no output', async () => {
    const input = join(dir, 'in.csv');
    writeFileSync(input, `email\n${emails.join('\n')}\n`);
    const entries = readEntries(statePath, served, keys);
    const ids = [...entries.values()].slice(0, 5).map((e) => e.id);
    const blocks = keyBlocks();
    expect(blocks.length).toBeGreaterThan(0);
    for (const [name, blobs] of [
      ['map-record.db', recordsOf(ids)],
      ['map-block.db', blocks.slice(0, 1)],
    ] as const) {
      const path = damagedCopy(name, blobs);
      const out = join(dir, `${name}.csv`);
      const run = await runCli(['map', input, '--state', path, '-o', out], { served });
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toMatch(DAMAGED_LINE);
      expect(existsSync(out)).toBe(false);
    }
  });
});
