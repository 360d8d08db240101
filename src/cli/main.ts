import { Command, CommanderError } from 'commander';
import { registerCommands } from './commands.js';
import { EXIT, UserError } from './exit-codes.js';

export function buildProgram(): Command {
  const program = new Command('uid2-batch')
    .description('Bulk identity mapping, re-mapping, opt-out checks and tokens for the UID2 / EUID identity service')
    .version('0.1.0')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  registerCommands(program);
  return program;
}

/** Turns any failure into one line on stderr and an exit code; a stack trace only with UID2_DEBUG set. */
export function reportError(err: unknown): number {
  if (err instanceof CommanderError) {
    // commander already printed its message
    return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
  }
  if (err instanceof UserError) {
    process.stderr.write(`uid2-batch: ${err.message}\n`);
    return err.exitCode;
  }
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`uid2-batch: ${message}\n`);
  if (process.env.UID2_DEBUG && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
  return EXIT.failed;
}

export async function main(argv: string[]): Promise<void> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    process.exitCode = reportError(err);
  }
}
