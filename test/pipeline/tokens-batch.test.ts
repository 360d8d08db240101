import { PassThrough, Readable } from 'node:stream';
import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { sha256Base64, type PhoneRegion } from '../../src/identity/index.js';
import { openSink } from '../../src/pipeline/io/output/sink.js';
import { openSource } from '../../src/pipeline/io/source.js';
import { InputError } from '../../src/pipeline/io/table.js';
import {
  BatchStopped,
  generateTokenBatch,
  readIdentifierType,
  RunConsentRefused,
  validateTokenBatch,
} from '../../src/pipeline/tokens/token-batch.js';
import { ClientError, UnauthorizedError } from '../../src/protocol/index.js';
import { fakeClient, identity } from '../cli/token-fakes.js';
import { settled } from '../helpers/settled-reading.js';

async function table(text: string, chunkRows = 2) {
  return openSource(await settled({ path: 'in.csv', stream: Readable.from([Buffer.from(text)]), chunkRows }));
}

function output() {
  const stream = new PassThrough();
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  return {
    open: (header: string[]) => openSink({ format: 'csv', header, stream }),
    rows: (): string[][] => parse(Buffer.concat(chunks).toString('utf8')) as string[][],
    text: () => Buffer.concat(chunks).toString('utf8'),
  };
}

describe('readIdentifierType', () => {
  it('reads the API names loosely and nothing else', () => {
    expect(readIdentifierType(' Email ')).toBe('email');
    expect(readIdentifierType('email-hash')).toBe('email_hash');
    expect(readIdentifierType('Phone Hash')).toBe('phone_hash');
    expect(readIdentifierType('mail')).toBeNull();
  });
});

describe('a country column and NULL markers in token batches', () => {
  it("reads each row's phone in its country, and \\N (or a --null-value) as an empty identifier", async () => {
    const csv =
      'identifier,identifier_type,Country,token\n' +
      '(21) 2690-3311,phone,Brazil,t1\n' +
      '90685 36153,phone,,t2\n' +
      '\\N,email,,t3\n' +
      'NULL,email,,t4\n' +
      '(21) 2690-3311,phone,Narnia,t5\n';
    const client = fakeClient({ validate: async () => true });
    const out = output();
    await validateTokenBatch({
      source: await table(csv),
      openSink: out.open,
      client,
      concurrency: 1,
      phoneRegion: 'IN' as PhoneRegion,
      phoneRegionColumn: 'country',
      nullValues: ['NULL'],
    });
    const rows = out.rows().slice(1);
    expect(rows.map((r) => [r[4], r[5], r[6]])).toEqual([
      ['true', sha256Base64('+552126903311'), ''],
      ['true', sha256Base64('+919068536153'), ''],
      ['invalid', '', 'empty'],
      ['invalid', '', 'empty'],
      [
        'invalid',
        '',
        "invalid phone: the row's country 'Narnia' is not an ISO 3166 code or a country name this tool knows",
      ],
    ]);
    // the cells are written as read
    expect(rows.map((r) => r[0])).toEqual(['(21) 2690-3311', '90685 36153', '\\N', 'NULL', '(21) 2690-3311']);
  });
});

