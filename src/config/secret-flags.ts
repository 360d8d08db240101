import { ConfigError } from './errors.js';

/** Flags that would put a secret on the command line, and where the secret goes instead. */
export const SECRET_FLAGS: Readonly<Record<string, string>> = {
  '--api-key': 'set UID2_API_KEY, or pass --api-key-file FILE',
  '--client-secret': 'set UID2_CLIENT_SECRET, or pass --client-secret-file FILE',
  '--secret': 'set UID2_CLIENT_SECRET, or pass --client-secret-file FILE',
  // the key that decrypts a refresh answer: whoever holds it with the refresh_token can read the new identity
  '--refresh-response-key': 'pass --refresh-response-key-file FILE, or the whole identity with --in FILE or on stdin',
};

/**
 * `serve` takes --api-key/--client-secret on purpose: it runs the local test service, whose key pair is
 * made up for the occasion and printed on its first line anyway.
 */
const COMMANDS_ALLOWED_SECRET_FLAGS = new Set(['serve']);

/**
 * Refuses a secret given as a flag value, where shell history, `ps` and CI logs would keep it.
 * `args` are the arguments after the program name (process.argv.slice(2)). The message never repeats
 * the value. Runs before commander so that the user gets this advice rather than "unknown option".
 */
export function rejectSecretFlags(args: readonly string[]): void {
  const command = args.find((a) => !a.startsWith('-'));
  if (command !== undefined && COMMANDS_ALLOWED_SECRET_FLAGS.has(command)) return;
  for (const arg of args) {
    if (arg === '--') return;
    const name = arg.split('=', 1)[0];
    const advice = SECRET_FLAGS[name];
    if (advice) {
      throw new ConfigError(
        `${name} is refused because a secret on the command line ends up in shell history and process lists: ${advice}`,
      );
    }
  }
}
