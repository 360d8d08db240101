// The one line a run without a phone region says when most of its phones were refused for want of a country code.
import type { IdentifierColumn } from './identifier-columns.js';
import { formatCount } from '../run/summary.js';

/** What a run counted of its phones (MapRunCounts, HashCounts, a token batch's tally). */
export interface PhoneTally {
  validPhones: number;
  /** Invalid cells written as phone numbers are, which a phone region would have read (needsPhoneRegion). */
  phonesNeedingRegion: number;
}

/** Whether any column reads phones with a region (--phone-region, a profile's phone_region, --phone-region-col). */
export function readsRegion(columns: readonly Pick<IdentifierColumn, 'phoneRegion' | 'phoneRegionIndex'>[]): boolean {
  return columns.some((c) => c.phoneRegion !== undefined || c.phoneRegionIndex !== undefined);
}

/**
 * The hint, or undefined: said only by a run given no region whose phones refused for want of one outnumber the
 * valid phones. Counts only, never a cell.
 */
export function phoneRegionHint(regionGiven: boolean, tally: PhoneTally): string | undefined {
  if (regionGiven) return undefined;
  const wanting = tally.phonesNeedingRegion;
  if (wanting === 0 || wanting <= tally.validPhones) return undefined;
  return (
    `most phones were invalid for want of a country code (${formatCount(wanting)} of ` +
    `${formatCount(wanting + tally.validPhones)} are written as national or formatted numbers, not E.164): add ` +
    "--phone-region CC (the country they are written in) or --phone-region-col COL (a column naming each row's country)"
  );
}
