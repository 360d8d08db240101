import type { Command } from 'commander';
import { registerTokenCommand } from './token.js';
import { registerDoctorCommand } from './doctor.js';

/** Every command registers itself here: one import and one line each. */
export function registerCommands(program: Command): void {
  void program;
  registerTokenCommand(program);
  registerDoctorCommand(program);
}
