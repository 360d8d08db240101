/** The proxy setting of a run: --proxy URL (or `none`) over the proxy variables of the environment. */
import {
  describeProxyRoute,
  explicitProxySettings,
  NO_PROXY_SETTINGS,
  proxyRouteFor,
  proxySettingsFromEnv,
  ProxySettingError,
  type ProxySettings,
} from '../client/proxy.js';
import { ConfigError } from './errors.js';

/** `--proxy none` sends every request straight to the service, whatever the environment says. */
export const PROXY_OFF = 'none';

/**
 * flag > environment: `--proxy URL` carries every request (NO_PROXY still exempts its hosts), `--proxy none` turns
 * proxies off, and without the flag HTTPS_PROXY / HTTP_PROXY / NO_PROXY (or their lowercase forms) apply.
 * Throws ConfigError naming the setting; the message never holds the proxy password.
 */
export function resolveProxy(flag: string | undefined, environ: NodeJS.ProcessEnv): ProxySettings {
  try {
    if (flag === undefined) return proxySettingsFromEnv(environ);
    if (flag.trim().toLowerCase() === PROXY_OFF) return NO_PROXY_SETTINGS;
    return explicitProxySettings(flag, '--proxy', environ);
  } catch (err) {
    if (err instanceof ProxySettingError) throw new ConfigError(err.message);
    throw err;
  }
}

/** For `doctor`: the proxy the requests to `baseUrl` go through (user and password hidden) and its source, or why none. */
export function describeProxyFor(settings: ProxySettings, baseUrl: string): string {
  return describeProxyRoute(proxyRouteFor(baseUrl, settings));
}
