/**
 * A configuration problem the user can fix: one sentence naming what is wrong and what to set.
 * Exit code 2 (usage or configuration), like the CLI's UserError; config cannot import the CLI layer,
 * so the CLI recognises this class by its name.
 */
export class ConfigError extends Error {
  readonly exitCode = 2;
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** Why a file could not be read, in words: for the one-line error about a config or secret file. */
export function unreadableBecause(err: unknown): string {
  const code = err && typeof err === 'object' && 'code' in err ? String((err as { code: unknown }).code) : undefined;
  if (code === 'ENOENT') return 'no such file';
  if (code === 'EACCES') return 'permission denied';
  if (code === 'EISDIR') return 'it is a directory';
  return code ?? 'unreadable';
}
