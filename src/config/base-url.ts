import { ConfigError } from './errors.js';

export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, '');
  return host === 'localhost' || host.endsWith('.localhost') || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

/**
 * Checks a base URL and returns it without a trailing slash. Plain http is allowed only to this machine:
 * over a network it would carry the API key in clear and the envelope's metadata to anyone on the path.
 * Messages never repeat a URL that carries credentials.
 */
export function checkBaseUrl(raw: string, from: string, insecureHttp: boolean): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new ConfigError(`${from} '${raw}' is not a URL: write it like https://operator-integ.uidapi.com`);
  }
  if (url.username || url.password) {
    throw new ConfigError(
      `${from} must not carry a user name or password: give the API key with UID2_API_KEY or --api-key-file`,
    );
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ConfigError(`${from} must start with https:// (got ${url.protocol}//)`);
  }
  if (url.protocol === 'http:' && !insecureHttp && !isLoopbackHost(url.hostname)) {
    throw new ConfigError(
      `${from} uses plain http:// to ${url.host}, which would send the API key unencrypted: use https://, or pass --insecure-http if that network is trusted`,
    );
  }
  if (url.search || url.hash) {
    throw new ConfigError(
      `${from} must not have a query or fragment: give only the scheme, host and port, like https://operator-integ.uidapi.com`,
    );
  }
  const path = url.pathname.replace(/\/+$/, '');
  if (/\/v[23]$/.test(path)) {
    throw new ConfigError(
      `${from} must not end with the API version (${path.slice(path.lastIndexOf('/'))}): use ${url.origin}${path.replace(/\/v[23]$/, '')}`,
    );
  }
  return url.origin + path;
}
