// The parts of undici the transport uses (Pool, ProxyAgent and the request API), loaded without the package's index.
//
// The index also loads fetch, WebSocket, EventSource, the mocks and the caches: most of undici's start-up cost,
// paid by every command that sends anything. The paths below are undici's own files at the version package.json
// pins; a version that moves them fails the client's tests at once (test/client/undici-parts.test.ts).
import { createRequire } from 'node:module';
import type { Pool as UndiciPool, ProxyAgent as UndiciProxyAgent } from 'undici';

const require = createRequire(import.meta.url);

const dispatcher = require('undici/lib/dispatcher/dispatcher') as { prototype: Record<string, unknown> };
// The index attaches its request API (request, stream, pipeline, upgrade, connect: the proxy agent's tunnels use
// connect) to the class every pool and agent extends; this does the same. Loading the index as well attaches the
// same functions again.
if (typeof dispatcher.prototype.request !== 'function') Object.assign(dispatcher.prototype, require('undici/lib/api'));

export const Pool = require('undici/lib/dispatcher/pool') as typeof UndiciPool;
export const ProxyAgent = require('undici/lib/dispatcher/proxy-agent') as typeof UndiciProxyAgent;
