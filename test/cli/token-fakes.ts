import { PassThrough, Readable } from 'node:stream';
import type { ServiceClient } from '../../src/client/index.js';
import type { ResolvedConfig } from '../../src/config/index.js';
import { serviceTargetOf } from '../../src/cli/shared/command-context.js';
import type { Connect } from '../../src/cli/token/token-io.js';
import type {
  TokenGenerateRequest,
  TokenGenerateResult,
  TokenIdentity,
  TokenResult,
  TokenValidateRequest,
} from '../../src/protocol/index.js';

/** A ServiceClient whose token methods are scripted per test; every call is recorded. */
export interface FakeClient extends ServiceClient {
  calls: { method: string; args: unknown[] }[];
}

export interface Script {
  generate?: (input: TokenGenerateRequest) => Promise<TokenGenerateResult> | TokenGenerateResult;
  refresh?: (token: string, key: string) => Promise<TokenResult> | TokenResult;
  validate?: (req: TokenValidateRequest) => Promise<boolean> | boolean;
  mapV3?: ServiceClient['mapV3'];
  optoutStatus?: ServiceClient['optoutStatus'];
  lastServerTime?: { serverMs: number; localMs: number };
}

export function fakeClient(script: Script): FakeClient {
  const calls: FakeClient['calls'] = [];
  const unexpected = (name: string) => async () => {
    throw new Error(`unexpected call ${name}`);
  };
  const client: FakeClient = {
    calls,
    stats: { requests: 0, retries: 0, http429: 0, http5xx: 0, networkErrors: 0 },
    get lastServerTime() {
      return script.lastServerTime;
    },
    mapV3: async (req, opts) => {
      calls.push({ method: 'mapV3', args: [req] });
      return (script.mapV3 ?? unexpected('mapV3'))(req, opts);
    },
    proxyRoute: { kind: 'direct', why: 'a fake client sends nothing' },
    mapV2: unexpected('mapV2'),
    buckets: unexpected('buckets'),
    optoutStatus: async (ids, opts) => {
      calls.push({ method: 'optoutStatus', args: [ids] });
      return (script.optoutStatus ?? unexpected('optoutStatus'))(ids, opts);
    },
    tokenGenerate: async (input) => {
      calls.push({ method: 'tokenGenerate', args: [input] });
      client.stats.requests++;
      if (!script.generate) throw new Error('unexpected call tokenGenerate');
      return script.generate(input);
    },
    tokenRefresh: async (token, key) => {
      calls.push({ method: 'tokenRefresh', args: [token, key] });
      client.stats.requests++;
      if (!script.refresh) throw new Error('unexpected call tokenRefresh');
      return script.refresh(token, key);
    },
    tokenValidate: async (req) => {
      calls.push({ method: 'tokenValidate', args: [req] });
      client.stats.requests++;
      if (!script.validate) throw new Error('unexpected call tokenValidate');
      return script.validate(req);
    },
    healthcheck: unexpected('healthcheck'),
    close: async () => {},
  };
  return client;
}

export const CONFIG: ResolvedConfig = {
  env: { name: 'integ', baseUrl: 'https://operator-integ.uidapi.com', scope: 'UID2', isPublic: true },
  isLocal: false,
  apiKey: 'UID2-C-L-1-abc',
  clientSecret: Buffer.alloc(32, 7).toString('base64'),
  apiKeySource: 'env',
  clientSecretSource: 'env',
  apiKeyOrigin: 'UID2_API_KEY',
  clientSecretOrigin: 'UID2_CLIENT_SECRET',
  envSource: 'flag',
};

export function connectTo(
  client: ServiceClient,
): Connect & { requests: { apiKey: boolean; clientSecret: boolean }[]; closed: number } {
  const requests: { apiKey: boolean; clientSecret: boolean }[] = [];
  const connect = Object.assign(
    async (require: { apiKey: boolean; clientSecret: boolean }) => {
      requests.push(require);
      return {
        client,
        target: serviceTargetOf(CONFIG),
        close: async () => {
          connect.closed++;
        },
      };
    },
    { requests, closed: 0 },
  );
  return connect;
}

export interface CapturedIo {
  stdout: PassThrough;
  stderr: PassThrough;
  stdin: Readable & { isTTY?: boolean };
  now(): number;
  out(): string;
  err(): string;
}

export function captureIo(stdinText = '', nowMs = Date.now(), isTTY = false): CapturedIo {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const outChunks: Buffer[] = [];
  const errChunks: Buffer[] = [];
  stdout.on('data', (c: Buffer) => outChunks.push(c));
  stderr.on('data', (c: Buffer) => errChunks.push(c));
  const stdin = Object.assign(Readable.from([Buffer.from(stdinText)]), { isTTY });
  return {
    stdout,
    stderr,
    stdin,
    now: () => nowMs,
    out: () => Buffer.concat(outChunks).toString('utf8'),
    err: () => Buffer.concat(errChunks).toString('utf8'),
  };
}

let serial = 0;
/** A made-up identity; `n` changes every field so the tests can tell generations apart. */
export function identity(nowMs: number, n = ++serial): TokenIdentity {
  return {
    advertising_token: `A4AAAA-token-${n}`,
    refresh_token: `AA${String(n).padStart(386, 'r')}`,
    identity_expires: nowMs + 3_600_000,
    refresh_from: nowMs + 900_000,
    refresh_expires: nowMs + 86_400_000,
    refresh_response_key: Buffer.alloc(32, n % 256).toString('base64'),
  };
}
