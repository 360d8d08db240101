// Flags given twice: a repeatable flag keeps every value; any other flag that takes a value is refused.
import type { Command, Option } from 'commander';
import { UserError } from './exit-codes.js';
import { quoted } from './user-values.js';

/**
 * The parser of a repeatable flag: every value is kept, in order. refuseRepeatedFlags recognizes repeatable
 * flags by this parser, so a flag is made repeatable by giving it this and nothing else.
 */
export function collectRepeated(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** What a refusal adds for a flag whose repetition has a known meaning elsewhere. */
const HINTS: Readonly<Record<string, string>> = {
  col: 'for several identifier columns, name each with --email-col, --phone-col, --email-hash-col or --phone-hash-col (those repeat)',
};

function takesValue(option: Option): boolean {
  return option.required || option.optional;
}

function isRepeatable(option: Option): boolean {
  return option.variadic || option.parseArg === (collectRepeated as Option['parseArg']);
}

function flagOf(option: Option): string {
  return option.long ?? option.short ?? option.name();
}

/**
 * Makes every command of `program` refuse a value flag given twice with different values unless it repeats: commander would keep the
 * last value silently, and `--col email_raw_uid --col phone_raw_uid` would check one column and say nothing.
 * The refusal is a usage error (exit 2) during parsing, before any file is opened.
 */
export function refuseRepeatedFlags(program: Command): void {
  const visit = (cmd: Command): void => {
    for (const option of cmd.options) {
      if (!takesValue(option) || isRepeatable(option)) continue;
      let first: string | undefined;
      let seen = false;
      cmd.on(`option:${option.name()}`, (value: unknown) => {
        const text = typeof value === 'string' ? value : '';
        if (!seen) {
          seen = true;
          first = text;
          return;
        }
        // the same value again drops nothing
        if (text === first) return;
        const hint =
          HINTS[option.name()] !== undefined && cmd.options.some((o) => o.long === '--email-col')
            ? `; ${HINTS[option.name()]}`
            : '';
        throw new UserError(
          `${flagOf(option)} was given twice (${quoted(first ?? '')}, then ${quoted(text)}); it takes one value: give it once${hint}`,
        );
      });
    }
    for (const sub of cmd.commands) visit(sub);
  };
  visit(program);
}
