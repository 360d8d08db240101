/** Where a credential came from, for `doctor` and error messages. Never the value itself. */
export type CredentialSource = 'env' | 'file' | 'profile' | 'local-service' | 'none';

export type IdentityScopeName = 'UID2' | 'EUID';

export interface EnvironmentInfo {
  name: string;
  baseUrl: string;
  scope: IdentityScopeName;
  /** The public service: at most 20 map requests in flight, opt-out checks sequential. */
  isPublic: boolean;
}

/** Where the environment choice came from; `default` means nothing named one (then it is integ). */
export type EnvSource = 'flag' | 'env' | 'profile' | 'default';

export interface ResolvedConfig {
  env: EnvironmentInfo;
  /** True for --env local: the CLI starts the embedded service and takes its credentials. */
  isLocal: boolean;
  apiKey?: string;
  clientSecret?: string;
  apiKeySource: CredentialSource;
  clientSecretSource: CredentialSource;
  /** Profile name used, if any. */
  profile?: string;
  /** How the environment was chosen. */
  envSource: EnvSource;
  /** The setting the base URL was taken from (`--base-url`, `UID2_BASE_URL`, `base_url of profile 'x'`); absent: the environment's own. */
  baseUrlFrom?: string;
  /** Exactly where each credential came from ("UID2_API_KEY", "--api-key-file /path", "profile 'prod' in /path"). */
  apiKeyOrigin?: string;
  clientSecretOrigin?: string;
  /** The config file that was read, if one was. */
  configFile?: string;
  /** Per-attempt request timeout and attempts per call, when given (the client has defaults). */
  timeoutMs?: number;
  maxAttempts?: number;
  /** Proxy choice: --proxy, else the proxy variables of the environment. Give it to the client as ClientOptions.proxy. */
  proxy?: ProxySettings;
  /** The profile's phone_region as written, and where it came from; a --phone-region flag goes before it. */
  phoneRegion?: { value: string; from: string };
}

/** A proxy address and the setting it came from ("--proxy", "HTTPS_PROXY", "https_proxy"...). */
export interface ProxyAddress {
  /** May carry user:password: never print it whole. */
  url: string;
  from: string;
}

/**
 * The proxy choice of a run, in the shape ClientOptions.proxy takes. `env`: the proxy variables (never used for
 * loopback services); `flag`: one proxy for every service; `off`: none. NO_PROXY applies to `env` and `flag`.
 */
export interface ProxySettings {
  mode: 'env' | 'flag' | 'off';
  /** For http:// services. */
  http?: ProxyAddress;
  /** For https:// services; when unset, `http` serves them too. */
  https?: ProxyAddress;
  noProxy?: { value: string; from: string };
  /** In `off` mode: the setting that turned proxies off. */
  offBy?: string;
}

/** The connection flags every command shares (see src/cli/options.ts), as commander parses them. */
export interface ConnectionFlags {
  env?: string;
  baseUrl?: string;
  scope?: string;
  profile?: string;
  config?: string;
  apiKeyFile?: string;
  clientSecretFile?: string;
  insecureHttp?: boolean;
  timeoutMs?: number;
  maxAttempts?: number;
  /** --proxy URL, or `none`. */
  proxy?: string;
}

/** What resolveConfig needs from the machine; injectable so tests never touch the real home directory. */
export interface ConfigDeps {
  /** Reads a UTF-8 file; throws a Node error with `code` (ENOENT, EACCES, ...) on failure. */
  readFile(path: string): string;
  /** File mode bits; throws like readFile. */
  statMode(path: string): number;
  homedir(): string;
  platform: NodeJS.Platform;
  /** One line of warning for the user (default: stderr). */
  warn(message: string): void;
}

export interface ResolveOptions {
  /** Credentials the command needs (default both). Token refresh, hash and dry runs need none. */
  require?: { apiKey?: boolean; clientSecret?: boolean };
}
