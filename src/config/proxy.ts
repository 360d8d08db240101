/** The proxy setting of a run: --proxy URL (or `none`) over HTTPS_PROXY / HTTP_PROXY / NO_PROXY of the environment. */
import { ConfigError } from './errors.js';
import type { ProxySettings } from './types.js';

/** `--proxy none` sends every request straight to the service, whatever the environment says. */
export const PROXY_OFF = 'none';

/** Value of the first variable of `names` that is set and not blank, lowercase first as curl and undici read them. */
function firstSet(environ: NodeJS.ProcessEnv, names: readonly string[]): { value: string; from: string } | undefined {
  for (const name of names) {
    const value = environ[name]?.trim();
    if (value) return { value, from: name };
  }
  return undefined;
}

/** A text that may be a URL with user:password, as it may be printed. */
function redacted(text: string): string {
  const hidden = text.replace(/\/\/[^/]*@/, '//***@');
  return hidden.length > 80 ? `${hidden.slice(0, 77)}...` : hidden;
}

/**
 * Reads a proxy address the way proxy variables are commonly written: `http://host:port`, `https://host:port`, or a bare
 * `host:port` (taken as http://). Throws ConfigError naming `from`; the message never holds the password.
 */
export function parseProxyUrl(raw: string, from: string): string {
  const text = raw.trim();
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new ConfigError(
      `${from} is not a proxy URL: "${redacted(text)}" (write it like http://proxy.example.com:3128)`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(
      `${from} must be an http:// or https:// proxy, got ${url.protocol}// (SOCKS proxies are not supported)`,
    );
  }
  if (url.hostname === '') {
    throw new ConfigError(
      `${from} names no proxy host: "${redacted(text)}" (write it like http://proxy.example.com:3128)`,
    );
  }
  if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) {
    const shown = `${url.protocol}//${url.username || url.password ? '***@' : ''}${url.host}`;
    throw new ConfigError(
      `${from} must be only scheme, host and port, like http://proxy.example.com:3128: ${shown} has a path or query`,
    );
  }
  return url.href;
}

/**
 * flag > environment:
 * - `--proxy URL` carries every request, loopback included (NO_PROXY of the environment still exempts its hosts);
 * - `--proxy none` turns proxies off;
 * - without the flag, HTTP_PROXY (http:// services), HTTPS_PROXY (https:// services, else HTTP_PROXY) and NO_PROXY
 *   apply, lowercase forms first; the client never uses them for loopback services.
 */
export function resolveProxy(flag: string | undefined, environ: NodeJS.ProcessEnv): ProxySettings {
  const noProxy = firstSet(environ, ['no_proxy', 'NO_PROXY']);
  const exempt = noProxy ? { noProxy } : {};
  if (flag !== undefined) {
    if (flag.trim().toLowerCase() === PROXY_OFF) return { mode: 'off', offBy: `--proxy ${PROXY_OFF}` };
    const address = { url: parseProxyUrl(flag, '--proxy'), from: '--proxy' };
    return { mode: 'flag', http: address, https: address, ...exempt };
  }
  const http = firstSet(environ, ['http_proxy', 'HTTP_PROXY']);
  const https = firstSet(environ, ['https_proxy', 'HTTPS_PROXY']);
  return {
    mode: 'env',
    ...(http ? { http: { url: parseProxyUrl(http.value, http.from), from: http.from } } : {}),
    ...(https ? { https: { url: parseProxyUrl(https.value, https.from), from: https.from } } : {}),
    ...exempt,
  };
}
