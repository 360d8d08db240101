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
  return normalizePrintableAscii(input) ?? normalizeEachChar(input);
}

/** normalizeEmail's fast path has no answer: the input needs the character-by-character walk. */
const SLOW = undefined;

/**
 * Most inputs are printable ASCII with at most outer spaces; for them the walk below reduces to native string
 * operations. Returns SLOW (not null, which means invalid) for anything else: inner spaces, tabs, non-ASCII.
 */
function normalizePrintableAscii(input: string): string | null | undefined {
  let start = 0;
  let end = input.length;
  while (start < end && input.charCodeAt(start) === 32) start++;
  while (end > start && input.charCodeAt(end - 1) === 32) end--;
  for (let i = start; i < end; i++) {
    const code = input.charCodeAt(i);
    if (code <= 32 || code >= 127) return SLOW;
  }
  // only ASCII is left, so toLowerCase changes exactly A-Z, as the operator does
  const s = (start === 0 && end === input.length ? input : input.slice(start, end)).toLowerCase();
  const at = s.indexOf('@');
  if (at === -1 || at === s.length - 1 || s.indexOf('@', at + 1) !== -1) return null;
  const domain = s.slice(at + 1);
  let local: string;
  if (domain === 'gmail.com') {
    const plus = s.indexOf('+');
    local = s.slice(0, plus !== -1 && plus < at ? plus : at);
    if (local.includes('.')) local = local.replaceAll('.', '');
  } else {
    local = s.slice(0, at);
  }
  return local.length === 0 ? null : `${local}@${domain}`;
}

function normalizeEachChar(input: string): string | null {
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
