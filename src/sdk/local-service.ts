/** startLocalService: the local identity service of `uid2-batch serve`, started in the caller's process. */
import { ServiceSetupError, startService, type ServiceOptions, type ServiceStatsSnapshot } from '../service/index.js';
import { ArgumentError } from './errors.js';

export type {
  FaultOptions,
  IdentityScope,
  Role,
  ServiceOptions,
  ServiceStatsSnapshot,
  TokenLifetimes,
} from '../service/index.js';

/**
 * How the local service starts; every field is optional. The default seed is the CLI's, so raw UIDs here are the
 * ones `uid2-batch map --env local` gives for the same input.
 */
export type LocalServiceOptions = ServiceOptions;

/** A running local service: give `url`, `apiKey` and `clientSecret` to an IdentityClient, and stop it when done. */
export interface LocalServiceHandle {
  /** Base URL on loopback, e.g. `http://127.0.0.1:PORT`: plain http, allowed because it is this machine. */
  readonly url: string;
  /** The one API key it accepts. */
  readonly apiKey: string;
  /** The client secret paired with that key (base64 of 32 bytes). */
  readonly clientSecret: string;
  readonly port: number;
  /** Stops listening and ends every connection; calling it again waits for the same stop. */
  stop(): Promise<void>;
  /** Requests and identifiers it has received per path, for tests that count what was sent. */
  stats(): ServiceStatsSnapshot;
}

/**
 * Starts the local identity service on a free loopback port (the same service as `uid2-batch serve`), with its
 * test identities (`optout@example.com` always opted out, `validate@example.com` for validateToken...) and fresh
 * credentials. Each call starts an independent service, so tests may run several at once.
 *
 * ```ts
 * const svc = await startLocalService();
 * const client = new IdentityClient({ baseUrl: svc.url, apiKey: svc.apiKey, clientSecret: svc.clientSecret });
 * try {
 *   await client.generateToken({ email: 'user@example.com' });
 * } finally {
 *   await client.close();
 *   await svc.stop();
 * }
 * ```
 */
export async function startLocalService(options: LocalServiceOptions = {}): Promise<LocalServiceHandle> {
  if (typeof options !== 'object' || options === null)
    throw new ArgumentError('startLocalService options must be an object, such as { port: 0 }');
  let service: Awaited<ReturnType<typeof startService>>;
  try {
    service = await startService(options);
  } catch (err) {
    if (err instanceof ServiceSetupError) throw new ArgumentError(err.message, { cause: err });
    throw err;
  }
  return {
    url: service.url,
    apiKey: service.apiKey,
    clientSecret: service.clientSecret,
    port: service.port,
    stop: () => service.close(),
    stats: () => service.stats(),
  };
}
