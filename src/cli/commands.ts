/** The CLI's commands, each loaded only when needed: the one commander runs, or all of them for the root help. */
import type { Command } from 'commander';

type Register = (program: Command) => void;

export interface CommandEntry {
  /** The command's name, as typed. */
  name: string;
  /** Loads the module that registers the command (options, arguments, help) and returns its register function. */
  load: () => Promise<Register>;
}

/**
 * Every command, in the order the root help lists them: one line each. serve, token and doctor register from a
 * module of their own whose actions load the command's work when they run; the others still register from the
 * module that does their work, so loading their registration loads all of it.
 */
export const COMMANDS: readonly CommandEntry[] = [
  { name: 'serve', load: async () => (await import('./serve/serve-command.js')).registerServe },
  { name: 'token', load: async () => (await import('./token/token-command.js')).registerTokenCommand },
  { name: 'doctor', load: async () => (await import('./doctor/doctor-command.js')).registerDoctorCommand },
  { name: 'hash', load: async () => (await import('./hash/hash.js')).registerHash },
  { name: 'map', load: async () => (await import('./map/map.js')).registerMap },
  { name: 'remap-due', load: async () => (await import('./remap-due/remap-due.js')).registerRemapDue },
  { name: 'optout-check', load: async () => (await import('./optout-check/optout-check.js')).registerOptoutCheck },
  { name: 'buckets', load: async () => (await import('./v2/buckets.js')).registerBuckets },
  { name: 'migrate', load: async () => (await import('./v2/migrate.js')).registerMigrate },
  { name: 'state', load: async () => (await import('./state/state.js')).registerStateCommand },
];

/** Registers the named commands (all when `names` is undefined), in the order of COMMANDS. */
export async function registerCommands(program: Command, names?: readonly string[]): Promise<void> {
  const wanted = COMMANDS.filter((c) => names === undefined || names.includes(c.name));
  const registers = await Promise.all(wanted.map((c) => c.load()));
  for (const register of registers) register(program);
}
