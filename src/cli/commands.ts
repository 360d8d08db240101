import type { Command } from 'commander';
import { registerServe } from './serve/serve.js';
import { registerTokenCommand } from './token/token.js';
import { registerDoctorCommand } from './doctor/doctor.js';
import { registerHash } from './hash/hash.js';
import { registerMap } from './map/map.js';
import { registerRemapDue } from './remap-due/remap-due.js';
import { registerOptoutCheck } from './optout-check/optout-check.js';
import { registerBuckets } from './v2/buckets.js';
import { registerMigrate } from './v2/migrate.js';
import { registerStateCommand } from './state/state.js';

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
  registerStateCommand(program);
}
