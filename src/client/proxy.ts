/** Which proxy, if any, carries the requests to a service URL, and how to show it without its credentials. */

/** A proxy address and the setting it came from ("--proxy", "HTTPS_PROXY", "https_proxy"...). */
export interface ProxyAddress {
  /** Normalised URL; may carry user:password, so never print it: use redactProxyUrl. */
  url: string;
  from: string;
}

/**
 * The proxy choice of one run, as the configuration resolves it (--proxy, HTTPS_PROXY, HTTP_PROXY, NO_PROXY).
 * - `env`: the proxy variables of the environment; they never apply to this machine's loopback addresses, because a
 *   proxy elsewhere cannot reach them.
 * - `flag`: one proxy named explicitly for every target, loopback included.
 * - `off`: every request goes straight to the service.
 * NO_PROXY applies in `env` and `flag` modes alike.
 */
export interface ProxySettings {
  mode: 'env' | 'flag' | 'off';
  /** For http:// targets. */
  http?: ProxyAddress;
  /** For https:// targets (falls back to `http` when unset, as undici's EnvHttpProxyAgent does). */
  https?: ProxyAddress;
  noProxy?: { value: string; from: string };
  /** In `off` mode: the setting that turned proxies off, e.g. "--proxy none". */
  offBy?: string;
}

export type ProxyRoute = { kind: 'proxy'; proxy: ProxyAddress } | { kind: 'direct'; why: string };

/** Every request straight to the service: the client's default. */
export const NO_PROXY_SETTINGS: ProxySettings = { mode: 'off' };

/** Hides anything between "//" and "@" of a text that may be a URL with credentials, and cuts it short. */
export function redactUrlText(text: string): string {
  const hidden = text.replace(/\/\/[^/]*@/, '//***@');
  return hidden.length > 80 ? `${hidden.slice(0, 77)}...` : hidden;
}

/** The proxy URL as it may be printed: scheme, host and port; user and password become `***`. */
export function redactProxyUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return redactUrlText(url);
  }
  const auth = parsed.username || parsed.password ? '***@' : '';
  return `${parsed.protocol}//${auth}${parsed.host}`;
}

const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 };

function bareHost(host: string): string {
  return host.toLowerCase().replace(/^\[|\]$/g, '');
}

/** Loopback names and addresses: a proxy from the environment runs elsewhere and cannot reach them. */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host.endsWith('.localhost') || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

/**
 * The NO_PROXY entry that exempts host:port, if any. Entries are separated by commas or spaces; `*` exempts every host;
 * `example.com`, `.example.com` and `*.example.com` exempt that domain and its subdomains; `host:port` only that port.
 * The same rules as undici's EnvHttpProxyAgent; address ranges (CIDR) are not understood.
 */
export function noProxyMatch(value: string, hostname: string, port: number): string | undefined {
  const host = bareHost(hostname);
  for (const entry of value.split(/[\s,]+/)) {
    if (entry === '') continue;
    if (entry === '*') return entry;
    const withPort = /^(.+):(\d+)$/.exec(entry);
    // a bare IPv6 address also ends in ":digits"; only a bracketed one or a name carries a port
    const hasPort = withPort !== null && (!withPort[1]!.includes(':') || withPort[1]!.endsWith(']'));
    const name = bareHost((hasPort ? withPort[1]! : entry).replace(/^\*?\./, ''));
    if (hasPort && Number(withPort[2]) !== port) continue;
    if (host === name || host.endsWith(`.${name}`)) return entry;
  }
  return undefined;
}

/** Where the requests to `target` go under `settings`. */
export function proxyRouteFor(target: string | URL, settings: ProxySettings): ProxyRoute {
  const url = typeof target === 'string' ? new URL(target) : target;
  if (settings.mode === 'off')
    return { kind: 'direct', why: settings.offBy ? `proxy turned off by ${settings.offBy}` : 'no proxy set' };
  const proxy = url.protocol === 'https:' ? (settings.https ?? settings.http) : settings.http;
  if (proxy === undefined) return { kind: 'direct', why: `no proxy set for ${url.protocol}// targets` };
  const host = bareHost(url.hostname);
  const port = Number(url.port) || DEFAULT_PORTS[url.protocol] || 0;
  const exempt = settings.noProxy ? noProxyMatch(settings.noProxy.value, host, port) : undefined;
  if (exempt !== undefined && settings.noProxy) {
    return { kind: 'direct', why: `${settings.noProxy.from} entry "${redactUrlText(exempt)}" matches ${url.hostname}` };
  }
  if (settings.mode === 'env' && isLoopback(host)) {
    return {
      kind: 'direct',
      why: `${url.hostname} is this machine (${proxy.from} is not used for loopback; pass --proxy URL to force it)`,
    };
  }
  return { kind: 'proxy', proxy };
}

/** One line for `doctor` and verbose output: the proxy in use for `target` (redacted) and where it came from, or why none. */
export function describeProxyRoute(route: ProxyRoute): string {
  if (route.kind === 'direct') return `none: ${route.why}`;
  return `${redactProxyUrl(route.proxy.url)} (from ${route.proxy.from})`;
}
