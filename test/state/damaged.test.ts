import { afterAll, describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { StateDamagedError, type EntryUpdate } from '../../src/state/index.js';
import Database from '../helpers/sqlite-driver.js';
import { b64, tmpStates } from './tmp-state.js';
import { lookupHashes, lookupMany } from './lookups.js';

const t = tmpStates();
afterAll(() => t.cleanup());

const N = 3_000;
const hashOf = (i: number): string => b64(`damaged-hash-${i}`);
const uidOf = (i: number): string =>
  Buffer.concat([Buffer.from([0x21]), Buffer.from(b64(`uid-${i}`), 'base64')]).toString('base64');

/** A state of N mapped entries, merged into the key levels, written and closed. */
function writtenState(): string {
  const path = t.file();
  const s = t.open(path, { tailEntries: 1_000 });
  for (let from = 0; from < N; from += 500) {
    const batch: EntryUpdate[] = [];
    for (let i = from; i < from + 500; i++)
      batch.push({
        type: 'email',
        hash: hashOf(i),
        outcome: { kind: 'mapped', u: uidOf(i), p: null, r: 2_000_000 + i },
      });
    s.commitBatch(batch, 1_000_000);
  }
  s.close();
  return path;
}

/**
 * Flips one byte of the file, `offset` bytes into `needle`, wherever the file holds it (a free page may keep an
 * older copy of a page beside the live one).
 */
function flipInFile(path: string, needle: Buffer, offset: number): void {
  const bytes = readFileSync(path);
  let flipped = 0;
  for (let at = bytes.indexOf(needle); at >= 0; at = bytes.indexOf(needle, at + 1)) {
    bytes[at + offset] ^= 0x5a;
    flipped++;
  }
  expect(flipped).toBeGreaterThan(0);
  writeFileSync(path, bytes);
}

function damageMessage(err: unknown): string {
  expect(err).toBeInstanceOf(StateDamagedError);
  return (err as Error).message;
}

describe('a damaged state file', () => {
  it('a flipped byte in an entry record stops a lookup with one line that says so, never a wrong raw UID', () => {
    const path = writtenState();
    const victim = 1_234;
    // a byte of the raw UID inside the record: the file holds the UID's bytes once
    flipInFile(path, Buffer.from(uidOf(victim), 'base64'), 10);
    const s = t.open(path);
    let caught: unknown;
    try {
      const found = lookupMany(s, [{ type: 'email', hash: hashOf(victim) }]);
      // what today's code does: gives a raw UID the service never gave
      expect(found.get(`email:${hashOf(victim)}`)?.u).toBe(uidOf(victim));
    } catch (err) {
      caught = err;
    }
    const message = damageMessage(caught);
    expect(message).toMatch(/^state file .* is damaged/);
    expect(message).toMatch(/restore .*backup/);
    expect(message).toMatch(/state export/);
    expect(message).not.toMatch(/re-run|resume/);
    expect(message).not.toMatch(/\n/);
  });

  it('a flipped byte in a key block stops a lookup the same way', () => {
    const path = writtenState();
    const db = new Database(path, { readonly: true });
    const blocks = db
      .prepare('SELECT keys FROM key_blocks UNION ALL SELECT keys FROM key_blocks_recent')
      .pluck()
      .all() as Buffer[];
    db.close();
    const block = blocks.find((b) => b.length > 200) as Buffer;
    expect(block).toBeDefined();
    flipInFile(path, block, Math.floor(block.length / 2));
    const s = t.open(path);
    let caught: unknown;
    try {
      // a hundred keys at a time: a lookup of more may read the entries of a dense id range without its blocks
      for (let from = 0; from < N; from += 100) {
        const some = Array.from({ length: Math.min(100, N - from) }, (_, i) => hashOf(from + i));
        const found = lookupHashes(s, 'email', some);
        // today: some stored entries are lost from the index (sent again) or found under another id
        expect(found.size).toBe(some.length);
        for (let i = from; i < from + some.length; i++) expect(found.get(hashOf(i))?.u).toBe(uidOf(i));
      }
    } catch (err) {
      caught = err;
    }
    expect(damageMessage(caught)).toMatch(/^state file .* is damaged/);
  });

  it('a flipped byte walked by remap-due selection stops it too', () => {
    const path = writtenState();
    flipInFile(path, Buffer.from(uidOf(7), 'base64'), 3);
    const s = t.open(path);
    let caught: unknown;
    try {
      s.selectDue(3_000_000, null, 5_000);
    } catch (err) {
      caught = err;
    }
    expect(damageMessage(caught)).toMatch(/^state file .* is damaged/);
  });

  it('a flipped byte in a due list stops remap-due selection, never loses a due entry from it', () => {
    const path = writtenState();
    const db = new Database(path, { readonly: true });
    const pieces = db.prepare('SELECT ids FROM due_lists WHERE length(ids) > 8').pluck().all() as Buffer[];
    db.close();
    expect(pieces.length).toBeGreaterThan(0);
    flipInFile(path, pieces[0], 2);
    const s = t.open(path);
    let caught: unknown;
    try {
      // today: the piece decodes to other ids, and entries of the day are never given
      expect(s.selectDue(3_000_000, null, 5_000)).toHaveLength(N);
    } catch (err) {
      caught = err;
    }
    expect(damageMessage(caught)).toMatch(/is damaged \(a due list piece fails its checksum\)/);
  });
});
