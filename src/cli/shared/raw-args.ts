// The command line as typed, read before (or without) commander: for what must be known even when parsing fails.

/**
 * The value of `flag` in a command line (`--flag V` or `--flag=V`; the last one wins), read from the raw
 * arguments so that it is found even when the command failed before (or while) its flags were read.
 */
export function flagValueIn(args: readonly string[], flag: string): string | undefined {
  let found: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--') break;
    if (arg === flag && i + 1 < args.length) found = args[++i];
    else if (arg.startsWith(`${flag}=`)) found = arg.slice(flag.length + 1);
  }
  return found === '' ? undefined : found;
}

/** The program's own options that take a value: the word after them is not a command. */
const ROOT_VALUE_FLAGS: ReadonlySet<string> = new Set(['--log-format']);

/** The command words of a command line (`map`, `token generate`), for a run that ended before its command was known. */
export function commandWordsIn(args: readonly string[]): string {
  const words: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg.startsWith('-')) {
      if (words.length === 0 && ROOT_VALUE_FLAGS.has(arg)) i++;
      continue;
    }
    words.push(arg);
  }
  // a second word is a subcommand only for the commands that have them; otherwise it is the input file
  return words[0] === 'token' && words[1] !== undefined ? `token ${words[1]}` : (words[0] ?? '');
}
