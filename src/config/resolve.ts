import { readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { checkBaseUrl, isLoopbackHost } from './base-url.js';
import {
  API_KEY,
  CLIENT_SECRET,
  checkApiKey,
  checkClientSecret,
  findCredential,
  type CredentialSpec,
  type FoundCredential,
} from './credentials.js';
import { DEFAULT_ENV, environmentFamily, environmentForUrl, findEnvironment, parseScope } from './environments.js';
import { ConfigError } from './errors.js';
import { resolveProxy } from './proxy.js';
import {
  DEFAULT_PROFILE,
  defaultConfigPath,
  loadConfigFile,
  profilePath,
  type ConfigFile,
  type Profile,
} from './profiles.js';
import type {
  ConfigDeps,
  ConnectionFlags,
  EnvSource,
  EnvironmentInfo,
  ResolveOptions,
  ResolvedConfig,
} from './types.js';

export function defaultConfigDeps(): ConfigDeps {
  return {
    readFile: (path) => readFileSync(path, 'utf8'),
    statMode: (path) => statSync(path).mode,
    homedir: () => homedir(),
    platform: process.platform,
    warn: (message) => process.stderr.write(`uid2-batch: warning: ${message}\n`),
  };
}

interface SelectedProfile {
  name: string;
  data: Profile;
  file: ConfigFile;
}

function selectProfile(
  flags: ConnectionFlags,
  environ: NodeJS.ProcessEnv,
  deps: ConfigDeps,
): { file?: ConfigFile; profile?: SelectedProfile } {
  const pathFrom = flags.config ? '--config' : environ.UID2_CONFIG ? 'UID2_CONFIG' : undefined;
  const path = flags.config || environ.UID2_CONFIG || defaultConfigPath(environ, deps.homedir());
  const nameFrom = flags.profile ? '--profile' : environ.UID2_PROFILE ? 'UID2_PROFILE' : undefined;
  const name = flags.profile || environ.UID2_PROFILE;

  const file = loadConfigFile(path, pathFrom, deps);
  if (name === undefined) {
    const data = file?.profiles[DEFAULT_PROFILE];
    return { file, profile: file && data ? { name: DEFAULT_PROFILE, data, file } : undefined };
  }
  if (!file) {
    throw new ConfigError(
      `profile '${name}' (from ${nameFrom}) cannot be found: there is no config file at ${path}; create it or name one with --config FILE`,
    );
  }
  const data = file.profiles[name];
  if (!data) {
    const known = Object.keys(file.profiles);
    throw new ConfigError(
      `profile '${name}' (from ${nameFrom}) is not in ${file.path}: ${known.length ? `its profiles are ${known.join(', ')}` : 'it has no profiles'}`,
    );
  }
  return { file, profile: { name, data, file } };
}

function chooseEnvironment(
  flags: ConnectionFlags,
  environ: NodeJS.ProcessEnv,
  profile: SelectedProfile | undefined,
): { env: EnvironmentInfo; source: EnvSource } {
  if (flags.env) return { env: findEnvironment(flags.env, '--env'), source: 'flag' };
  if (environ.UID2_ENV) return { env: findEnvironment(environ.UID2_ENV, 'UID2_ENV'), source: 'env' };
  if (profile?.data.env)
    return { env: findEnvironment(profile.data.env, `profile '${profile.name}'`), source: 'profile' };
  return { env: findEnvironment(DEFAULT_ENV, 'the default'), source: 'default' };
}

/**
 * Applies --base-url / UID2_BASE_URL / the profile's base_url. A profile's URL belongs to the profile's
 * environment, so it is ignored when a flag or variable chose another one.
 */
function applyBaseUrl(
  chosen: EnvironmentInfo,
  flags: ConnectionFlags,
  environ: NodeJS.ProcessEnv,
  profile: SelectedProfile | undefined,
): { env: EnvironmentInfo; overridden: boolean; from: string | undefined } {
  const insecure = flags.insecureHttp === true;
  let raw: string | undefined;
  let from = '';
  if (flags.baseUrl) [raw, from] = [flags.baseUrl, '--base-url'];
  else if (environ.UID2_BASE_URL) [raw, from] = [environ.UID2_BASE_URL, 'UID2_BASE_URL'];
  else if (
    profile?.data.base_url &&
    (!profile.data.env || findEnvironment(profile.data.env, `profile '${profile.name}'`).name === chosen.name)
  ) {
    [raw, from] = [profile.data.base_url, `base_url of profile '${profile.name}'`];
  }
  let env = chosen;
  let overridden = false;
  if (raw !== undefined) {
    const url = checkBaseUrl(raw, from, insecure);
    const known = environmentForUrl(url);
    if (known) env = known;
    else {
      // A private operator has no public rate limits, but an unknown host may be a proxy to the public
      // service, so only this machine counts as not public.
      const loopback = isLoopbackHost(new URL(url).hostname);
      env = { ...chosen, baseUrl: url, isPublic: chosen.isPublic && !loopback };
      overridden = true;
    }
  }
  const scopeRaw = flags.scope ?? profile?.data.scope;
  if (scopeRaw !== undefined) {
    const from = flags.scope !== undefined ? '--scope' : `scope of profile '${profile?.name}'`;
    const scope = parseScope(scopeRaw, from);
    // A named environment has one scope; --scope only describes a base URL this tool does not know.
    if (!overridden && scope !== env.scope) {
      throw new ConfigError(
        `${from} ${scope} does not match environment ${env.name} (${env.scope}): drop it, or choose the ${scope} environment with --env`,
      );
    }
    env = { ...env, scope };
  }
  return { env, overridden, from: raw === undefined ? undefined : from };
}

function missingCredential(spec: CredentialSpec, env: EnvironmentInfo, envSource: EnvSource): ConfigError {
  const where =
    envSource === 'default'
      ? `${env.name}, the default environment (choose one with --env, or --env local for the built-in test service)`
      : env.name;
  return new ConfigError(
    `no ${spec.what} for ${where}: set ${spec.envVar}, or pass ${spec.fileFlag} FILE, or name a profile with --profile`,
  );
}

/**
 * Resolves the environment, base URL and credentials. Precedence for each setting: flag > environment
 * variable > profile in the config file > default (env `integ`). Throws ConfigError with one sentence
 * naming the variable or flag to set; no message ever contains a secret.
 */
export function resolveConfig(
  flags: ConnectionFlags,
  environ: NodeJS.ProcessEnv = process.env,
  deps: Partial<ConfigDeps> = {},
  options: ResolveOptions = {},
): ResolvedConfig {
  const d: ConfigDeps = { ...defaultConfigDeps(), ...deps };
  const { file, profile } = selectProfile(flags, environ, d);
  const chosen = chooseEnvironment(flags, environ, profile);
  const { env, overridden, from: baseUrlFrom } = applyBaseUrl(chosen.env, flags, environ, profile);
  const isLocal = env.name === 'local' && !overridden;
  const proxy = resolveProxy(flags.proxy, environ);

  const base: ResolvedConfig = {
    env,
    isLocal,
    apiKeySource: 'none',
    clientSecretSource: 'none',
    envSource: chosen.source,
    ...(baseUrlFrom !== undefined ? { baseUrlFrom } : {}),
    proxy,
    ...(profile ? { profile: profile.name } : {}),
    ...(file ? { configFile: file.path } : {}),
    ...(flags.timeoutMs !== undefined ? { timeoutMs: flags.timeoutMs } : {}),
    ...(flags.maxAttempts !== undefined ? { maxAttempts: flags.maxAttempts } : {}),
    ...(profile?.data.phone_region !== undefined
      ? { phoneRegion: { value: profile.data.phone_region, from: `phone_region of profile '${profile.name}'` } }
      : {}),
  };
  if (isLocal) {
    // The embedded service makes its own key pair; a prod key from the shell must not go near it.
    return { ...base, apiKeySource: 'local-service', clientSecretSource: 'local-service' };
  }

  const need = { apiKey: options.require?.apiKey ?? true, clientSecret: options.require?.clientSecret ?? true };
  const apiKey = findCredential(API_KEY, flags.apiKeyFile, environ, profile, d);
  const secret = findCredential(CLIENT_SECRET, flags.clientSecretFile, environ, profile, d);
  if (!apiKey && need.apiKey) throw missingCredential(API_KEY, env, chosen.source);
  if (!secret && need.clientSecret) throw missingCredential(CLIENT_SECRET, env, chosen.source);
  if (apiKey) checkApiKey(apiKey);
  if (secret) checkClientSecret(secret);
  return { ...base, ...credentialFields('apiKey', apiKey), ...credentialFields('clientSecret', secret) };
}

function credentialFields(
  which: 'apiKey' | 'clientSecret',
  found: FoundCredential | undefined,
): Partial<ResolvedConfig> {
  if (!found) return {};
  return which === 'apiKey'
    ? { apiKey: found.value, apiKeySource: found.source, apiKeyOrigin: found.origin }
    : { clientSecret: found.value, clientSecretSource: found.source, clientSecretOrigin: found.origin };
}

/** Gives a --env local config the address and key pair of the embedded service once it listens. */
export function attachLocalService(
  cfg: ResolvedConfig,
  service: { url: string; apiKey: string; clientSecret: string },
): ResolvedConfig {
  return {
    ...cfg,
    env: { ...cfg.env, baseUrl: service.url.replace(/\/+$/, '') },
    apiKey: service.apiKey,
    clientSecret: service.clientSecret,
    apiKeySource: 'local-service',
    clientSecretSource: 'local-service',
    apiKeyOrigin: 'the embedded local service',
    clientSecretOrigin: 'the embedded local service',
  };
}

export interface ConfigDisplay {
  env: string;
  envSource: EnvSource;
  baseUrl: string;
  /** Where the base URL came from: `from --base-url`, `from UID2_BASE_URL`, `from base_url of profile 'x'`, or the environment's default. */
  baseUrlFrom: string;
  scope: string;
  profile?: string;
  configFile?: string;
  apiKey: string;
  clientSecret: string;
}

function describeSource(source: string, origin: string | undefined): string {
  if (source === 'local-service') return 'the embedded local service';
  if (source === 'none') return 'not set';
  return origin ?? source;
}

/** What `doctor` and verbose output may show: where each setting came from, never a secret's value. */
export function credentialsForDisplay(cfg: ResolvedConfig): ConfigDisplay {
  return {
    env: cfg.env.name,
    envSource: cfg.envSource,
    baseUrl: cfg.isLocal ? 'embedded (127.0.0.1, free port)' : cfg.env.baseUrl,
    baseUrlFrom:
      cfg.baseUrlFrom !== undefined ? `from ${cfg.baseUrlFrom}` : `the default of environment ${cfg.env.name}`,
    scope: cfg.env.scope,
    ...(cfg.profile ? { profile: cfg.profile } : {}),
    ...(cfg.configFile ? { configFile: cfg.configFile } : {}),
    apiKey: describeSource(cfg.apiKeySource, cfg.apiKeyOrigin),
    clientSecret: describeSource(cfg.clientSecretSource, cfg.clientSecretOrigin),
  };
}

/**
 * What the state file records to refuse mixing environments: the identity scope and the family of raw UIDs.
 * All prod regions share salts (one family); every loopback service is "local", whatever its port, so a
 * re-run against a restarted `serve` keeps its state; any other base URL stands for itself.
 */
export function envFingerprint(cfg: ResolvedConfig): string {
  const { env } = cfg;
  if (cfg.isLocal || isLoopbackHost(new URL(env.baseUrl).hostname)) return `${env.scope}:local`;
  const known = environmentForUrl(env.baseUrl);
  const family = known ? environmentFamily(known.name) : undefined;
  return `${env.scope}:${family ?? env.baseUrl}`;
}

/**
 * What `--state` names when it is not given (map, remap-due): UID2_BATCH_STATE, else the profile's `state` (a file
 * path relative to the config file, or a postgres:// URL as it is); undefined when neither is set.
 */
export function stateSetting(
  flags: ConnectionFlags,
  environ: NodeJS.ProcessEnv = process.env,
  deps: Partial<ConfigDeps> = {},
): { value: string; from: string } | undefined {
  const fromEnv = environ.UID2_BATCH_STATE?.trim();
  if (fromEnv) return { value: fromEnv, from: 'UID2_BATCH_STATE' };
  const d: ConfigDeps = { ...defaultConfigDeps(), ...deps };
  const { profile } = selectProfile(flags, environ, d);
  const value = profile?.data.state;
  if (profile === undefined || value === undefined) return undefined;
  const url = /^postgres(ql)?:\/\//i.test(value);
  return {
    value: url ? value : profilePath(value, profile.file.path, d.homedir()),
    from: `state of profile '${profile.name}'`,
  };
}
