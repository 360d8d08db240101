/** The run's connection to the identity service: the client, the embedded service it may need, the concurrency. */
import {
  createServiceClient,
  describeProxyRoute,
  type ClientOptions,
  type ProxySettings,
  type ServiceClient,
} from '../../client/index.js';
import { AdaptiveConcurrency } from './adaptive-limiter.js';

export type { ClientStats, ServiceClient } from '../../client/index.js';

/** Where a run sends its requests, and with what: the part of the resolved configuration a run needs. */
export interface ServiceTarget {
  baseUrl: string;
  apiKey?: string | undefined;
  clientSecret?: string | undefined;
  timeoutMs?: number | undefined;
  maxAttempts?: number | undefined;
  proxy?: ProxySettings | undefined;
  /** The public service's limits apply (20 map requests in flight). */
  isPublic: boolean;
  /** What a state file records of the environment (base URL and identity scope), so two are never mixed. */
  envFingerprint: string;
  /** The environment's name, for the runs table. */
  envName: string;
  /** --env local: the service runs in this process while the run does (see `start`). */
  isLocal: boolean;
  /** --env local: starts the embedded service and gives the target pointed at it. */
  start?: (() => Promise<StartedService>) | undefined;
}

/** An embedded service while it runs. */
export interface StartedService {
  target: ServiceTarget;
  close(): Promise<void>;
}

/** A client for the target's service; for --env local the embedded service runs until close(). */
export interface ServiceConnection {
  /** The target the client uses: for --env local, the embedded service. */
  target: ServiceTarget;
  client: ServiceClient;
  close(): Promise<void>;
}

/** What a connection may be tuned with; `client` is a test's own client (not closed here). */
export type ConnectionTuning = Pick<ClientOptions, 'connections' | 'onRetry' | 'maxAttempts'> & {
  client?: ServiceClient | undefined;
};

/** Starts the embedded service for --env local, then a client for the target's service (the one builder). */
export async function connect(target: ServiceTarget, tuning: ConnectionTuning = {}): Promise<ServiceConnection> {
  const embedded = target.start !== undefined ? await target.start() : undefined;
  const reached = embedded?.target ?? target;
  const { client: injected, ...clientTuning } = tuning;
  const client =
    injected ??
    createServiceClient({
      baseUrl: reached.baseUrl,
      ...(reached.apiKey !== undefined ? { apiKey: reached.apiKey } : {}),
      ...(reached.clientSecret !== undefined ? { clientSecret: reached.clientSecret } : {}),
      ...(reached.timeoutMs !== undefined ? { requestTimeoutMs: reached.timeoutMs } : {}),
      ...(reached.proxy !== undefined ? { proxy: reached.proxy } : {}),
      ...(reached.maxAttempts !== undefined ? { maxAttempts: reached.maxAttempts } : {}),
      ...clientTuning,
    });
  return {
    target: reached,
    client,
    close: async () => {
      if (injected === undefined) await client.close();
      await embedded?.close();
    },
  };
}

/** The public service allows 20 map requests in flight; a private operator or the local service may take more. */
export const PUBLIC_MAX_CONCURRENCY = 20;

export function chooseConcurrency(
  requested: number | undefined,
  target: Pick<ServiceTarget, 'isPublic'>,
  say: (line: string) => void,
): number {
  const wanted = requested ?? PUBLIC_MAX_CONCURRENCY;
  if (target.isPublic && wanted > PUBLIC_MAX_CONCURRENCY) {
    say(
      `--concurrency ${wanted} lowered to ${PUBLIC_MAX_CONCURRENCY}: the public service allows ${PUBLIC_MAX_CONCURRENCY} map requests in flight ` +
        '(a private operator or --base-url allows more)',
    );
    return PUBLIC_MAX_CONCURRENCY;
  }
  return wanted;
}

/** A connection for map requests: one socket per request in flight, and a 429 lowers the concurrency for a while. */
export interface MapConnection extends ServiceConnection {
  limiter: AdaptiveConcurrency;
}

export async function connectForMapping(
  target: ServiceTarget,
  concurrency: number,
  tuning: Pick<ConnectionTuning, 'maxAttempts' | 'client'> = {},
): Promise<MapConnection> {
  const limiter = new AdaptiveConcurrency({ max: concurrency });
  const connection = await connect(target, { connections: concurrency, onRetry: limiter.onRetry, ...tuning });
  return { ...connection, limiter };
}

/** The proxy a client goes through, in a line for the user; undefined for a direct connection. */
export function proxyLine(client: Pick<ServiceClient, 'proxyRoute'>): string | undefined {
  const route = client.proxyRoute;
  return route?.kind === 'proxy' ? describeProxyRoute(route) : undefined;
}
