// A v3 map request written from hashes' bytes: the same JSON as JSON.stringify of the plain request.
import { describe, expect, it } from 'vitest';
import { sha256Base64 } from '../../src/identity/index.js';
import { MapV3HashRequest, requestJson, sentCount, type MapV3Request } from '../../src/protocol/index.js';

const hashes = (prefix: string, n: number): string[] =>
  Array.from({ length: n }, (_, i) => sha256Base64(`${prefix}${i}`));
const bytes = (texts: string[]): Uint8Array => new Uint8Array(Buffer.from(texts.join(''), 'latin1'));

describe('a v3 map request made of hashes bytes', () => {
  for (const [emails, phones] of [
    [3, 2],
    [1, 0],
    [0, 4],
    [5_000, 0],
  ] as const)
    it(`is the JSON of the plain request, byte for byte (${emails} emails, ${phones} phones)`, () => {
      const email = hashes('e', emails);
      const phone = hashes('p', phones);
      const plain: MapV3Request = {};
      if (emails > 0) plain.email_hash = email;
      if (phones > 0) plain.phone_hash = phone;
      // the builder's buffers are longer than the hashes they hold
      const request = new MapV3HashRequest(bytes([...email, 'x'.repeat(44)]), emails, bytes(phone), phones);
      expect(requestJson(request).toString('latin1')).toBe(JSON.stringify(plain));
      expect(JSON.stringify(request)).toBe(JSON.stringify(plain));
      expect(request.email_hash).toEqual(emails > 0 ? email : undefined);
      expect(request.phone_hash).toEqual(phones > 0 ? phone : undefined);
      expect(sentCount(request, 'email_hash')).toBe(emails);
      expect(sentCount(request, 'phone_hash')).toBe(phones);
      expect(sentCount(request, 'email')).toBe(0);
    });

  it('refuses fewer bytes than the hashes it is told of', () => {
    expect(() => new MapV3HashRequest(bytes(hashes('e', 2)), 3, new Uint8Array(0), 0)).toThrow(/fewer hash bytes/);
  });

  it('leaves a plain request to JSON.stringify', () => {
    const plain = { email: ['a@example.com'], phone_hash: hashes('p', 1) };
    expect(requestJson(plain).toString('utf8')).toBe(JSON.stringify(plain));
    expect(sentCount(plain, 'email')).toBe(1);
    expect(sentCount(plain, 'email_hash')).toBe(0);
  });
});
