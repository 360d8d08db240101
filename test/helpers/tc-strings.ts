// TCF consent strings for the consent tests, written by the IAB's own encoder so no test trusts our decoder to make one.
import { Segment, SegmentEncoder, TCModel } from '@iabtcf/core';

/** The string the official Python client's EUID integration test sends, expecting insufficient_user_consent. */
export const PYTHON_CLIENT_TC_STRING = 'CPehXK9PehXK9ABAMBFRACBoADAAAEJAAIYgAKwAQAKgArABAAqAAA';
/** The string the same tests send expecting a token: purposes 1, 3, 4 by consent, 2, 7, 10 by legitimate interest. */
export const PYTHON_CLIENT_GRANTING_TC_STRING = 'CPhJRpMPhJRpMABAMBFRACBoALAAAEJAAIYgAKwAQAKgArABAAqAAA';

/** The purposes EUID needs vendor 21 to hold. */
export const EUID_PURPOSES = [1, 2, 3, 4, 7, 10];

export interface Grants {
  vendorConsents?: number[];
  vendorLegitimateInterests?: number[];
  purposeConsents?: number[];
  purposeLegitimateInterests?: number[];
  specialFeatureOptins?: number[];
}

/** Everything EUID needs, by consent: vendor 21, its six purposes, special feature 1. */
export const FULL_GRANTS: Grants = { vendorConsents: [21], purposeConsents: EUID_PURPOSES, specialFeatureOptins: [1] };

/**
 * A TC string's core segment. The segment encoder is used directly: the full encoder wants a Global Vendor List,
 * which only the network has.
 */
export function tcString(grants: Grants): string {
  const model = new TCModel();
  model.cmpId = 10;
  model.cmpVersion = 2;
  model.vendorListVersion = 150;
  model.policyVersion = 4;
  model.isServiceSpecific = true;
  model.vendorConsents.set(grants.vendorConsents ?? []);
  model.vendorLegitimateInterests.set(grants.vendorLegitimateInterests ?? []);
  model.purposeConsents.set(grants.purposeConsents ?? []);
  model.purposeLegitimateInterests.set(grants.purposeLegitimateInterests ?? []);
  model.specialFeatureOptins.set(grants.specialFeatureOptins ?? []);
  return SegmentEncoder.encode(model, Segment.CORE);
}
