// The run's table of identifiers finds each (type, hash) it holds, whatever its key bits, and nothing else.
import { describe, expect, it } from 'vitest';
import { IdentifierTable, TrackedIdentifier } from '../../src/pipeline/map/identifier-table.js';
import { RowChunk } from '../../src/pipeline/map/row-chunk.js';

const chunk = new RowChunk([], 1, undefined, 1);
const tracked = (type: 'email' | 'phone', hash: string) => new TrackedIdentifier(type, hash, chunk, 0);
const hash = (head: string, tail: string) => `${head}${tail.repeat(39)}=`;

describe('IdentifierTable', () => {
  it('tells apart hashes that share their key bits, and the two DII types of one hash', () => {
    const table = new IdentifierTable(100);
    // "AAAAA": every key bit 0
    const a = tracked('email', hash('AAAAA', 'a'));
    const b = tracked('email', hash('AAAAA', 'b'));
    const p = tracked('phone', hash('AAAAA', 'a'));
    table.add(a);
    expect(table.get('email', hash('AAAAA', 'a'))).toBe(a);
    expect(table.get('email', hash('AAAAA', 'b'))).toBeUndefined();
    expect(table.get('phone', hash('AAAAA', 'a'))).toBeUndefined();
    table.add(b);
    table.add(p);
    expect(table.get('email', hash('AAAAA', 'a'))).toBe(a);
    expect(table.get('email', hash('AAAAA', 'b'))).toBe(b);
    expect(table.get('phone', hash('AAAAA', 'a'))).toBe(p);
    expect(table.get('phone', hash('AAAAA', 'b'))).toBeUndefined();
  });

  it('keeps what is still waiting when its generation is dropped, and forgets what was answered', () => {
    const table = new IdentifierTable(8);
    const waiting = tracked('email', hash('/////', 'w'));
    const answered = tracked('email', hash('/////', 'x'));
    table.add(waiting);
    table.add(answered);
    answered.resolve({ e: 'optout' });
    for (let i = 0; i < 12; i++) table.add(tracked('phone', hash(`B${'ABCDEFGHIJKL'[i]}AAA`, 'z')));
    expect(table.dropped).toBe(true);
    expect(table.get('email', hash('/////', 'w'))).toBe(waiting);
    expect(table.get('email', hash('/////', 'x'))).toBeUndefined();
  });
});
