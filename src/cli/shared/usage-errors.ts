// Commander's own error lines (unknown option, invalid choice...), quoted as every other error line is.
import { looksLikeSecretFlag } from '../../config/secret-flags.js';
import { printableErrorLine, quoted } from './user-values.js';

/** What an error line shows instead of the value of a flag that looks like it holds a secret. */
export const HIDDEN_VALUE = '<hidden>';

/**
 * Each text of the command line commander may quote (an argument, or the value after `=`), with the form an
 * error line shows: a secret-looking flag's value hidden, whether given after `=` or as the next argument.
 */
function shownForms(args: readonly string[]): Map<string, string> {
  const shown = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const eq = arg.indexOf('=');
    if (arg.startsWith('-') && eq !== -1) {
      const name = arg.slice(0, eq);
      const value = arg.slice(eq + 1);
      const secret = looksLikeSecretFlag(name);
      shown.set(arg, secret ? `${name}=${HIDDEN_VALUE}` : arg);
      // a secret stays hidden wherever else the same text was typed
      if (value !== '' && (secret || !shown.has(value))) shown.set(value, secret ? HIDDEN_VALUE : value);
    } else if (!shown.has(arg)) {
      shown.set(arg, arg);
    }
    const next = args[i + 1];
    if (arg.startsWith('-') && eq === -1 && looksLikeSecretFlag(arg) && next !== undefined)
      shown.set(next, HIDDEN_VALUE);
  }
  return shown;
}

/**
 * Commander's error line for `args` (the command line after the program name), made fit to print and to put in
 * --summary-json: each argument it quotes is shown as `quoted` shows a user value (80 characters at most, control
 * characters escaped), the value of a secret-looking flag (`--client_secret=...`) never, and the rest of the line
 * escaped and cut as every error line is. Commander quotes what the user typed between `'` without escaping, so the
 * arguments are looked for as they were typed, the longest first.
 */
export function usageErrorLine(message: string, args: readonly string[]): string {
  const line = message.replace(/\n+$/, '');
  const forms = [...shownForms(args)].filter(([typed]) => typed !== '').sort((a, b) => b[0].length - a[0].length);
  let out = '';
  let at = 0;
  while (at < line.length) {
    const quote = line.indexOf("'", at);
    if (quote === -1) break;
    const found = forms.find(([typed]) => line.startsWith(`'${typed}'`, quote));
    if (found === undefined) {
      out += line.slice(at, quote + 1);
      at = quote + 1;
      continue;
    }
    out += line.slice(at, quote) + quoted(found[1]);
    at = quote + found[0].length + 2;
  }
  out += line.slice(at);
  // what no argument accounts for (commander's own words, a suggestion) is still escaped, and the line cut
  return printableErrorLine(out);
}
