/** What the flags add to the identifier columns: the phone region (one, or each row's) and the null markers. */
import { parsePhoneRegion, PhoneRegionError, type PhoneRegion } from '../../identity/index.js';
import { EXIT, UserError } from '../run/exit-codes.js';
import { ColumnError, findColumn, type IdentifierColumn } from './identifier-columns.js';

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

/** The run's region: the flag, else the profile's phone_region (checked here, said by where it came from). */
export function chooseRegion(
  flag: PhoneRegion | undefined,
  config: { phoneRegion?: { value: string; from: string } | undefined } | undefined,
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

/** The columns with the user's markers on each of them (all kinds: a NULL is no hash either). */
export function withNullMarkers<C extends IdentifierColumn>(
  columns: readonly C[],
  markers: readonly string[] | undefined,
): C[] {
  if (markers === undefined || markers.length === 0) return [...columns];
  return columns.map((c) => ({ ...c, nullMarkers: [...markers] }));
}
