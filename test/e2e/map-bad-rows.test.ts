import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { runCli } from '../helpers/map-e2e-processes.js';

// --on-bad-row skip through the built CLI: a file with 1% records that cannot be read maps the other 99%.
const dir = tempDir('bad-rows');
const ROWS = 5000;
let input: string;
let cleanOut: string;
/** The lines (in the file) of the bad records. */
const badLines: number[] = [];

function goodLine(i: number): string {
  return `${String(i).padStart(5, '0')},user.${i}@example.com,0${i % 9}134,note ${i}`;
}

/** Every 100th record is bad: invalid UTF-8 or a NUL in its note; the last one opens a quote it never closes. */
function inputs(): { bad: Buffer; clean: string } {
  const bad: Buffer[] = [Buffer.from('id,email,zip,note\n')];
  const clean: string[] = ['id,email,zip,note'];
  for (let i = 0; i < ROWS; i++) {
    const line = i + 2;
    if (i % 100 === 99) {
      badLines.push(line);
      const email = `user.${i}@example.com`;
      const broken =
        i === ROWS - 1
          ? `${i},"${email},never closed\n`
          : i % 200 === 199
            ? `${i},${email},0${i % 9}134,caf\xe9\n`
            : `${i},${email},0${i % 9}134,a\u0000b\n`;
      bad.push(Buffer.from(broken, 'latin1'));
    } else {
      bad.push(Buffer.from(`${goodLine(i)}\n`));
      clean.push(goodLine(i));
    }
  }
  return { bad: Buffer.concat(bad), clean: `${clean.join('\n')}\n` };
}

const MAP = ['--email-col', 'email', '--env', 'local'];

beforeAll(async () => {
  ensureBuilt();
  const { bad, clean } = inputs();
  input = dir.file('one-percent-bad.csv', bad);
  cleanOut = dir.file('clean-out.csv');
  const run = await runCli(['map', dir.file('clean.csv', clean), ...MAP, '--quiet', '-o', cleanOut]);
  expect(run.code).toBe(0);
}, 120_000);

afterAll(() => dir.remove());

describe('map --on-bad-row skip', () => {
  it.each([['0'], ['2']])(
    'maps the 99% that can be read, lists the 1% that cannot, and exits 9 (--threads %s)',
    async (threads) => {
      const out = dir.file(`out-${threads}.csv`);
      const list = dir.file(`bad-${threads}.csv`);
      const summary = dir.file(`summary-${threads}.json`);
      const run = await runCli([
        'map',
        input,
        ...MAP,
        '--on-bad-row',
        'skip',
        '--bad-rows',
        list,
        '-o',
        out,
        '--summary-json',
        summary,
        '--threads',
        threads,
      ]);
      expect(run.code).toBe(9);
      expect(readFileSync(out, 'utf8')).toBe(readFileSync(cleanOut, 'utf8'));
      const listed = readFileSync(list, 'utf8').trim().split('\n');
      expect(listed[0]).toBe('file,line,reason');
      expect(listed.slice(1).map((l) => Number(l.split(',')[1]))).toEqual(badLines);
      expect(listed[1]).toBe(`${input},${badLines[0]},NUL byte (a binary or UTF-16 file?)`);
      expect(listed[2]).toBe(`${input},${badLines[1]},invalid UTF-8`);
      expect(listed.at(-1)).toBe(`${input},${ROWS + 1},a quoted value opens on this line and is never closed`);
      const s = JSON.parse(readFileSync(summary, 'utf8'));
      expect(s.bad_rows).toBe(ROWS / 100);
      expect(s.rows).toBe(ROWS - ROWS / 100);
      expect(run.stderr).toContain(`${ROWS / 100} record(s) could not be read and were skipped`);
      // what is said names the place and the problem, never the record's content
      expect(run.stderr).not.toMatch(/user\.\d+@example\.com/);
    },
  );

  it('without --on-bad-row skip the first bad record still ends the run: exit 1, no output', async () => {
    const out = dir.file('fail-out.csv');
    const run = await runCli(['map', input, ...MAP, '-o', out]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`${input}: line ${badLines[0]}: NUL byte`);
  });

  it("optout-check skips a raw UID file's bad records and says so with exit 9", async () => {
    const uids = readFileSync(cleanOut, 'utf8')
      .trim()
      .split('\n')
      .slice(1, 101)
      .map((l) => l.split(',')[4]);
    const file = dir.file(
      'uids.csv',
      Buffer.concat([
        Buffer.from(`raw_uid\n${uids.slice(0, 50).join('\n')}\n`),
        Buffer.from('caf\xe9\n', 'latin1'),
        Buffer.from(`${uids.slice(50).join('\n')}\n`),
      ]),
    );
    const list = dir.file('uids-bad.csv');
    const run = await runCli(['optout-check', file, '--env', 'local', '--on-bad-row', 'skip', '--bad-rows', list]);
    expect(run.code).toBe(9);
    expect(run.stdout.trim().split('\n')).toHaveLength(101);
    expect(readFileSync(list, 'utf8')).toBe(`file,line,reason\n${file},52,invalid UTF-8\n`);
  });

  it('hash skips the same records and says so with exit 9', async () => {
    const run = await runCli(['hash', input, '--email-col', 'email', '--on-bad-row', 'skip', '--quiet']);
    expect(run.code).toBe(9);
    expect(run.stdout.trim().split('\n')).toHaveLength(ROWS - ROWS / 100 + 1);
  });
});
