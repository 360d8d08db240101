// The one-pass reader of v3 map answers takes the usual shape and gives the general reader's answer; anything
// else it leaves to the general reader, so the answers it takes and the errors of the rest stay the same.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { scanMapV3Answer } from '../../src/client/map-v3-scan.js';
import { readMapV3Body, readResponseJson } from '../../src/client/response-bodies.js';
import type { MapV3Request } from '../../src/protocol/index.js';

const b64 = (s: string) => createHash('sha256').update(s).digest('base64');
/** 33 bytes: 44 characters with no padding. */
const RAW_UID_33 = Buffer.alloc(33, 0xa0).toString('base64');
const NOW_MS = Date.UTC(2026, 0, 15);
const R = Math.floor(NOW_MS / 1000) + 86_400;

const sent = (n: number, tag: string) => Array.from({ length: n }, (_, i) => b64(`${tag}${i}`));
const REQUEST: MapV3Request = { email_hash: sent(4, 'e'), phone_hash: sent(2, 'p') };
const EMAIL_ITEMS = [
  `{"u":"${b64('u0')}","p":null,"r":${R}}`,
  `{"u":"${RAW_UID_33}","p":"${b64('q1')}","r":${R}}`,
  '{"e":"optout"}',
  '{"e":"invalid identifier"}',
];
const PHONE_ITEMS = [`{"u":"${b64('u2')}","p":null,"r":${R}}`, '{"e":"optout"}'];
const BODY = `{"email":[],"email_hash":[${EMAIL_ITEMS.join(',')}],"phone":[],"phone_hash":[${PHONE_ITEMS.join(',')}]}`;

const general = (text: string, request: MapV3Request) =>
  readMapV3Body('t', readResponseJson('t', Buffer.from(text), ['success']).body, request, NOW_MS);
const scan = (text: string, request: MapV3Request = REQUEST) => scanMapV3Answer(Buffer.from(text), request, NOW_MS);

