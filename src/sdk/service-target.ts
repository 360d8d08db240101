/** Where the library's calls go and with what: an environment or a base URL, credentials, proxy and timeouts. */
import {
  checkBaseUrl,
  ConfigError,
  environmentForUrl,
  environmentNames,
  findEnvironment,
  isLoopbackHost,
  resolveProxy,
  type ProxySettings,
} from '../config/index.js';
import { decodeKey } from '../protocol/index.js';
import { ArgumentError } from './errors.js';

/** How to reach the service: the same choices as the CLI's connection flags. */
export interface ServiceTargetOptions {
  /**
   * A named environment: `integ` (the default when no baseUrl is given), `prod`, `prod-use`, `prod-usw`,
   * `prod-au`, `prod-jp`, `prod-sg`, `euid-integ` or `euid-prod`. For the local service, give its `url` as baseUrl.
   */
  env?: string;
  /** The service's URL instead of an environment, e.g. a private operator or `startLocalService().url`. */
  baseUrl?: string;
  /**
   * Allows a plain `http://` baseUrl to another machine, which sends the API key unencrypted. Plain http to this
   * machine (localhost, 127.0.0.1, ::1) needs no opt-in.
   */
  insecureHttp?: boolean;
  /** Needed by every call except refreshToken. */
  apiKey?: string;
  /** Base64 of 32 bytes; needed by every call except refreshToken. */
  clientSecret?: string;
  /**
   * A proxy URL for every request (`http://proxy.example.com:3128`), or `'none'`. Without it the proxy variables of
   * the process apply as in the CLI (HTTPS_PROXY, HTTP_PROXY, NO_PROXY; never for this machine).
   */
  proxy?: string;
  /** Per attempt, whole: connect, headers and the last byte of the answer (default 60,000). */
  timeoutMs?: number;
  /** Attempts per request, the first included (default 6): 429, 5xx and network failures are retried. */
  maxAttempts?: number;
}

export interface ServiceTarget {
  baseUrl: string;
  /** The public service allows 20 map requests in flight and opt-out checks one at a time. */
  isPublic: boolean;
  apiKey: string | undefined;
  clientSecret: string | undefined;
  proxy: ProxySettings;
  timeoutMs: number | undefined;
  maxAttempts: number | undefined;
}

function positiveWhole(value: unknown, what: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1)
    throw new ArgumentError(`${what} must be a whole number of at least 1, got ${String(value)}`);
  return value;
}

function optionalText(value: unknown, what: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new ArgumentError(`${what} must be a string, got a ${typeof value}`);
  return value;
}

/** Checks the options once, so that every call of the client starts from a target known to be right. */
export function resolveServiceTarget(
  options: ServiceTargetOptions,
  what: string,
  environ: NodeJS.ProcessEnv = process.env,
): ServiceTarget {
  if (typeof options !== 'object' || options === null)
    throw new ArgumentError(`${what} must be an object such as { env: 'integ', apiKey, clientSecret }`);
  const env = optionalText(options.env, `${what}.env`);
  const rawUrl = optionalText(options.baseUrl, `${what}.baseUrl`);
  if (env !== undefined && rawUrl !== undefined) throw new ArgumentError(`${what}: give env or baseUrl, not both`);
  let baseUrl: string;
  let isPublic: boolean;
  try {
    if (rawUrl !== undefined) {
      const url = URL.canParse(rawUrl.trim()) ? new URL(rawUrl.trim()) : undefined;
      if (url?.protocol === 'http:' && options.insecureHttp !== true && !isLoopbackHost(url.hostname)) {
        throw new ArgumentError(
          `${what}.baseUrl uses plain http:// to ${url.host}, which would send the API key unencrypted: use https://, ` +
            `or set insecureHttp: true if that network is trusted`,
        );
      }
      baseUrl = checkBaseUrl(rawUrl, `${what}.baseUrl`, true);
      isPublic = environmentForUrl(new URL(baseUrl).origin)?.isPublic ?? false;
    } else {
      const found = findEnvironment(env ?? 'integ', `${what}.env`);
      if (found.name === 'local') {
        throw new ArgumentError(
          `${what}.env 'local' is the local service: start it with startLocalService() and give its url as baseUrl`,
        );
      }
      baseUrl = found.baseUrl;
      isPublic = found.isPublic;
    }
  } catch (err) {
    if (err instanceof ConfigError) {
      const known = environmentNames().filter((n) => n !== 'local');
      const message = err.message.includes('unknown environment')
        ? `unknown ${what}.env '${env}': choose one of ${known.join(', ')}, or give baseUrl`
        : err.message;
      throw new ArgumentError(message, { cause: err });
    }
    throw err;
  }
  const apiKey = optionalText(options.apiKey, `${what}.apiKey`);
  const clientSecret = optionalText(options.clientSecret, `${what}.clientSecret`);
  if (clientSecret !== undefined) {
    try {
      decodeKey(clientSecret);
    } catch {
      throw new ArgumentError(
        `${what}.clientSecret is not a base64 encoding of 32 bytes (44 characters): give the secret issued with the API key`,
      );
    }
  }
  let proxy: ProxySettings;
  try {
    proxy = resolveProxy(optionalText(options.proxy, `${what}.proxy`), environ);
  } catch (err) {
    if (err instanceof ConfigError)
      throw new ArgumentError(err.message.replaceAll('--proxy', `${what}.proxy`), { cause: err });
    throw err;
  }
  return {
    baseUrl,
    isPublic,
    apiKey: apiKey || undefined,
    clientSecret: clientSecret || undefined,
    proxy,
    timeoutMs: positiveWhole(options.timeoutMs, `${what}.timeoutMs`),
    maxAttempts: positiveWhole(options.maxAttempts, `${what}.maxAttempts`),
  };
}

/** Throws when a call needs the credentials the client was not given. */
export function requireCredentials(target: ServiceTarget, call: string): void {
  const missing = [
    ...(target.apiKey === undefined ? ['apiKey'] : []),
    ...(target.clientSecret === undefined ? ['clientSecret'] : []),
  ];
  if (missing.length > 0) {
    throw new ArgumentError(
      `${call} needs an API key and a client secret: give ${missing.join(' and ')} to new IdentityClient(...)`,
    );
  }
}
