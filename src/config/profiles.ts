import { dirname, isAbsolute, join, resolve } from 'node:path';
import { ConfigError, unreadableBecause } from './errors.js';
import type { ConfigDeps } from './types.js';

/** One named profile of the config file; snake_case keys, as written in the JSON. */
export interface Profile {
  env?: string;
  base_url?: string;
  scope?: string;
  api_key?: string;
  client_secret?: string;
  /** Relative paths are relative to the config file; `~/` is the home directory. */
  api_key_file?: string;
  client_secret_file?: string;
  /** The country national phone numbers are read in (`US`); checked where phones are read, not here. */
  phone_region?: string;
  /** What --state names when it is not given: a state file (relative to the config file) or a postgres:// URL. */
  state?: string;
}

export interface ConfigFile {
  path: string;
  profiles: Record<string, Profile>;
  /** Some profile holds an API key or client secret inline, so the file itself must be private. */
  holdsSecrets: boolean;
}

const PROFILE_KEYS: readonly (keyof Profile)[] = [
  'env',
  'base_url',
  'scope',
  'api_key',
  'client_secret',
  'api_key_file',
  'client_secret_file',
  'phone_region',
  'state',
];

/** The profile used when none is named, like the AWS CLI's. */
export const DEFAULT_PROFILE = 'default';

/** $XDG_CONFIG_HOME/uid2-batch/config.json, else ~/.config/uid2-batch/config.json. */
export function defaultConfigPath(environ: NodeJS.ProcessEnv, homedir: string): string {
  const xdg = environ.XDG_CONFIG_HOME;
  const base = xdg && isAbsolute(xdg) ? xdg : join(homedir, '.config');
  return join(base, 'uid2-batch', 'config.json');
}

/** Expands `~/` and makes a profile's file path absolute relative to the config file. */
export function profilePath(value: string, configPath: string, homedir: string): string {
  if (value === '~' || value.startsWith('~/')) return join(homedir, value.slice(1));
  return resolve(dirname(configPath), value);
}

/** JSON.parse messages quote the text around the fault, which may be a secret: keep only the position. */
function describeJsonError(err: unknown, text: string): string {
  const m = err instanceof Error ? /position (\d+)/.exec(err.message) : null;
  if (!m) return 'it is not valid JSON';
  const pos = Number(m[1]);
  const before = text.slice(0, pos);
  const line = before.split('\n').length;
  const column = pos - before.lastIndexOf('\n');
  return `it is not valid JSON (line ${line}, column ${column})`;
}

export function parseConfigFile(text: string, path: string): ConfigFile {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`cannot use the config file ${path}: ${describeJsonError(err, text)}`);
  }
  const shape = `{"profiles": {"NAME": {"env": "integ", "api_key_file": "..."}}}`;
  if (!data || typeof data !== 'object' || Array.isArray(data)) {
    throw new ConfigError(`cannot use the config file ${path}: it must be a JSON object like ${shape}`);
  }
  const top = data as Record<string, unknown>;
  for (const key of Object.keys(top)) {
    if (key !== 'profiles')
      throw new ConfigError(
        `cannot use the config file ${path}: unknown key '${key}' (the only top-level key is "profiles")`,
      );
  }
  const rawProfiles = top.profiles ?? {};
  if (!rawProfiles || typeof rawProfiles !== 'object' || Array.isArray(rawProfiles)) {
    throw new ConfigError(`cannot use the config file ${path}: "profiles" must be an object like ${shape}`);
  }
  const profiles: Record<string, Profile> = {};
  let holdsSecrets = false;
  for (const [name, raw] of Object.entries(rawProfiles as Record<string, unknown>)) {
    if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
      throw new ConfigError(`cannot use the config file ${path}: profile '${name}' must be an object`);
    }
    const profile: Profile = {};
    for (const [key, value] of Object.entries(raw as Record<string, unknown>)) {
      if (!(PROFILE_KEYS as readonly string[]).includes(key)) {
        throw new ConfigError(
          `cannot use the config file ${path}: profile '${name}' has an unknown key '${key}' (allowed: ${PROFILE_KEYS.join(', ')})`,
        );
      }
      if (typeof value !== 'string' || value.trim() === '') {
        throw new ConfigError(
          `cannot use the config file ${path}: profile '${name}' key '${key}' must be a non-empty string`,
        );
      }
      profile[key as keyof Profile] = value;
    }
    if (profile.api_key !== undefined && profile.api_key_file !== undefined) {
      throw new ConfigError(
        `cannot use the config file ${path}: profile '${name}' sets both api_key and api_key_file; keep one`,
      );
    }
    if (profile.client_secret !== undefined && profile.client_secret_file !== undefined) {
      throw new ConfigError(
        `cannot use the config file ${path}: profile '${name}' sets both client_secret and client_secret_file; keep one`,
      );
    }
    if (profile.api_key !== undefined || profile.client_secret !== undefined) holdsSecrets = true;
    profiles[name] = profile;
  }
  return { path, profiles, holdsSecrets };
}

function errorCode(err: unknown): string | undefined {
  return err && typeof err === 'object' && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}

/**
 * Reads the config file. A file named by --config or UID2_CONFIG must exist; the default one is optional.
 * Warns when a file that holds secrets is readable by group or others.
 */
export function loadConfigFile(path: string, from: string | undefined, deps: ConfigDeps): ConfigFile | undefined {
  let text: string;
  try {
    text = deps.readFile(path);
  } catch (err) {
    if (errorCode(err) === 'ENOENT' && from === undefined) return undefined;
    throw new ConfigError(
      `cannot read the config file ${path}${from ? ` (from ${from})` : ''}: ${unreadableBecause(err)}`,
    );
  }
  const file = parseConfigFile(text, path);
  if (file.holdsSecrets) warnIfShared(path, 'config file', deps);
  return file;
}

/** Secrets in a file others can read are not secret; say so (POSIX only: Windows modes mean nothing here). */
export function warnIfShared(path: string, what: string, deps: ConfigDeps): void {
  if (deps.platform === 'win32') return;
  let mode: number;
  try {
    mode = deps.statMode(path);
  } catch {
    return;
  }
  if ((mode & 0o077) !== 0) {
    const octal = (mode & 0o777).toString(8).padStart(3, '0');
    deps.warn(
      `the ${what} ${path} holds secrets and is readable by other users (mode ${octal}): run chmod 600 ${path}`,
    );
  }
}
