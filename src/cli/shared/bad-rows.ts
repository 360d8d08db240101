/** `--on-bad-row fail|skip` and `--bad-rows FILE`: the flags of records that cannot be read. */
import { Option, type Command } from 'commander';
import type { BadRowFlags } from '../../pipeline/run/bad-rows-output.js';

export function addBadRowOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option(
        '--on-bad-row <mode>',
        'a record that cannot be read (invalid UTF-8, a NUL, a quote never closed, over 16 MB, a JSONL line that is not an object): fail ends the run; skip leaves it out, lists it (--bad-rows) and ends with exit code 9',
      )
        .choices(['fail', 'skip'])
        .default('fail'),
    )
    .option(
      '--bad-rows <file>',
      'with --on-bad-row skip: list the skipped records here (file, line, reason; CSV or .jsonl)',
    );
}

/** The typed flags out of commander's options. */
export function badRowFlags(opts: Record<string, unknown>): BadRowFlags {
  return {
    onBadRow: opts.onBadRow === 'skip' ? 'skip' : 'fail',
    ...(typeof opts.badRows === 'string' ? { badRows: opts.badRows } : {}),
  };
}
