import { ConfigError, unreadableBecause } from './errors.js';
import { profilePath, warnIfShared, type ConfigFile, type Profile } from './profiles.js';
import type { ConfigDeps, CredentialSource } from './types.js';

/** The names under which one credential can be given, in precedence order. */
export interface CredentialSpec {
  what: 'API key' | 'client secret';
  fileFlag: '--api-key-file' | '--client-secret-file';
  envVar: 'UID2_API_KEY' | 'UID2_CLIENT_SECRET';
  envFileVar: 'UID2_API_KEY_FILE' | 'UID2_CLIENT_SECRET_FILE';
  profileKey: 'api_key' | 'client_secret';
  profileFileKey: 'api_key_file' | 'client_secret_file';
}

export const API_KEY: CredentialSpec = {
  what: 'API key',
  fileFlag: '--api-key-file',
  envVar: 'UID2_API_KEY',
  envFileVar: 'UID2_API_KEY_FILE',
  profileKey: 'api_key',
  profileFileKey: 'api_key_file',
};

export const CLIENT_SECRET: CredentialSpec = {
  what: 'client secret',
  fileFlag: '--client-secret-file',
  envVar: 'UID2_CLIENT_SECRET',
  envFileVar: 'UID2_CLIENT_SECRET_FILE',
  profileKey: 'client_secret',
  profileFileKey: 'client_secret_file',
};

export interface FoundCredential {
  value: string;
  source: CredentialSource;
  /** Where exactly, for messages and `doctor`: never the value. */
  origin: string;
}

/** Reads a secret file; editors and `echo` leave a trailing newline that must not become part of the key. */
export function readSecretFile(path: string, origin: string, what: string, deps: ConfigDeps): string {
  let text: string;
  try {
    text = deps.readFile(path);
  } catch (err) {
    throw new ConfigError(`cannot read the ${what} file ${path} (from ${origin}): ${unreadableBecause(err)}`);
  }
  const value = text.replace(/^\uFEFF/, '').replace(/[\r\n]+$/, '');
  if (value.trim() === '') throw new ConfigError(`the ${what} file ${path} (from ${origin}) is empty`);
  warnIfShared(path, `${what} file`, deps);
  return value;
}

/**
 * Finds one credential: file flag > variable (value or _FILE) > profile (value or file).
 * Setting both the variable and its _FILE twin is refused, because silently picking one hides a mistake.
 */
export function findCredential(
  spec: CredentialSpec,
  flagFile: string | undefined,
  environ: NodeJS.ProcessEnv,
  profile: { name: string; data: Profile; file: ConfigFile } | undefined,
  deps: ConfigDeps,
): FoundCredential | undefined {
  if (flagFile !== undefined && flagFile !== '') {
    const origin = `${spec.fileFlag} ${flagFile}`;
    return { value: readSecretFile(flagFile, spec.fileFlag, spec.what, deps), source: 'file', origin };
  }
  const envValue = environ[spec.envVar];
  const envFile = environ[spec.envFileVar];
  if (envValue && envFile) {
    throw new ConfigError(`both ${spec.envVar} and ${spec.envFileVar} are set: unset one of them`);
  }
  if (envValue) return { value: envValue, source: 'env', origin: spec.envVar };
  if (envFile) {
    return {
      value: readSecretFile(envFile, spec.envFileVar, spec.what, deps),
      source: 'file',
      origin: `${spec.envFileVar} ${envFile}`,
    };
  }
  if (profile) {
    const inline = profile.data[spec.profileKey];
    const where = `profile '${profile.name}' in ${profile.file.path}`;
    if (inline !== undefined) return { value: inline, source: 'profile', origin: where };
    const file = profile.data[spec.profileFileKey];
    if (file !== undefined) {
      const path = profilePath(file, profile.file.path, deps.homedir());
      return {
        value: readSecretFile(path, `${spec.profileFileKey} of ${where}`, spec.what, deps),
        source: 'profile',
        origin: `${where} (${path})`,
      };
    }
  }
  return undefined;
}

/** An API key travels in an HTTP header: whitespace inside it is a copy-paste accident, not a key. */
export function checkApiKey(found: FoundCredential): void {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: a control character in a key is what it looks for
  if (/[\s\u0000-\u001f\u007f]/.test(found.value)) {
    throw new ConfigError(
      `the API key from ${found.origin} contains spaces, tabs or line breaks: copy it again without them`,
    );
  }
  if (/[^\u0020-\u007e]/.test(found.value)) {
    throw new ConfigError(
      `the API key from ${found.origin} contains non-ASCII characters: copy it again from the UID2 portal`,
    );
  }
}

/** A client secret is the base64 of 32 bytes (44 characters); anything else cannot decrypt a response. */
export function checkClientSecret(found: FoundCredential): void {
  const value = found.value.trim();
  const bytes =
    /^[A-Za-z0-9+/]+={0,2}$/.test(value) && value.length % 4 === 0 ? Buffer.from(value, 'base64').length : -1;
  if (bytes !== 32) {
    throw new ConfigError(
      `the client secret from ${found.origin} is malformed: it must be the base64 of 32 bytes (44 characters ending in '='), got ${value.length} characters`,
    );
  }
  found.value = value;
}
