import type { Command } from 'commander';

/** Every command registers itself here: one import and one line each. */
export function registerCommands(program: Command): void {
  void program;
}
