import { createHash } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import {
  ColumnError,
  hashTypeFromName,
  kindFromName,
  prepareCell,
  resolveIdentifierColumns,
  resultHeader,
} from '../../src/pipeline/map/identifier-columns.js';

function columnError(fn: () => unknown): ColumnError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ColumnError) return err;
    throw err;
  }
  throw new Error('expected a ColumnError');
}

describe('resolveIdentifierColumns', () => {
  const header = ['id', 'Email', 'phone_number', 'email_hash', 'signup_date'];

  test('named flags, several at once, in flag order with their positions', () => {
    const { columns, note } = resolveIdentifierColumns(header, {
      emailCol: 'Email',
      phoneCol: 'phone_number',
      emailHashCol: ['email_hash'],
    });
    expect(columns).toEqual([
      { name: 'Email', index: 1, kind: 'email' },
      { name: 'phone_number', index: 2, kind: 'phone' },
      { name: 'email_hash', index: 3, kind: 'email_hash' },
    ]);
    expect(note).toBeUndefined();
  });

  test('a name matches ignoring case and surrounding spaces when the exact one is absent', () => {
    expect(resolveIdentifierColumns(header, { emailCol: ' email ' }).columns[0]).toEqual({
      name: 'Email',
      index: 1,
      kind: 'email',
    });
  });

  test('--col with --type; --col alone is auto, with the hash type taken from the column name', () => {
    expect(resolveIdentifierColumns(header, { col: 'email_hash', type: 'phone_hash' }).columns).toEqual([
      { name: 'email_hash', index: 3, kind: 'phone_hash' },
    ]);
    expect(resolveIdentifierColumns(header, { col: 'phone_number' }).columns).toEqual([
      { name: 'phone_number', index: 2, kind: 'auto', hashType: 'phone' },
    ]);
    expect(resolveIdentifierColumns(['id', 'value'], { col: 'value' }).columns).toEqual([
      { name: 'value', index: 1, kind: 'auto' },
    ]);
    expect(
      resolveIdentifierColumns(header, { col: 'Email', emailHashCol: 'email_hash' }).columns.map((c) => c.name),
    ).toEqual(['email_hash', 'Email']);
  });

  test('hash type from a name: phone words -> phone, mail words -> email, else none', () => {
    expect(hashTypeFromName('Mobile Number')).toBe('phone');
    expect(hashTypeFromName('msisdn_sha')).toBe('phone');
    expect(hashTypeFromName('E-Mail')).toBe('email');
    expect(hashTypeFromName('hashed_mail')).toBe('email');
    expect(hashTypeFromName('hash')).toBeUndefined();
  });

  test('a missing column: the flag, the name and the columns there are', () => {
    const err = columnError(() => resolveIdentifierColumns(header, { emailCol: 'mail_addr' }, 'customers.csv'));
    expect(err.message).toBe(
      "--email-col: customers.csv has no column 'mail_addr'; its columns are 'id', 'Email', 'phone_number', 'email_hash', 'signup_date'",
    );
    expect(err.available).toEqual(header);
  });

  test('a long header is listed in part', () => {
    const wide = Array.from({ length: 1000 }, (_, i) => `c${i}`);
    const err = columnError(() => resolveIdentifierColumns(wide, { phoneCol: 'phone' }));
    expect(err.message).toContain("'c19' and 980 more");
  });

  test('the same column twice, or --type without --col: a clear usage error', () => {
    expect(columnError(() => resolveIdentifierColumns(header, { emailCol: 'Email', col: 'email' })).message).toMatch(
      /named twice/,
    );
    expect(columnError(() => resolveIdentifierColumns(header, { type: 'email' })).message).toMatch(
      /--type goes with --col/,
    );
  });

  test('names that say what a column holds, in the spellings exports use; names about an identifier are not it', () => {
    const cases: [string, string | undefined][] = [
      ['customer_email', 'email'],
      ['EMAIL_ADDR', 'email'],
      ['customerEmail', 'email'],
      ['Work E-Mail', 'email'],
      ['EMailAddress', 'email'],
      ['email2', 'email'],
      ['Email 1', 'email'],
      ['contact_email_address', 'email'],
      ['courriel', 'email'],
      ['tel', 'phone'],
      ['Tel.', 'phone'],
      ['cell', 'phone'],
      ['mobile_number', 'phone'],
      ['Mobile Phone', 'phone'],
      ['MSISDN', 'phone'],
      ['customer_phone_no', 'phone'],
      ['PhoneNumber', 'phone'],
      ['home_telephone', 'phone'],
      ['hashed_email_address', 'email_hash'],
      ['email_sha256', 'email_hash'],
      ['EmailHash', 'email_hash'],
      ['msisdn_hash', 'phone_hash'],
      ['hashed_phone', 'phone_hash'],
      ['hash', 'auto'],
      ['SHA256', 'auto'],
      ['hashed', 'auto'],
      ['email_opt_in', undefined],
      ['phone_type', undefined],
      ['email_domain', undefined],
      ['email_raw_uid', undefined],
      ['Email_Address_status', undefined],
      ['email_or_phone', undefined],
      ['email_phone', undefined],
      ['hotel', undefined],
      ['customer_hash', undefined],
      ['email_verified', undefined],
      ['phone_country_code', undefined],
      ['id', undefined],
    ];
    expect(cases.map(([name]) => [name, kindFromName(name)])).toEqual(cases);
  });

  test('no flags: the one column named like an identifier is used, and the note says which', () => {
    for (const [name, kind] of [
      ['email', 'email'],
      ['E-Mail Address', 'email'],
      ['mail', 'email'],
      ['MSISDN', 'phone'],
      ['mobile', 'phone'],
      ['hashed_email', 'email_hash'],
      ['sha256_email', 'email_hash'],
      ['phone_hash', 'phone_hash'],
    ] as const) {
      const { columns, note } = resolveIdentifierColumns(['id', name, 'city'], {});
      expect(columns).toEqual([{ name, index: 1, kind }]);
      expect(note).toContain(`using column '${name}'`);
    }
  });

  test('a bare hash column, alone or as --col without --type, is a question, not a guess', () => {
    for (const name of ['hash', 'SHA256', 'hashed']) {
      const bare = columnError(() => resolveIdentifierColumns(['id', name], {}, 'x.csv'));
      expect(bare.message).toContain(`column '${name}' of x.csv: its name says hashes but not of what`);
      expect(bare.message).toContain(`--email-hash-col ${name} or --phone-hash-col ${name}`);
      expect(columnError(() => resolveIdentifierColumns(['id', name], { col: name })).message).toMatch(
        /^--col .*: its name says hashes/,
      );
    }
    // a type given, or a name that says which hashes, is no question
    expect(resolveIdentifierColumns(['id', 'hash'], { col: 'hash', type: 'auto' }).columns).toEqual([
      { name: 'hash', index: 1, kind: 'auto' },
    ]);
    expect(resolveIdentifierColumns(['id', 'hash'], { col: 'hash', type: 'email_hash' }).columns).toEqual([
      { name: 'hash', index: 1, kind: 'email_hash' },
    ]);
    expect(resolveIdentifierColumns(['id', 'value'], { col: 'value' }).columns).toEqual([
      { name: 'value', index: 1, kind: 'auto' },
    ]);
  });

  test('no flags and several candidates of distinct, named kinds: all are used and the note says how to choose', () => {
    const { columns, note } = resolveIdentifierColumns(header, {}, 'customers.csv');
    expect(columns.map((c) => [c.name, c.kind])).toEqual([
      ['Email', 'email'],
      ['phone_number', 'phone'],
      ['email_hash', 'email_hash'],
    ]);
    expect(note).toContain("using columns 'Email' as");
    expect(note).toContain('--email-col Email --phone-col phone_number --email-hash-col email_hash');
  });

  test('no flags and candidates that leave a question (two of a kind, or a bare hash column): which flags to use, ready to copy', () => {
    const twoEmails = columnError(() => resolveIdentifierColumns(['id', 'email', 'e-mail'], {}, 'customers.csv'));
    expect(twoEmails.message).toContain("several columns of customers.csv look like identifiers ('email', 'e-mail')");
    expect(twoEmails.message).toContain('--email-col email --email-col e-mail');
    const bareHash = columnError(() => resolveIdentifierColumns(['email', 'hash'], {}, 'x.csv'));
    expect(bareHash.message).toContain('--email-col email --email-hash-col hash');
  });

  test('no flags and no candidate: the columns there are, and a delimiter hint when the header was not split', () => {
    expect(columnError(() => resolveIdentifierColumns(['id', 'name'], {})).message).toMatch(
      /no identifier column found.*'id', 'name'.*--email-col/,
    );
    expect(columnError(() => resolveIdentifierColumns(['id;email'], {})).message).toContain('add --delimiter ";"');
    expect(columnError(() => resolveIdentifierColumns(['id\temail'], {})).message).toContain('add --delimiter tab');
    expect(columnError(() => resolveIdentifierColumns([], {}, 'empty.csv')).message).toContain('empty.csv is empty');
  });
});

