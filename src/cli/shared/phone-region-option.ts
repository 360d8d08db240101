// --phone-region CC (or a profile's phone_region): the country national phone numbers are read in; --phone-region-col
// COL: the column naming each row's country.
import type { Command } from 'commander';
import type { ResolvedConfig } from '../../config/index.js';
import { parsePhoneRegion, PhoneRegionError, type PhoneRegion } from '../../identity/index.js';
import { ColumnError, findColumn, type IdentifierColumn } from '../../pipeline/map/identifier-columns.js';
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

/**
 * Where --phone-region-col is in the input's header: a usage error (exit 2) naming the columns there are when it is
 * absent, or when it is one of the identifier columns themselves.
 */
export function phoneRegionColumnIndex(
  header: readonly string[],
  name: string,
  columns: readonly IdentifierColumn[],
  source: string,
): number {
  let index: number;
  try {
    index = findColumn(header, name, '--phone-region-col', source);
  } catch (err) {
    if (err instanceof ColumnError) throw new UserError(err.message, EXIT.usage);
    throw err;
  }
  if (columns.some((c) => c.index === index))
    throw new UserError(
      `--phone-region-col: column '${header[index]}' is an identifier column; give the column that holds each row's country`,
      EXIT.usage,
    );
  return index;
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

/**
 * The columns with the region set on those that may hold phones (phone and auto); hash columns need none. With
 * `regionIndex` (--phone-region-col) each row's country is read there, and `region` is for rows that leave it empty.
 */
export function withPhoneRegion<C extends IdentifierColumn>(
  columns: readonly C[],
  region: PhoneRegion | undefined,
  regionIndex?: number,
): C[] {
  if (region === undefined && regionIndex === undefined) return [...columns];
  return columns.map((c) =>
    c.kind === 'phone' || c.kind === 'auto'
      ? {
          ...c,
          ...(region !== undefined ? { phoneRegion: region } : {}),
          ...(regionIndex !== undefined ? { phoneRegionIndex: regionIndex } : {}),
        }
      : c,
  );
}
