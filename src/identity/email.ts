/**
 * Email normalization exactly as the operator does it (uid2-operator InputUtil.normalizeEmailString),
 * including its quirks, because a hash only matches if the bytes match:
 * - only ASCII A-Z are lowercased;
 * - only U+0020 is treated as a space: it is skipped anywhere before the first '@' and trimmed at the end of
 *   the domain (inner domain spaces are kept); tabs, CR, NBSP are ordinary characters;
 * - for the domain `gmail.com` (exactly, after lowercasing) dots are dropped and `+suffix` is cut from the local part;
 * - invalid: empty domain (so also no '@'), a second '@', an empty local part.
 * Returns null for an invalid address.
 */
export function normalizeEmail(input: string): string | null {
  let local = '';
  let gmailLocal = '';
  let domain = '';
  let pendingSpaces = '';
  let inDomain = false;
  let inExtension = false;
  for (let i = 0; i < input.length; i++) {
    let code = input.charCodeAt(i);
    if (code >= 65 && code <= 90) code += 32;
    if (!inDomain) {
      if (code === 32) continue;
      if (code === 64) {
        inDomain = true;
      } else if (code === 46) {
        local += '.';
      } else if (code === 43) {
        local += '+';
        inExtension = true;
      } else {
        const c = String.fromCharCode(code);
        local += c;
        if (!inExtension) gmailLocal += c;
      }
      continue;
    }
    if (code === 64) return null;
    if (code === 32) {
      pendingSpaces += ' ';
      continue;
    }
    if (pendingSpaces.length > 0) {
      domain += pendingSpaces;
      pendingSpaces = '';
    }
    domain += String.fromCharCode(code);
  }
  if (domain.length === 0) return null;
  const localToUse = domain === 'gmail.com' ? gmailLocal : local;
  if (localToUse.length === 0) return null;
  return `${localToUse}@${domain}`;
}
