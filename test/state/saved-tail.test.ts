import { afterAll, describe, expect, it } from 'vitest';
import { setMetaValue } from '../../src/state/meta-values.js';
import Database from '../helpers/sqlite-driver.js';
import type { EntryUpdate } from '../../src/state/index.js';
import { b64, tmpStates, zeroPieces } from './tmp-state.js';

const t = tmpStates();
afterAll(() => t.cleanup());

function mapped(from: number, n: number, type: 'email' | 'phone' = 'email'): EntryUpdate[] {
  return Array.from({ length: n }, (_, i) => ({
    type,
    hash: b64(`h${from + i}`),
    outcome: { kind: 'mapped', u: b64(`u${from + i}`), p: null, r: 1_000 + i },
  }));
}

function write(path: string, batches: EntryUpdate[][]): void {
  const s = t.open(path, { tailEntries: 1_000 });
  for (const batch of batches) s.commitBatch(batch, 500);
  s.close();
}

function meta(path: string): Record<string, string> {
  const db = new Database(path, { readonly: true });
  try {
    return Object.fromEntries(db.prepare('SELECT key, value FROM meta').raw().all() as [string, string][]);
  } finally {
    db.close();
  }
}

function found(path: string, hashes: string[], type: 'email' | 'phone' = 'email'): string[] {
  const s = t.open(path, { tailEntries: 1_000, readonly: true });
  const stored = s.lookupStored(type, hashes);
  const u = Array.from(stored.at, (at, k) => `${hashes[at]}=${stored.u[k]}`);
  s.close();
  return u.sort();
}

describe('the tail keys saved as a writing connection closes', () => {
  it('are saved for a long tail, and a new connection finds every entry through them', () => {
    const path = t.file();
    const email = mapped(0, 300);
    const phone = mapped(300, 100, 'phone');
    write(path, [email.slice(0, 150), phone, email.slice(150)]);
    expect(meta(path)).toMatchObject({ tail_keys_from: '0', tail_keys_upto: '400' });
    const asked = email.map((u) => u.hash).concat(b64('unknown'));
    expect(found(path, asked)).toEqual(email.map((u) => `${u.hash}=${(u.outcome as { u: string }).u}`).sort());
    expect(
      found(
        path,
        phone.map((u) => u.hash),
        'phone',
      ),
    ).toHaveLength(100);
  });

  it('are what a new connection reads: keys saved wrong hide their entries', () => {
    const path = t.file();
    const email = mapped(1_000, 300);
    write(path, [email]);
    const db = new Database(path);
    // damaged keys (their checksum fails) are not used: the tail is read from the entries
    zeroPieces(db, 'tail_keys', 'keys', false);
    expect(
      found(
        path,
        email.map((u) => u.hash),
      ).length,
    ).toBe(email.length);
    zeroPieces(db, 'tail_keys', 'keys', true);
    db.close();
    expect(
      found(
        path,
        email.map((u) => u.hash),
      ),
    ).toEqual([]);
  });

  it('cover what was appended before them; later entries are read from the file, and saved again', () => {
    const path = t.file();
    const first = mapped(2_000, 300);
    const later = mapped(2_300, 50);
    write(path, [first]);
    write(path, [later]);
    expect(meta(path)).toMatchObject({ tail_keys_from: '0', tail_keys_upto: '350' });
    expect(
      found(
        path,
        [...first, ...later].map((u) => u.hash),
      ),
    ).toHaveLength(350);
  });

  it('are not used when they claim entries the file does not hold, and go once a merge moves the tail', () => {
    const path = t.file();
    const first = mapped(3_000, 300);
    write(path, [first]);
    const db = new Database(path);
    setMetaValue(db, 'tail_keys_upto', '999');
    db.close();
    expect(
      found(
        path,
        first.map((u) => u.hash),
      ),
    ).toHaveLength(300);
    // past tailEntries (1,000) the tail is merged into the keys tables
    write(path, [mapped(3_300, 400), mapped(3_700, 400)]);
    const after = meta(path);
    expect(after.tail_keys_upto).toBeUndefined();
    expect(Number(after.keys_upto)).toBe(1_100);
    expect(
      found(
        path,
        mapped(3_000, 1_100).map((u) => u.hash),
      ),
    ).toHaveLength(1_100);
  });
});
