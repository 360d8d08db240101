import { ConfigError } from './errors.js';

/** Flags that would put a secret on the command line, and where the secret goes instead. */
export const SECRET_FLAGS: Readonly<Record<string, string>> = {
  '--api-key': 'set UID2_API_KEY, or pass --api-key-file FILE',
  '--client-secret': 'set UID2_CLIENT_SECRET, or pass --client-secret-file FILE',
  '--secret': 'set UID2_CLIENT_SECRET, or pass --client-secret-file FILE',
  // the key that decrypts a refresh answer: whoever holds it with the refresh_token can read the new identity
  '--refresh-response-key': 'pass --refresh-response-key-file FILE, or the whole identity with --in FILE or on stdin',
};

/** A flag's name as it is compared for near misses: `--Client_Secret` and `--clientsecret` are `clientsecret`. */
function looseName(flag: string): string {
  return flag.replace(/^-+/, '').toLowerCase().replace(/[-_]/g, '');
}

const SECRET_FLAGS_BY_LOOSE_NAME = new Map(Object.keys(SECRET_FLAGS).map((flag) => [looseName(flag), flag]));

/** Words in a flag's name that say its value is a secret. */
const SECRET_WORDS = /secret|key|token|passw|credential|auth/;

/**
 * Whether a flag's value may be a secret, by its name (`--client_secret`, `--auth-token`, `--private_key`): error
 * lines never show it. A name ending in `file` takes a path, which is no secret.
 */
export function looksLikeSecretFlag(flag: string): boolean {
  const name = looseName(flag.split('=', 1)[0]);
  return SECRET_WORDS.test(name) && !name.endsWith('file');
}

/**
 * `serve` takes --api-key/--client-secret on purpose: it runs the local test service, whose key pair is
 * made up for the occasion and printed on its first line anyway.
 */
const COMMANDS_ALLOWED_SECRET_FLAGS = new Set(['serve']);

/**
 * Refuses a secret given as a flag value, where shell history, `ps` and CI logs would keep it.
 * `args` are the arguments after the program name (process.argv.slice(2)). The message never repeats
 * the value. Runs before commander so that the user gets this advice rather than "unknown option"; so does a near
 * miss of such a flag (another case, `_` for `-`).
 */
export function rejectSecretFlags(args: readonly string[]): void {
  const command = args.find((a) => !a.startsWith('-'));
  if (command !== undefined && COMMANDS_ALLOWED_SECRET_FLAGS.has(command)) return;
  for (const arg of args) {
    if (arg === '--') return;
    if (!arg.startsWith('--')) continue;
    const name = arg.split('=', 1)[0];
    // a near miss (`--client_secret=...`) is refused as the flag it means: commander would echo it whole
    const meant = SECRET_FLAGS_BY_LOOSE_NAME.get(looseName(name));
    const advice = meant !== undefined ? SECRET_FLAGS[meant] : undefined;
    if (advice) {
      throw new ConfigError(
        `${name} is refused because a secret on the command line ends up in shell history and process lists: ${advice}`,
      );
    }
  }
}