describe('validateTokenBatch', () => {
  it('writes every row in order with valid, the normalized hash sent, and reason', async () => {
    const csv =
      'id,identifier,identifier_type,token\n' +
      '1,User@Example.com,email,tok-user\n' +
      '2,+12345678901,phone,tok-other\n' +
      '3,555 1234,phone,tok-x\n' +
      '4,a@b.com,fax,tok-y\n' +
      `5,${sha256Base64('c@d.com')},email_hash,tok-c\n` +
      '6,e@f.com,email,\n';
    const client = fakeClient({
      // answers in reverse order of arrival, so order in the output proves reassembly, not luck
      validate: async (req) => {
        await new Promise((r) => setTimeout(r, req.token === 'tok-user' ? 20 : 1));
        return req.token === 'tok-user' || req.token === 'tok-c';
      },
    });
    const out = output();
    const counts = await validateTokenBatch({ source: await table(csv), openSink: out.open, client, concurrency: 3 });
    // rows no re-run can fix are `invalid` (data), not `error` (which asks for a re-run)
    expect(counts).toEqual({ rows: 6, valid: 2, invalid: 1, rejected: 3, error: 0 });
    const rows = out.rows();
    expect(rows[0]).toEqual(['id', 'identifier', 'identifier_type', 'token', 'valid', 'hash', 'reason']);
    expect(rows.slice(1).map((r) => [r[0], r[4], r[5]])).toEqual([
      ['1', 'true', sha256Base64('user@example.com')],
      ['2', 'false', sha256Base64('+12345678901')],
      ['3', 'invalid', ''],
      ['4', 'invalid', ''],
      ['5', 'true', sha256Base64('c@d.com')],
      ['6', 'invalid', sha256Base64('e@f.com')],
    ]);
    expect(rows[3]![6]).toContain('E.164');
    expect(rows[4]![6]).toContain('identifier_type');
    expect(rows[6]![6]).toBe('empty token');
    // only valid identifiers with a token were sent, and only as hashes
    expect(client.calls.map((c) => c.args[0])).toEqual([
      { token: 'tok-user', email_hash: sha256Base64('user@example.com') },
      { token: 'tok-other', phone_hash: sha256Base64('+12345678901') },
      { token: 'tok-c', email_hash: sha256Base64('c@d.com') },
    ]);
  });

  it("a per-row service refusal is that row's: an unreadable token is invalid, another refusal an error; the run goes on", async () => {
    const client = fakeClient({
      validate: (req) => {
        if (req.token === 'bad') throw new ClientError(400, 'client_error', 'Invalid token');
        if (req.token === 'odd') throw new ClientError(400, 'client_error', 'something else');
        return true;
      },
    });
    const out = output();
    const counts = await validateTokenBatch({
      source: await table(
        'identifier,identifier_type,token\na@b.com,email,bad\na@b.com,email,good\na@b.com,email,odd\n',
      ),
      openSink: out.open,
      client,
      concurrency: 2,
    });
    expect(counts).toEqual({ rows: 3, valid: 1, invalid: 0, rejected: 1, error: 1 });
    expect(out.rows()[1]).toEqual([
      'a@b.com',
      'email',
      'bad',
      'invalid',
      sha256Base64('a@b.com'),
      'the service cannot read this token (Invalid token)',
    ]);
    expect(out.rows()[3]![3]).toBe('error');
  });

  it('a re-run over its own output overwrites valid/hash/reason instead of adding columns', async () => {
    const out = output();
    await validateTokenBatch({
      source: await table('identifier,identifier_type,token,valid,hash,reason\na@b.com,email,t,false,x,old\n'),
      openSink: out.open,
      client: fakeClient({ validate: () => true }),
      concurrency: 1,
    });
    expect(out.rows()).toEqual([
      ['identifier', 'identifier_type', 'token', 'valid', 'hash', 'reason'],
      ['a@b.com', 'email', 't', 'true', sha256Base64('a@b.com'), ''],
    ]);
  });

  it('names the missing columns before any output is opened', async () => {
    let opened = false;
    const err = await validateTokenBatch({
      source: await table('email,token\na@b.com,t\n'),
      openSink: async () => {
        opened = true;
        throw new Error('not expected');
      },
      client: fakeClient({}),
      concurrency: 1,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputError);
    expect((err as Error).message).toMatch(/missing column\(s\) identifier, identifier_type/);
    expect(opened).toBe(false);
  });

  it('stops the whole run on 401, aborting the output', async () => {
    let aborted = false;
    let committed = false;
    const client = fakeClient({
      validate: () => {
        throw new UnauthorizedError(401, 'unauthorized', undefined);
      },
    });
    const rows = Array.from({ length: 20 }, (_, i) => `u${i}@example.com,email,t${i}`).join('\n');
    const err = await validateTokenBatch({
      source: await table(`identifier,identifier_type,token\n${rows}\n`, 5),
      openSink: async () => ({
        writeRows: async () => {},
        writeEncoded: async () => {},
        commit: async () => {
          committed = true;
        },
        abort: async () => {
          aborted = true;
        },
      }),
      client,
      concurrency: 2,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BatchStopped);
    expect((err as BatchStopped).failure.kind).toBe('unauthorized');
    expect(aborted).toBe(true);
    expect(committed).toBe(false);
    // the queue is cleared: far fewer calls than rows
    expect(client.calls.length).toBeLessThan(5);
  });
});

describe('generateTokenBatch', () => {
  it('one identity per row with status, never more than `concurrency` in flight', async () => {
    const now = Date.now();
    let inFlight = 0;
    let peak = 0;
    const client = fakeClient({
      generate: async (input) => {
        inFlight++;
        peak = Math.max(peak, inFlight);
        await new Promise((r) => setTimeout(r, 5));
        inFlight--;
        if ('email_hash' in input && input.email_hash === sha256Base64('optout@example.com'))
          return { status: 'optout' };
        return { status: 'success', identity: identity(now) };
      },
    });
    const rows = [
      'optout@example.com,email',
      'bad-phone,phone',
      ...Array.from({ length: 10 }, (_, i) => `p${i}@example.com,email`),
    ];
    const out = output();
    const counts = await generateTokenBatch({
      source: await table(`identifier,identifier_type\n${rows.join('\n')}\n`, 4),
      openSink: out.open,
      client,
      concurrency: 3,
    });
    expect(counts).toEqual({ rows: 12, success: 10, optout: 1, insufficient_user_consent: 0, invalid: 1, error: 0 });
    expect(peak).toBeLessThanOrEqual(3);
    expect(peak).toBeGreaterThan(1);
    const result = out.rows();
    expect(result[0]).toEqual([
      'identifier',
      'identifier_type',
      'advertising_token',
      'refresh_token',
      'identity_expires',
      'refresh_from',
      'refresh_expires',
      'refresh_response_key',
      'status',
      'reason',
    ]);
    expect(result[1]!.slice(2)).toEqual(['', '', '', '', '', '', 'optout', 'the user opted out']);
    expect(result[2]![8]).toBe('invalid');
    expect(result[3]![8]).toBe('success');
    expect(Number(result[3]![4])).toBeGreaterThan(now);
    expect(result[3]![7]).toMatch(/^[A-Za-z0-9+/]{43}=$/);
  });
});

describe('TCF consent strings in token generate batches', () => {
  it("sends each row's tcf_consent_string, else the run's; reports insufficient consent and unreadable strings", async () => {
    const sent: (string | undefined)[] = [];
    const client = fakeClient({
      generate: async (input) => {
        const consent = (input as { tcf_consent_string?: string }).tcf_consent_string;
        sent.push(consent);
        if (consent === 'garbled') throw new ClientError(400, 'client_error', 'User consent is invalid');
        if (consent === 'NONE') return { status: 'insufficient_user_consent' };
        return { status: 'success', identity: identity(Date.now()) };
      },
    });
    const csv =
      'identifier,identifier_type,TCF_Consent_String\n' +
      'a@example.com,email,NONE\n' +
      'b@example.com,email,\n' +
      'c@example.com,email,\\N\n' +
      'd@example.com,email,garbled\n';
    const out = output();
    const counts = await generateTokenBatch({
      source: await table(csv, 10),
      openSink: out.open,
      client,
      concurrency: 1,
      tcfConsentString: 'GRANTED',
    });
    expect(sent).toEqual(['NONE', 'GRANTED', 'GRANTED', 'garbled']);
    expect(counts).toEqual({ rows: 4, success: 2, optout: 0, insufficient_user_consent: 1, invalid: 1, error: 0 });
    const rows = out.rows();
    const status = rows[0]!.indexOf('status');
    expect(rows.slice(1).map((r) => r[status])).toEqual(['insufficient_user_consent', 'success', 'success', 'invalid']);
    expect(rows[4]![status + 1]).toMatch(/^tcf_consent_string: .*User consent is invalid/);
  });

  it('stops the run when the run-wide string is one the service cannot read', async () => {
    const client = fakeClient({
      generate: async () => {
        throw new ClientError(400, 'client_error', 'User consent is invalid');
      },
    });
    const out = output();
    const run = generateTokenBatch({
      source: await table('identifier,identifier_type\na@example.com,email\nb@example.com,email\n'),
      openSink: out.open,
      client,
      concurrency: 1,
      tcfConsentString: 'garbled',
    });
    await expect(run).rejects.toBeInstanceOf(RunConsentRefused);
    expect(client.calls.filter((c) => c.method === 'tokenGenerate')).toHaveLength(1);
  });

  it('sends no consent string when there is neither a column nor a run-wide one', async () => {
    const sent: unknown[] = [];
    const client = fakeClient({
      generate: async (input) => {
        sent.push('tcf_consent_string' in input);
        return { status: 'success', identity: identity(Date.now()) };
      },
    });
    const out = output();
    await generateTokenBatch({
      source: await table('identifier,identifier_type\na@example.com,email\n'),
      openSink: out.open,
      client,
      concurrency: 1,
    });
    expect(sent).toEqual([false]);
  });
});
