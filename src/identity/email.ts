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
 * Most inputs are printable ASCII with at most outer spaces; for them the walk below reduces to one pass over the
 * characters and at most one new string (none when the input is already normalized, the common case). Returns SLOW
 * (not null, which means invalid) for anything else: inner spaces, tabs, non-ASCII.
 */
function normalizePrintableAscii(input: string): string | null | undefined {
  let start = 0;
  let end = input.length;
  while (start < end && input.charCodeAt(start) === 32) start++;
  while (end > start && input.charCodeAt(end - 1) === 32) end--;
  let at = -1;
  let upper = false;
  for (let i = start; i < end; i++) {
    const code = input.charCodeAt(i);
    if (code <= 32 || code >= 127) return SLOW;
    if (code === 64) {
      // a second '@' is invalid whatever follows (the walk refuses it in the domain)
      if (at !== -1) return null;
      at = i;
    } else if (code <= 90 && code >= 65) upper = true;
  }
  if (at === -1 || at === start || at === end - 1) return null;
  if (isGmail(input, at + 1, end)) return gmailAddress(input, start, at, end, upper);
  const s = start === 0 && end === input.length ? input : input.slice(start, end);
  // only ASCII is left, so toLowerCase changes exactly A-Z, as the operator does
  return upper ? s.toLowerCase() : s;
}

const GMAIL = 'gmail.com';

/** Whether `input` from `from` to `to` (printable ASCII) is `gmail.com` once A-Z are lowercased. */
function isGmail(input: string, from: number, to: number): boolean {
  if (to - from !== GMAIL.length) return false;
  for (let i = 0; i < GMAIL.length; i++) {
    let code = input.charCodeAt(from + i);
    if (code <= 90 && code >= 65) code += 32;
    if (code !== GMAIL.charCodeAt(i)) return false;
  }
  return true;
}

/**
 * The gmail.com address `input` from `start` to `end`, whose '@' is at `at`: its local part's dots dropped,
 * `+suffix` cut, lowercased.
 */
function gmailAddress(input: string, start: number, at: number, end: number, upper: boolean): string | null {
  const plus = input.indexOf('+', start);
  const cut = plus !== -1 && plus < at ? plus : at;
  let local = input.slice(start, cut);
  if (local.includes('.')) local = local.replaceAll('.', '');
  else if (cut === at && !upper && start === 0 && end === input.length) return input;
  if (local.length === 0) return null;
  return `${upper ? local.toLowerCase() : local}@${GMAIL}`;
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
