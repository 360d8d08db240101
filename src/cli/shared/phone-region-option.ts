// --phone-region CC (or a profile's phone_region): the country national phone numbers are read in.
import type { Command } from 'commander';
import type { ResolvedConfig } from '../../config/index.js';
import { parsePhoneRegion, PhoneRegionError, type PhoneRegion } from '../../identity/index.js';
import type { IdentifierColumn } from '../../pipeline/table/identifier-columns.js';
import { EXIT, UserError } from './exit-codes.js';
import { phoneRegionHelp } from './phone-region-flag.js';

/** `profile`: the command reads a profile, whose phone_region is the default (hash reads none: it is offline). */
export function addPhoneRegionOption(cmd: Command, profile: boolean): Command {
  return cmd.option('--phone-region <CC>', phoneRegionHelp(profile), phoneRegionFlag);
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

/** The run's region: the flag, else the profile's phone_region (checked here, said by where it came from). */
export function chooseRegion(
  flag: PhoneRegion | undefined,
  config: Pick<ResolvedConfig, 'phoneRegion'> | undefined,
): PhoneRegion | undefined {
  if (flag !== undefined) return flag;
  const fromProfile = config?.phoneRegion;
  if (fromProfile === undefined) return undefined;
  try {
    return parsePhoneRegion(fromProfile.value);
  } catch (err) {
    if (err instanceof PhoneRegionError) throw new UserError(`${fromProfile.from}: ${err.message}`, EXIT.usage);
    throw err;
  }
}

/** The columns with the region set on those that may hold phones (phone and auto); hash columns need none. */
export function withPhoneRegion<C extends IdentifierColumn>(
  columns: readonly C[],
  region: PhoneRegion | undefined,
): C[] {
  if (region === undefined) return [...columns];
  return columns.map((c) => (c.kind === 'phone' || c.kind === 'auto' ? { ...c, phoneRegion: region } : c));
}