describe('prepareCell', () => {
  const sha = (s: string) => createHash('sha256').update(s, 'utf8').digest('base64');

  test('named kinds go through the identity layer', () => {
    expect(prepareCell({ name: 'e', index: 0, kind: 'email' }, ' Jane.Doe+x@GMail.com')).toEqual({
      ok: true,
      type: 'email',
      hash: sha('janedoe@gmail.com'),
    });
    expect(prepareCell({ name: 'p', index: 0, kind: 'phone' }, '+14155550100')).toEqual({
      ok: true,
      type: 'phone',
      hash: sha('+14155550100'),
    });
    expect(prepareCell({ name: 'p', index: 0, kind: 'phone' }, '(415) 555-0100').ok).toBe(false);
  });

  test('auto detects each cell; a bare hash needs the column hash type', () => {
    const hash = sha('foo@bar.com');
    expect(prepareCell({ name: 'x', index: 0, kind: 'auto' }, 'foo@bar.com')).toEqual({
      ok: true,
      type: 'email',
      hash,
    });
    expect(prepareCell({ name: 'x', index: 0, kind: 'auto', hashType: 'email' }, hash)).toEqual({
      ok: true,
      type: 'email',
      hash,
    });
    const ambiguous = prepareCell({ name: 'x', index: 0, kind: 'auto' }, hash);
    expect(ambiguous.ok).toBe(false);
    if (!ambiguous.ok) expect(ambiguous.reason).toMatch(/ambiguous/);
  });
});

describe('resultHeader', () => {
  test('fields plain for one column, prefixed for several, never clashing with an input column', () => {
    expect(resultHeader(['id', 'email'], [{ name: 'email' }], ['hash', 'status'])).toEqual([
      'id',
      'email',
      'hash',
      'status',
    ]);
    expect(resultHeader(['email', 'phone'], [{ name: 'email' }, { name: 'phone' }], ['hash'])).toEqual([
      'email',
      'phone',
      'email_hash',
      'phone_hash',
    ]);
    expect(resultHeader(['email', 'status', 'status_2'], [{ name: 'email' }], ['hash', 'status'])).toEqual([
      'email',
      'status',
      'status_2',
      'hash',
      'status_3',
    ]);
  });
});