describe('scanMapV3Answer', () => {
  it.each([
    ['as the local service writes it', `{"status":"success","body":${BODY}}`],
    ['body before status', `{"body":${BODY},"status":"success"}`],
    [
      'the arrays in another order',
      `{"status":"success","body":{"phone_hash":[${PHONE_ITEMS.join(',')}],"phone":[],"email_hash":[${EMAIL_ITEMS.join(',')}],"email":[]}}`,
    ],
  ])('takes an answer %s, and gives the general reader’s answer', (_name, text) => {
    const scanned = scan(text);
    expect(scanned).toBeDefined();
    expect(scanned).toEqual(general(text, REQUEST));
    expect(scanned?.email_hash).toHaveLength(4);
    expect(scanned?.email_hash[1]).toEqual({ u: RAW_UID_33, p: b64('q1'), r: R });
  });

  it('takes an answer to an email-only request with every item mapped', () => {
    const request = { email_hash: sent(3, 'x') };
    const items = request.email_hash.map((_, i) => `{"u":"${b64(`v${i}`)}","p":null,"r":${R + i}}`);
    const text = `{"status":"success","body":{"email":[],"email_hash":[${items.join(',')}],"phone":[],"phone_hash":[]}}`;
    expect(scan(text, request)).toEqual(general(text, request));
    expect(scan(text, request)?.email_hash.map((item) => (item as { r: number }).r)).toEqual([R, R + 1, R + 2]);
  });

  // each of these the general reader takes (or refuses) itself; the scan must not answer for it
  const LEFT: [string, string][] = [
    ['whitespace', `{"status": "success", "body": ${BODY}}`],
    ['a message', `{"status":"success","message":"ok","body":${BODY}}`],
    ['an extra body key', BODY.replace('{"email":[]', '{"more":[],"email":[]')],
    ['a status other than success', `{"status":"unauthorized","body":${BODY}}`],
    ['no body', '{"status":"success"}'],
    ['an escape in a raw UID', `{"status":"success","body":${BODY.replace(b64('u0').slice(0, 2), '\\u0041')}}`],
    ['an escape in a key', `{"status":"success","body":${BODY.replace('"email_hash"', '"email\\u005fhash"')}}`],
    [
      'item keys in another order',
      `{"status":"success","body":${BODY.replace(`"p":null,"r":${R}`, `"r":${R},"p":null`)}}`,
    ],
    ['one item too few', `{"status":"success","body":${BODY.replace(',{"e":"invalid identifier"}', '')}}`],
    ['one item too many', `{"status":"success","body":${BODY.replace('"phone":[]', '"phone":[{"e":"optout"}]')}}`],
    ['an r with a fraction', `{"status":"success","body":${BODY.replace(`"r":${R}}`, `"r":${R}.5}`)}}`],
    ['an r with an exponent', `{"status":"success","body":${BODY.replace(`"r":${R}}`, '"r":1.9e9}')}}`],
    ['an r with a leading zero', `{"status":"success","body":${BODY.replace(`"r":${R}}`, `"r":0${R}}`)}}`],
    ['an r of 0', `{"status":"success","body":${BODY.replace(`"r":${R}}`, '"r":0}')}}`],
    ['an r in milliseconds', `{"status":"success","body":${BODY.replace(`"r":${R}}`, `"r":${R * 1000}}`)}}`],
    ['a negative r', `{"status":"success","body":${BODY.replace(`"r":${R}}`, `"r":-${R}}`)}}`],
    ['a short u', `{"status":"success","body":${BODY.replace(b64('u0'), 'c2hvcnQ=')}}`],
    ['a u outside base64', `{"status":"success","body":${BODY.replace(b64('u0'), `${b64('u0').slice(0, 40)}!!!!`)}}`],
    ['a u with = inside', `{"status":"success","body":${BODY.replace(b64('u0'), `=${b64('u0').slice(1)}`)}}`],
    ['a p that is not a raw UID', `{"status":"success","body":${BODY.replace(b64('q1'), 'not-a-raw-uid')}}`],
    ['no p', `{"status":"success","body":${BODY.replace('"p":null,', '')}}`],
    ['an unknown e', `{"status":"success","body":${BODY.replace('"e":"optout"', '"e":"unknown"')}}`],
    ['both u and e', `{"status":"success","body":${BODY.replace(`"r":${R}}`, `"r":${R},"e":"optout"}`)}}`],
    ['a non-ASCII byte', `{"status":"success","body":${BODY.replace(b64('u0').slice(0, 1), 'é')}}`],
    ['text after the end', `{"status":"success","body":${BODY}}x`],
    ['a cut-off text', `{"status":"success","body":${BODY}`.slice(0, 200)],
    ['status twice', `{"status":"success","status":"success","body":${BODY}}`],
    ['an array twice', BODY.replace('"phone":[]', '"email":[]')],
  ];

  it.each(LEFT)('leaves an answer with %s to the general reader', (_name, text) => {
    expect(scan(text)).toBeUndefined();
  });

  // A raw UID pinned on the wrong row, or one the contract refuses, is the worst answer this tool can give: the
  // scan may give up on any text, but what it does take must be exactly what the general reader takes.
  it('never takes a damaged answer the general reader would read otherwise (seeded byte mutations)', () => {
    const base = `{"status":"success","body":${BODY}}`;
    const alphabet = '{}[]":,.-+=\\/ 0123456789eEnulAZaz\u00e9';
    let seed = 0x2f6e2b1;
    const next = (n: number) => {
      seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
      return seed % n;
    };
    let taken = 0;
    for (let round = 0; round < 20_000; round++) {
      let text = base;
      for (let edits = 1 + next(3); edits > 0; edits--) {
        const at = next(text.length);
        const c = alphabet[next(alphabet.length)];
        const kind = next(3);
        text =
          kind === 0
            ? text.slice(0, at) + c + text.slice(at + 1)
            : kind === 1
              ? text.slice(0, at) + text.slice(at + 1)
              : text.slice(0, at) + c + text.slice(at);
      }
      const scanned = scan(text);
      if (scanned === undefined) continue;
      taken++;
      expect(() => general(text, REQUEST), text).not.toThrow();
      expect(scanned, text).toEqual(general(text, REQUEST));
    }
    // some mutations keep the answer well formed (a raw UID's letter, a digit of r): those must be taken
    expect(taken).toBeGreaterThan(100);
  });

  // The raw UIDs are checked several bytes at a time: every byte value at every position of each raw UID of an
  // answer (one with `=` padding, one without, a p) must get the general reader's verdict.
  it('gives the general reader’s verdict for any byte at any place of a raw UID', () => {
    const base = Buffer.from(`{"status":"success","body":${BODY}}`);
    const generalOf = (bytes: Buffer) =>
      readMapV3Body('t', readResponseJson('t', bytes, ['success']).body, REQUEST, NOW_MS);
    let taken = 0;
    let refused = 0;
    for (const uid of [b64('u0'), RAW_UID_33, b64('q1')]) {
      const start = base.indexOf(`"${uid}"`) + 1;
      expect(start).toBeGreaterThan(0);
      for (let at = start; at < start + uid.length; at++) {
        for (let byte = 0; byte < 256; byte++) {
          const bytes = Buffer.from(base);
          bytes[at] = byte;
          const scanned = scanMapV3Answer(bytes, REQUEST, NOW_MS);
          let read: ReturnType<typeof generalOf> | undefined;
          try {
            read = generalOf(bytes);
          } catch {
            read = undefined;
          }
          if (scanned === undefined) {
            if (read === undefined) refused++;
            continue;
          }
          taken++;
          expect(read, `byte ${byte} at ${at}`).toBeDefined();
          expect(scanned, `byte ${byte} at ${at}`).toEqual(read);
        }
      }
    }
    // base64's 64 letters everywhere (and `=` where padding may stand) are taken; the rest are refused by both
    expect(taken).toBeGreaterThan(3 * 44 * 60);
    expect(refused).toBeGreaterThan(3 * 44 * 150);
  });
});
