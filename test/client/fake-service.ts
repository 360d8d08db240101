import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  decodeStrictBase64,
  decryptRequest,
  encryptRefreshResponse,
  encryptResponse,
  isBinaryContentType,
  PATHS,
} from '../../src/protocol/index.js';

/**
 * A few-line stand-in for the identity service, on 127.0.0.1:0, built only from src/protocol (the real local service
 * lives in src/service and the client must not lean on it). It records every call as the wire carried it, and plays
 * scripted replies first, then a small default behaviour per endpoint.
 */

export const OPTOUT_EMAIL = 'optout@example.com';
export const REFRESH_OPTOUT_EMAIL = 'refresh-optout@example.com';
export const VALIDATE_EMAIL = 'validate@example.com';

export interface RecordedCall {
  path: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
  /** Encrypted endpoints, when the envelope opened with the test secret. */
  envelope?: { timestampMs: number; nonce: Buffer; payload: Record<string, unknown>; binary: boolean };
}

export type Reply =
  /** 200, sealed with the client secret in the request's mode; `nonce` overrides the echo. */
  | { kind: 'answer'; json: unknown; nonce?: Buffer; serverMs?: number }
  | { kind: 'status'; httpStatus: number; body?: string; headers?: Record<string, string> }
  /** Closes the socket without an answer. */
  | { kind: 'destroy' }
  /** Never answers (until the server closes). */
  | { kind: 'hang' };

export interface FakeService {
  url: string;
  apiKey: string;
  clientSecret: string;
  calls: RecordedCall[];
  /** Replies for the next calls, in order; once used up, the default behaviour answers. */
  script(...replies: Reply[]): void;
  /** Marks a refresh_token as expired (expired_token on refresh). */
  expire(refreshToken: string): void;
  close(): Promise<void>;
}

interface IssuedToken {
  responseKey: Buffer;
  optoutOnRefresh: boolean;
  expired: boolean;
}

