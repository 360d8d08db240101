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
