// The run's table of identifiers finds each (type, hash) it holds, whatever its key bits, and nothing else.
import { describe, expect, it } from 'vitest';
import { IdentifierTable, TrackedIdentifier } from '../../src/pipeline/map/identifier-table.js';
import { RowChunk } from '../../src/pipeline/map/row-chunk.js';
import { scanMapV3Answers } from '../../src/client/map-v3-scan.js';
import { ScannedAnswers } from '../../src/protocol/index.js';

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

  it('holds a packed answer as an object of its own once it is moved up from the old generation', () => {
    const u = `${'U'.repeat(43)}=`;
    const json = Buffer.from(
      `{"status":"success","body":{"email":[],"email_hash":[{"u":"${u}","p":null,"r":1800000000}],"phone":[],"phone_hash":[]}}`,
    );
    const answers = scanMapV3Answers(json, { email_hash: ['x'] }, 1_790_000_000_000)?.email_hash;
    expect(answers).toBeInstanceOf(ScannedAnswers);
    const table = new IdentifierTable(8);
    const kept = tracked('email', hash('/////', 'k'));
    table.add(kept);
    kept.resolve(answers as ScannedAnswers, 0);
    expect(kept.answer).toBe(answers);
    // a full young generation becomes the old one: a hit there moves the entry up
    for (let i = 0; i < 3; i++) table.add(tracked('phone', hash(`B${'ABC'[i]}AAA`, 'z')));
    expect(table.get('email', hash('/////', 'k'))).toBe(kept);
    expect(kept.answer).not.toBeInstanceOf(ScannedAnswers);
    expect(kept.answer).toEqual({ u, p: null, r: 1_800_000_000 });
  });
});
