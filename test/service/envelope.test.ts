import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeKey, decryptResponse, encryptRequest } from '../../src/protocol/index.js';
import { startService, type LocalService } from '../../src/service/index.js';
import { call, get, post } from './helpers.js';

const HINT =
  ' See https://unifiedid.com/docs/getting-started/gs-encryption-decryption for details on the request envelope format.';
const UNENCRYPTED =
  'Invalid body: The request body is unencrypted JSON. It must be an encrypted request envelope. See https://unifiedid.com/docs/getting-started/gs-encryption-decryption#encryption-and-decryption-code-examples for encryption and decryption code examples.';
const MAP = '/v3/identity/map';
const START = Date.UTC(2026, 0, 15, 12, 0, 0);

let service: LocalService;
let key: Buffer;
const auth = () => ({ authorization: `Bearer ${service.apiKey}` });

beforeAll(async () => {
  service = await startService({ nowMs: START });
  key = decodeKey(service.clientSecret);
});
afterAll(() => service.close());

function sealed(json: string, nowMs = service.envelopeNowMs()) {
  return encryptRequest(key, json, { nowMs });
}

async function clientError(body: Buffer | string, headers: Record<string, string> = {}) {
  const answer = await post(service, MAP, body, { ...auth(), ...headers });
  expect(answer.status).toBe(400);
  expect(answer.contentType).toBe('application/json');
  const json = JSON.parse(answer.text) as { status: string; message: string };
  expect(json.status).toBe('client_error');
  return json.message;
}

describe('envelope checks, in the operator order and words', () => {
  it('no body', async () => {
    expect(await clientError('')).toBe('Invalid body: Body is missing.');
  });

  it('plain JSON instead of an envelope', async () => {
    expect(await clientError('{"email":["a@b.com"]}')).toBe(UNENCRYPTED);
  });

  it('not base64', async () => {
    expect(await clientError('not base64!')).toBe(`Invalid body: Body is not valid base64.${HINT}`);
    // whitespace is not allowed by the strict decoder
    const { envelope } = sealed('{"email":[]}');
    expect(await clientError(`${envelope.toString('base64')}\n`)).toBe(
      `Invalid body: Body is not valid base64.${HINT}`,
    );
  });

  it('too short, unless the short bytes are JSON', async () => {
    expect(await clientError(Buffer.from('test').toString('base64'))).toBe(
      `Invalid body: Body too short. Check encryption method.${HINT}`,
    );
    expect(await clientError(Buffer.from('{"version": 2}').toString('base64'))).toBe(UNENCRYPTED);
  });

  it('wrong version byte, unless the bytes are JSON', async () => {
    expect(await clientError(Buffer.alloc(64, 2).toString('base64'))).toBe(
      `Invalid body: Invalid request envelope format version: received 2, must be 1.${HINT}`,
    );
    const json = Buffer.from('{"email_hash": "tMmiiTI7IaAcPpQPFQ65uMVCWH8av9jw4cwf/F5HVRQ=", "version": 2}');
    expect(await clientError(json.toString('base64'))).toBe(UNENCRYPTED);
  });

  it('wrong client secret or altered bytes', async () => {
    const other = encryptRequest(Buffer.alloc(32, 7), '{"email":[]}', { nowMs: service.envelopeNowMs() }).envelope;
    expect(await clientError(other.toString('base64'))).toBe(
      `Invalid body: Check encryption key (ClientSecret).${HINT}`,
    );
    const tampered = Buffer.from(sealed('{"email":[]}').envelope);
    tampered[20]! ^= 1;
    expect(await clientError(tampered.toString('base64'))).toBe(
      `Invalid body: Check encryption key (ClientSecret).${HINT}`,
    );
  });

  it('timestamp window: whole minutes of (now - ts), more than 1 either way is refused', async () => {
    const now = service.envelopeNowMs();
    const TIMESTAMP = 'Invalid timestamp: Request too old or client time drift.';
    expect((await call(service, MAP, { email: [] }, { nowMs: now - 110_000 })).status).toBe(200);
    expect((await call(service, MAP, { email: [] }, { nowMs: now + 110_000 })).status).toBe(200);
    for (const ts of [now - 121_000, now + 121_000, now - 3_600_000, 0]) {
      const answer = await call(service, MAP, { email: [] }, { nowMs: ts });
      expect(answer.status).toBe(400);
      expect(answer.json).toEqual({ status: 'client_error', message: TIMESTAMP });
    }
  });

  it('a service started at another time has its envelope clock skewed by as much', async () => {
    // the service started in January 2026; an envelope stamped with the real time is far outside its window
    const answer = await call(service, MAP, { email: [] }, { nowMs: Date.now() });
    expect(answer.status).toBe(400);
    expect((answer.json as { message: string }).message).toMatch(/^Invalid timestamp/);
  });

  it('payload that is not a JSON object', async () => {
    for (const payload of ['[1,2]', '"text"', '{"email":', '42', 'null']) {
      const answer = await call(service, MAP, payload);
      expect(answer.json).toEqual({
        status: 'client_error',
        message: 'Invalid payload in body: Data is not valid json string.',
      });
    }
  });

  it('a 16-byte plaintext carries no JSON: the handler reports its missing parameter', async () => {
    const answer = await call(service, MAP, '');
    expect(answer.json).toEqual({
      status: 'client_error',
      message: 'Required Parameter Missing: one or more of [email, email_hash, phone, phone_hash] must be specified',
    });
  });

  it('EUID services point the hint at euid.eu', async () => {
    const euid = await startService({ scope: 'EUID' });
    try {
      const answer = await post(euid, MAP, 'not base64!', { authorization: `Bearer ${euid.apiKey}` });
      expect(JSON.parse(answer.text).message).toBe(
        'Invalid body: Body is not valid base64. See https://euid.eu/docs/getting-started/gs-encryption-decryption for details on the request envelope format.',
      );
    } finally {
      await euid.close();
    }
  });
});

