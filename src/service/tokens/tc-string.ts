/** Reads the consent signals of an IAB TCF consent string (TC string) that the operator's consent check needs. */

/**
 * What the consent check reads from a TC string's core segment. Sets hold the numbers whose bit is 1: purposes
 * 1-24, special features 1-12, vendor IDs. A version 1 string has no legitimate-interest or special-feature fields,
 * so those sets are empty for it.
 */
export interface TcConsent {
  version: 1 | 2;
  purposeConsents: ReadonlySet<number>;
  purposeLegitimateInterests: ReadonlySet<number>;
  specialFeatureOptIns: ReadonlySet<number>;
  vendorConsents: ReadonlySet<number>;
  vendorLegitimateInterests: ReadonlySet<number>;
}

export type TcReading = { ok: true; consent: TcConsent } | { ok: false; problem: string };

/**
 * Widths of the v2 core segment's fields between the version and the special features (IAB TCF v2 "TC String
 * Format"): created, lastUpdated, cmpId, cmpVersion, consentScreen, consentLanguage, vendorListVersion,
 * policyVersion, isServiceSpecific, useNonStandardTexts. None of them bears on consent.
 */
const V2_SKIPPED_HEAD_BITS = 36 + 36 + 12 + 12 + 6 + 12 + 12 + 6 + 1 + 1;
const SPECIAL_FEATURE_BITS = 12;
const PURPOSE_BITS = 24;
/** purposeOneTreatment (1) and publisherCC (12) lie between the purposes and the vendor sections. */
const BEFORE_VENDORS_BITS = 13;

const BASE64URL = /^[A-Za-z0-9_-]*={0,2}$/;

class Truncated extends Error {}

class BitReader {
  private at = 0;
  constructor(private readonly bytes: Buffer) {}

  read(width: number): number {
    let value = 0;
    for (let i = 0; i < width; i++) value = value * 2 + this.bit();
    return value;
  }

  /** The numbers 1..width whose bit is set, read as one bit field. */
  readSet(width: number): Set<number> {
    const set = new Set<number>();
    for (let n = 1; n <= width; n++) if (this.bit() === 1) set.add(n);
    return set;
  }

  skip(width: number): void {
    this.at += width;
    if (this.at > this.bytes.length * 8) throw new Truncated();
  }

  private bit(): number {
    if (this.at >= this.bytes.length * 8) throw new Truncated();
    const byte = this.bytes[this.at >> 3]!;
    const bit = (byte >> (7 - (this.at & 7))) & 1;
    this.at++;
    return bit;
  }
}

/** A vendor section: MaxVendorId, then either a bit field of that many vendors or a list of IDs and ID ranges. */
function readVendors(bits: BitReader): Set<number> {
  const maxVendorId = bits.read(16);
  if (bits.read(1) === 0) return bits.readSet(maxVendorId);
  const vendors = new Set<number>();
  const entries = bits.read(12);
  for (let e = 0; e < entries; e++) {
    const isRange = bits.read(1) === 1;
    const start = bits.read(16);
    const end = isRange ? bits.read(16) : start;
    for (let id = start; id <= end && id <= maxVendorId; id++) vendors.add(id);
  }
  return vendors;
}

function decodeSegment(text: string): Buffer | undefined {
  if (text === '' || !BASE64URL.test(text)) return undefined;
  const unpadded = text.replace(/=+$/, '');
  // one character left over holds only 6 bits: no whole byte, so the string was cut
  if (unpadded.length % 4 === 1) return undefined;
  return Buffer.from(unpadded, 'base64url');
}

/**
 * Decodes the consent signals of a TC string. Like the IAB's own decoders, it refuses a string whose segments are not
 * base64url, whose version is neither 1 nor 2, or whose fields run past its end; other segments (disclosed vendors,
 * publisher purposes) are checked for their encoding only, as consent is read from the core segment alone.
 */
export function readTcString(text: string): TcReading {
  const segments = text.split('.');
  const decoded = segments.map(decodeSegment);
  if (decoded.some((bytes) => bytes === undefined)) return { ok: false, problem: 'not base64url' };
  const bits = new BitReader(decoded[0]!);
  try {
    const version = bits.read(6);
    if (version === 1) return { ok: true, consent: versionOne() };
    if (version !== 2) return { ok: false, problem: `version ${version} is not 1 or 2` };
    bits.skip(V2_SKIPPED_HEAD_BITS);
    const specialFeatureOptIns = bits.readSet(SPECIAL_FEATURE_BITS);
    const purposeConsents = bits.readSet(PURPOSE_BITS);
    const purposeLegitimateInterests = bits.readSet(PURPOSE_BITS);
    bits.skip(BEFORE_VENDORS_BITS);
    const vendorConsents = readVendors(bits);
    const vendorLegitimateInterests = readVendors(bits);
    return {
      ok: true,
      consent: {
        version: 2,
        purposeConsents,
        purposeLegitimateInterests,
        specialFeatureOptIns,
        vendorConsents,
        vendorLegitimateInterests,
      },
    };
  } catch (err) {
    if (err instanceof Truncated) return { ok: false, problem: 'the string ends inside a field' };
    throw err;
  }
}

/**
 * A version 1 string (the withdrawn TCF v1 format) carries no special-feature opt-ins, so it can never pass the
 * operator's check; its fields are not read.
 */
function versionOne(): TcConsent {
  const none = new Set<number>();
  return {
    version: 1,
    purposeConsents: none,
    purposeLegitimateInterests: none,
    specialFeatureOptIns: none,
    vendorConsents: none,
    vendorLegitimateInterests: none,
  };
}
