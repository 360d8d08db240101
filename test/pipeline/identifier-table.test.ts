// The run's table of identifiers finds each (type, hash) it holds, whatever its key bits, and nothing else.
import { describe, expect, it } from 'vitest';
import { IdentifierTable, textWords } from '../../src/pipeline/map/identifier-table.js';
import { RowChunk } from '../../src/pipeline/map/row-chunk.js';
import { scanMapV3Answers } from '../../src/client/map-v3-scan.js';
import { ScannedAnswers } from '../../src/protocol/index.js';

/** The table's lookup and add with a hash given as text: the table reads a hash as its words (hashWords). */
function find(table: IdentifierTable, type: 'email' | 'phone', hash: string): number {
  return table.find(type, textWords(hash), 0);
}
function add(table: IdentifierTable, type: 'email' | 'phone', hash: string, chunk: RowChunk, slot: number): number {
  return table.add(type, textWords(hash), 0, chunk, slot);
}

const chunk = new RowChunk([], 1, undefined, 1);
const hash = (head: string, tail: string) => `${head}${tail.repeat(38)}=`;

describe('IdentifierTable', () => {
  it('tells apart hashes that share their key bits, and the two DII types of one hash', () => {
    const table = new IdentifierTable(100);
    // "AAAAA": every key bit 0
    const a = add(table, 'email', hash('AAAAA', 'a'), chunk, 0);
    expect(find(table, 'email', hash('AAAAA', 'a'))).toBe(a);
    expect(find(table, 'email', hash('AAAAA', 'b'))).toBe(-1);
    expect(find(table, 'phone', hash('AAAAA', 'a'))).toBe(-1);
    const b = add(table, 'email', hash('AAAAA', 'b'), chunk, 0);
    const p = add(table, 'phone', hash('AAAAA', 'a'), chunk, 0);
    expect(new Set([a, b, p]).size).toBe(3);
    expect(find(table, 'email', hash('AAAAA', 'a'))).toBe(a);
    expect(find(table, 'email', hash('AAAAA', 'b'))).toBe(b);
    expect(find(table, 'phone', hash('AAAAA', 'a'))).toBe(p);
    expect(find(table, 'phone', hash('AAAAA', 'b'))).toBe(-1);
    expect(table.typeOf(p)).toBe('phone');
    expect(table.typeOf(a)).toBe('email');
  });

  it('tells apart hashes that differ only in their last characters', () => {
    const table = new IdentifierTable(100);
    const one = `${'Q'.repeat(42)}A=`;
    const two = `${'Q'.repeat(42)}B=`;
    const three = `${'Q'.repeat(42)}AA`;
    const ids = [one, two, three].map((h) => add(table, 'email', h, chunk, 0));
    expect([one, two, three].map((h) => find(table, 'email', h))).toEqual(ids);
    expect(find(table, 'email', `${'Q'.repeat(41)}RA=`)).toBe(-1);
  });

  it('keeps what is still waiting when its generation is dropped, and forgets what was answered', () => {
    const table = new IdentifierTable(8);
    const waiting = add(table, 'email', hash('/////', 'w'), chunk, 0);
    const answered = add(table, 'email', hash('/////', 'x'), chunk, 0);
    table.resolve(answered, { e: 'optout' });
    for (let i = 0; i < 12; i++) add(table, 'phone', hash(`B${'ABCDEFGHIJKL'[i]}AAA`, 'z'), chunk, 0);
    expect(table.dropped).toBe(true);
    expect(find(table, 'email', hash('/////', 'w'))).toBe(waiting);
    expect(table.isWaiting(waiting)).toBe(true);
    expect(find(table, 'email', hash('/////', 'x'))).toBe(-1);
  });

  it('answers every cell that waits for one identifier, then lets go of them', () => {
    const cells = new RowChunk([], 1, undefined, 3);
    const table = new IdentifierTable(100);
    const id = add(table, 'email', hash('CCCCC', 'c'), cells, 0);
    table.addWaiter(id, cells, 1);
    table.addWaiter(id, cells, 2);
    expect(table.waiters(id)).toBe(3);
    table.resolve(id, { e: 'optout' });
    expect(cells.unanswered).toBe(0);
    expect([...cells.reason]).toEqual(['optout', 'optout', 'optout']);
    expect(table.waiters(id)).toBe(0);
    expect(table.answer(id)).toEqual({ e: 'optout' });
  });

  it('holds a packed answer as an object of its own once it is moved up from the old generation', () => {
    const u = `${'U'.repeat(43)}=`;
    const json = Buffer.from(
      `{"status":"success","body":{"email":[],"email_hash":[{"u":"${u}","p":null,"r":1800000000}],"phone":[],"phone_hash":[]}}`,
    );
    const answers = scanMapV3Answers(json, { email_hash: ['x'] }, 1_790_000_000_000)?.email_hash;
    expect(answers).toBeInstanceOf(ScannedAnswers);
    const table = new IdentifierTable(8);
    const kept = add(table, 'email', hash('/////', 'k'), chunk, 0);
    table.resolve(kept, answers as ScannedAnswers, 0);
    expect(table.answer(kept)).toBe(answers);
    // a full young generation becomes the old one: a hit there moves the entry up
    for (let i = 0; i < 3; i++) add(table, 'phone', hash(`B${'ABC'[i]}AAA`, 'z'), chunk, 0);
    expect(find(table, 'email', hash('/////', 'k'))).toBe(kept);
    expect(table.answer(kept)).not.toBeInstanceOf(ScannedAnswers);
    expect(table.answer(kept)).toEqual({ u, p: null, r: 1_800_000_000 });
  });
});
