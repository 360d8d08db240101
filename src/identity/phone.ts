/**
 * The service does not normalize phones: it accepts `+` followed by 10 to 15 ASCII digits and nothing else
 * (uid2-operator InputUtil.isPhoneNumberNormalized). The value is hashed verbatim.
 */
export function isNormalizedPhone(input: string): boolean {
  const n = input.length;
  if (n < 11 || n > 16 || input.charCodeAt(0) !== 43) return false;
  for (let i = 1; i < n; i++) {
    const c = input.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}
