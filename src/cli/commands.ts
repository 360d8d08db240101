import type { Command } from 'commander';
import { registerServe } from './serve.js';
import { registerTokenCommand } from './token.js';
import { registerDoctorCommand } from './doctor.js';
import { registerHash } from './hash.js';
import { registerMap } from './map.js';
import { registerRemapDue } from './remap-due.js';
import { registerOptoutCheck } from './optout-check.js';
import { registerBuckets } from './buckets.js';
import { registerMigrate } from './migrate.js';

/** Every command registers itself here: one import and one line each. */
export function registerCommands(program: Command): void {
  void program;
  registerServe(program);
  registerTokenCommand(program);
  registerDoctorCommand(program);
  registerHash(program);
  registerMap(program);
  registerRemapDue(program);
  registerOptoutCheck(program);
  registerBuckets(program);
  registerMigrate(program);
}