describe('body modes', () => {
  it('text request -> base64 text/plain answer with the echoed nonce and the service time', async () => {
    const { envelope, nonce } = sealed('{"email":["a@example.com"]}');
    const answer = await post(service, MAP, envelope.toString('base64'), auth());
    expect(answer.status).toBe(200);
    expect(answer.contentType).toBe('text/plain');
    expect(answer.text).toMatch(/^[A-Za-z0-9+/]+=*$/);
    const opened = decryptResponse(key, Buffer.from(answer.text, 'base64'), nonce);
    expect(Math.abs(opened.timestampMs - service.envelopeNowMs())).toBeLessThan(5_000);
    expect(JSON.parse(opened.json.toString()).status).toBe('success');
  });

  it('binary request -> binary answer', async () => {
    const { envelope, nonce } = sealed('{"email":["a@example.com"]}');
    const answer = await post(service, MAP, envelope, {
      ...auth(),
      'content-type': 'Application/Octet-Stream; charset=x',
    });
    expect(answer.status).toBe(200);
    expect(answer.contentType).toBe('application/octet-stream');
    expect(JSON.parse(decryptResponse(key, answer.body, nonce).json.toString()).status).toBe('success');
  });

  it('form-encoded content type (the Java client) is text mode', async () => {
    const { envelope, nonce } = sealed('{"email":[]}');
    const answer = await post(service, MAP, envelope.toString('base64'), {
      ...auth(),
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(answer.contentType).toBe('text/plain');
    expect(decryptResponse(key, Buffer.from(answer.text, 'base64'), nonce).json.length).toBeGreaterThan(0);
  });

  it('binary content type with a base64 body falls back to text and answers in text', async () => {
    const { envelope, nonce } = sealed('{"email":[]}');
    const answer = await post(service, MAP, envelope.toString('base64'), {
      ...auth(),
      'content-type': 'application/octet-stream',
    });
    expect(answer.status).toBe(200);
    expect(answer.contentType).toBe('text/plain');
    expect(JSON.parse(decryptResponse(key, Buffer.from(answer.text, 'base64'), nonce).json.toString()).status).toBe(
      'success',
    );
  });

  it('in the fallback, the error about the decoded bytes wins; a non-base64 binary body keeps its own error', async () => {
    const binary = { 'content-type': 'application/octet-stream' };
    expect(await clientError(Buffer.alloc(64, 2).toString('base64'), binary)).toBe(
      `Invalid body: Invalid request envelope format version: received 2, must be 1.${HINT}`,
    );
    expect(await clientError(Buffer.alloc(64, 2), binary)).toBe(
      `Invalid body: Invalid request envelope format version: received 2, must be 1.${HINT}`,
    );
    expect(await clientError(Buffer.from('{"email_hash":"x"}').toString('base64'), binary)).toBe(UNENCRYPTED);
    expect(await clientError('{"email_hash":"x"}', binary)).toBe(UNENCRYPTED);
  });
});

describe('size limit and authentication, before the envelope', () => {
  const big = 'A'.repeat((1 << 20) + 4);

  it('413 plain text over 1,048,576 bytes, even without a key', async () => {
    const answer = await post(service, MAP, big);
    expect(answer.status).toBe(413);
    expect(answer.contentType).toBe('text/plain');
    expect(answer.text).toBe('Request Entity Too Large');
  });

  it('exactly 1,048,576 bytes is not refused for size', async () => {
    const answer = await post(service, MAP, 'A'.repeat(1 << 20), auth());
    expect(answer.status).toBe(400);
  });

  it.each([
    ['no header', {}],
    ['wrong key', { authorization: 'Bearer UID2-C-L-999-wrong' }],
    ['not bearer', { authorization: 'Basic abc' }],
    ['key without the prefix', { authorization: 'KEY' }],
  ])('401 {"status":"unauthorized"} for %s, before the envelope is looked at', async (_name, headers) => {
    const answer = await post(service, MAP, 'not base64!', headers);
    expect(answer.status).toBe(401);
    expect(answer.contentType).toBe('application/json');
    expect(answer.text).toBe('{"status":"unauthorized"}');
  });

  it('the header is trimmed and "bearer " matched in any case', async () => {
    const { envelope } = sealed('{"email":[]}');
    const answer = await post(service, MAP, envelope.toString('base64'), {
      authorization: `  BEARER ${service.apiKey}  `,
    });
    expect(answer.status).toBe(200);
  });

  it('a key without the route role gets 401; optout/status accepts SHARER or ID_READER', async () => {
    const sharer = await startService({ roles: ['SHARER'], nowMs: START });
    try {
      const map = await call(sharer, MAP, { email: [] });
      expect(map.status).toBe(401);
      expect(map.raw.text).toBe('{"status":"unauthorized"}');
      const generate = await call(sharer, '/v2/token/generate', { email: 'a@example.com' });
      expect(generate.status).toBe(401);
      const status = await call(sharer, '/v2/optout/status', { advertising_ids: [] });
      expect(status.status).toBe(200);
    } finally {
      await sharer.close();
    }
  });
});

describe('other routes', () => {
  it('healthcheck answers OK to GET', async () => {
    const answer = await get(service, '/ops/healthcheck');
    expect(answer.status).toBe(200);
    expect(answer.text).toBe('OK');
  });

  it('unknown paths get a 404 JSON; API routes refuse GET', async () => {
    const unknown = await post(service, '/v2/key/latest', 'x', auth());
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.text).status).toBe('not_found');
    expect((await get(service, MAP)).status).toBe(405);
  });

  it('keeps connections alive across requests', async () => {
    const http = await import('node:http');
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const reused: boolean[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const body = sealed('{"email":[]}').envelope.toString('base64');
        const status = await new Promise<number>((resolve, reject) => {
          const req = http.request(`${service.url}${MAP}`, { method: 'POST', agent, headers: auth() }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          });
          req.on('error', reject);
          req.end(body);
          reused.push(req.reusedSocket);
        });
        expect(status).toBe(200);
      }
    } finally {
      agent.destroy();
    }
    expect(reused).toEqual([false, true, true]);
  });
});
