// --phone-region CC (or a profile's phone_region): the country national phone numbers are read in; --phone-region-col
// COL: the column naming each row's country.
import type { Command } from 'commander';
import { parsePhoneRegion, PhoneRegionError, type PhoneRegion } from '../../identity/index.js';
import { EXIT, UserError } from './exit-codes.js';
import { PHONE_REGION_COL_HELP, phoneRegionHelp } from './phone-region-flag.js';

/** `profile`: the command reads a profile, whose phone_region is the default (hash reads none: it is offline). */
export function addPhoneRegionOption(cmd: Command, profile: boolean): Command {
  return cmd
    .option('--phone-region <CC>', phoneRegionHelp(profile), phoneRegionFlag)
    .option('--phone-region-col <COL>', PHONE_REGION_COL_HELP);
}

/** The --phone-region-col name as given. */
export function phoneRegionColumnFlagOf(opts: Record<string, unknown>): string | undefined {
  return typeof opts.phoneRegionCol === 'string' ? opts.phoneRegionCol : undefined;
}

/** Checked while the flags are read: a region that is not one is a usage error before any file is opened. */
export function phoneRegionFlag(value: string): PhoneRegion {
  try {
    return parsePhoneRegion(value);
  } catch (err) {
    if (err instanceof PhoneRegionError) throw new UserError(`--phone-region: ${err.message}`, EXIT.usage);
    throw err;
  }
}

/** The region commander parsed (see addPhoneRegionOption), typed. */
export function phoneRegionFlagOf(opts: Record<string, unknown>): PhoneRegion | undefined {
  return typeof opts.phoneRegion === 'string' ? (opts.phoneRegion as PhoneRegion) : undefined;
}