export async function startFakeService(): Promise<FakeService> {
  const apiKey = 'UID2-C-L-999-test.key+value=';
  const secret = randomBytes(32);
  const calls: RecordedCall[] = [];
  const scripted: Reply[] = [];
  const issued = new Map<string, IssuedToken>();
  let tokenCounter = 0;

  function issueIdentity(optoutOnRefresh: boolean): Record<string, unknown> {
    tokenCounter++;
    // a real refresh_token is an opaque 388-char wrapper; the client never looks inside, so any unique text will do
    const refreshToken = `RT${tokenCounter}-${randomBytes(12).toString('base64')}`;
    const responseKey = randomBytes(32);
    issued.set(refreshToken, { responseKey, optoutOnRefresh, expired: false });
    const now = Date.now();
    return {
      advertising_token: `A4AT${tokenCounter}`,
      refresh_token: refreshToken,
      identity_expires: now + 3_600_000,
      refresh_expires: now + 86_400_000,
      refresh_from: now + 900_000,
      refresh_response_key: responseKey.toString('base64'),
    };
  }

  function rawUid(value: string): string {
    return createHash('sha256').update(`salt:${value}`).digest('base64');
  }

  function defaultReply(call: RecordedCall): Reply {
    const payload = call.envelope?.payload ?? {};
    switch (call.path) {
      case PATHS.mapV3: {
        const body: Record<string, unknown[]> = {};
        for (const kind of ['email', 'email_hash', 'phone', 'phone_hash']) {
          const values = (payload[kind] as string[] | undefined) ?? [];
          body[kind] = values.map((v) =>
            v === OPTOUT_EMAIL
              ? { e: 'optout' }
              : v === ''
                ? { e: 'invalid identifier' }
                : { u: rawUid(v), p: null, r: 1_900_000_000 },
          );
        }
        return { kind: 'answer', json: { status: 'success', body } };
      }
      case PATHS.mapV2: {
        const [kind, values] = Object.entries(payload)[0] as [string, string[]];
        const mapped = values
          .filter((v) => v !== OPTOUT_EMAIL)
          .map((v) => ({ identifier: v, advertising_id: rawUid(v), bucket_id: `b-${kind}` }));
        const unmapped = values.filter((v) => v === OPTOUT_EMAIL).map((v) => ({ identifier: v, reason: 'optout' }));
        return {
          kind: 'answer',
          json: { status: 'success', body: unmapped.length ? { mapped, unmapped } : { mapped } },
        };
      }
      case PATHS.buckets:
        return {
          kind: 'answer',
          json: {
            status: 'success',
            body: [
              { bucket_id: 'a30od4mNRd', last_updated: `${String(payload.since_timestamp).slice(0, 10)}T22:52:03.109` },
            ],
          },
        };
      case PATHS.optoutStatus: {
        const ids = payload.advertising_ids as string[];
        const opted = ids
          .filter((id) => id.startsWith('OPT'))
          .map((id) => ({ advertising_id: id, opted_out_since: 1_700_000_000_000 }));
        return { kind: 'answer', json: { status: 'success', body: { opted_out: opted } } };
      }
      case PATHS.tokenGenerate: {
        if (payload.email === OPTOUT_EMAIL) return { kind: 'answer', json: { status: 'optout' } };
        return {
          kind: 'answer',
          json: { status: 'success', body: issueIdentity(payload.email === REFRESH_OPTOUT_EMAIL) },
        };
      }
      case PATHS.tokenValidate:
        return { kind: 'answer', json: { status: 'success', body: payload.email === VALIDATE_EMAIL } };
      default:
        return { kind: 'status', httpStatus: 404, body: 'Not Found' };
    }
  }

  function sendJson(res: ServerResponse, httpStatus: number, json: unknown): void {
    res.writeHead(httpStatus, { 'content-type': 'application/json' }).end(JSON.stringify(json));
  }

  function answerRefresh(call: RecordedCall, res: ServerResponse): void {
    const authenticated = call.headers.authorization === `Bearer ${apiKey}`;
    const token = issued.get(call.raw.toString('utf8'));
    if (!token || token.expired) {
      if (!authenticated) sendJson(res, 400, { status: 'error', message: 'Error refreshing token' });
      else if (!token) sendJson(res, 400, { status: 'invalid_token', message: 'Invalid Token presented' });
      else sendJson(res, 400, { status: 'expired_token', message: 'Expired Token presented' });
      return;
    }
    const json = token.optoutOnRefresh ? { status: 'optout' } : { status: 'success', body: issueIdentity(false) };
    const sealed = encryptRefreshResponse(token.responseKey, JSON.stringify(json));
    res.writeHead(200, { 'content-type': 'text/plain' }).end(sealed.toString('base64'));
  }

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '';
      const call: RecordedCall = { path, headers: req.headers, raw: Buffer.concat(chunks) };
      const binary = isBinaryContentType(req.headers['content-type']);
      if (path !== PATHS.tokenRefresh) {
        const bytes = binary ? call.raw : decodeStrictBase64(call.raw.toString('latin1'));
        try {
          if (bytes) {
            const opened = decryptRequest(secret, bytes);
            call.envelope = {
              timestampMs: opened.timestampMs,
              nonce: opened.nonce,
              payload: JSON.parse(opened.json.toString('utf8')),
              binary,
            };
          }
        } catch {
          // left without an envelope: the reply below says so
        }
      }
      calls.push(call);
      const reply = scripted.shift();
      if (reply?.kind === 'destroy') return void req.socket.destroy();
      if (reply?.kind === 'hang') return;
      if (reply?.kind === 'status') {
        return void res
          .writeHead(reply.httpStatus, { 'content-type': 'application/json', ...reply.headers })
          .end(reply.body ?? '');
      }
      if (!reply && path === PATHS.tokenRefresh) return answerRefresh(call, res);
      if (path !== PATHS.tokenRefresh && req.headers.authorization !== `Bearer ${apiKey}`) {
        return sendJson(res, 401, { status: 'unauthorized' });
      }
      if (!call.envelope)
        return sendJson(res, 400, {
          status: 'client_error',
          message: 'Invalid body: Check encryption key (ClientSecret).',
        });
      const answer = reply ?? defaultReply(call);
      if (answer.kind !== 'answer') return void res.writeHead(500).end();
      const sealed = encryptResponse(secret, answer.nonce ?? call.envelope.nonce, JSON.stringify(answer.json), {
        nowMs: answer.serverMs,
      });
      if (binary) res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(sealed);
      else res.writeHead(200, { 'content-type': 'text/plain' }).end(sealed.toString('base64'));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    apiKey,
    clientSecret: secret.toString('base64'),
    calls,
    script: (...replies) => void scripted.push(...replies),
    expire: (refreshToken) => {
      const token = issued.get(refreshToken);
      if (token) token.expired = true;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}
