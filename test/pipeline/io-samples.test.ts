import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { resolveIdentifierColumns } from '../../src/pipeline/map/identifier-columns.js';
import { openSource } from '../../src/pipeline/io/source.js';
import type { InputRow } from '../../src/pipeline/io/table.js';
import { settled } from '../helpers/settled-reading.js';

const ROOT = join(import.meta.dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'uid2-io-samples-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function rowsOf(path: string): Promise<{ header: string[]; rows: InputRow[] }> {
  const source = await openSource(await settled({ path }));
  const rows: InputRow[] = [];
  for await (const chunk of source.rows()) rows.push(...chunk);
  return { header: source.header, rows };
}

describe('samples and generators', () => {
  test('samples/customers.csv is what scripts/gen-sample.mjs makes', () => {
    const out = join(dir, 'customers.csv');
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'gen-sample.mjs'), '--out', out], { stdio: 'pipe' });
    expect(readFileSync(out, 'utf8')).toBe(readFileSync(join(ROOT, 'samples', 'customers.csv'), 'utf8'));
  });

  test('customers.csv: 3,000 rows, the §6 test identities, hashes in base64 and hex, invalid and duplicate rows', async () => {
    const { header, rows } = await rowsOf(join(ROOT, 'samples', 'customers.csv'));
    expect(header).toEqual(['id', 'email', 'phone', 'email_hash', 'signup_date']);
    expect(rows).toHaveLength(3000);
    const emails = rows.map((r) => r.cells[1]);
    const phones = rows.map((r) => r.cells[2]);
    const hashes = rows.map((r) => r.cells[3]).filter((h) => h !== '');
    for (const e of ['optout@example.com', 'refresh-optout@example.com', 'validate@example.com'])
      expect(emails).toContain(e);
    for (const p of ['+00000000000', '+00000000002', '+12345678901']) expect(phones).toContain(p);
    expect(hashes.some((h) => /^[0-9a-fA-F]{64}$/.test(h))).toBe(true);
    expect(hashes.some((h) => h.length === 44 && h.endsWith('='))).toBe(true);
    expect(emails.some((e) => /\+[a-z0-9]+@gmail\.com$/i.test(e))).toBe(true);
    expect(emails.some((e) => e !== e.trim())).toBe(true);
    expect(phones.some((p) => p !== '' && !/^\+\d{10,15}$/.test(p))).toBe(true);
    const normalized = emails.filter((e) => e.includes('@')).map((e) => e.trim().toLowerCase());
    expect(new Set(normalized).size).toBeLessThan(normalized.length);
    expect(() =>
      resolveIdentifierColumns(header, { emailCol: 'email', phoneCol: 'phone', emailHashCol: 'email_hash' }),
    ).not.toThrow();
  });

  test('bench/gen-input.mjs: seeded (same seed, same bytes), the kinds it promises', async () => {
    const a = join(dir, 'a.csv');
    const b = join(dir, 'b.csv');
    const gen = (out: string, ...extra: string[]) =>
      execFileSync(
        process.execPath,
        [join(ROOT, 'bench', 'gen-input.mjs'), '--rows', '5000', '--seed', '7', '--out', out, ...extra],
        { stdio: 'pipe' },
      );
    gen(a);
    gen(b);
    expect(readFileSync(a)).toEqual(readFileSync(b));
    const mixed = await rowsOf(a);
    expect(mixed.header).toEqual(['id', 'email', 'phone', 'email_hash', 'signup_date']);
    expect(mixed.rows).toHaveLength(5000);
    const phonesOnly = join(dir, 'p.csv');
    gen(phonesOnly, '--kind', 'phone');
    expect((await rowsOf(phonesOnly)).header).toEqual(['id', 'phone']);
  });
});
