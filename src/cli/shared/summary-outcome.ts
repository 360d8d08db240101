// The end of every run with --summary-json: the file says the outcome, the exit code and the error, whatever failed.
import { EXIT } from './exit-codes.js';
import { commandWordsIn, flagValueIn } from './raw-args.js';
import { mayWriteReportAt } from './report-commands.js';
import { mayHoldSummary } from './summary-file.js';
import { summaryWrittenTo, writeSummaryJson } from '../../pipeline/run/summary.js';

/** The --summary-json path in a command line, found even when the command failed before its flags were read. */
export function summaryJsonPathIn(args: readonly string[]): string | undefined {
  return flagValueIn(args, '--summary-json');
}

export { commandWordsIn };

function outcomeOf(exitCode: number, written: Record<string, unknown> | undefined, failed: boolean): string {
  if (exitCode === EXIT.interrupted || exitCode === EXIT.hangup) return 'interrupted';
  if (failed) return 'failed';
  if (typeof written?.outcome === 'string') return written.outcome;
  return exitCode === EXIT.ok || exitCode === EXIT.partial || exitCode === EXIT.skipped ? 'completed' : 'failed';
}

export interface RunEnd {
  /** From --summary-json. */
  path: string;
  /** `map`, `token generate`, ... */
  command: string;
  exitCode: number;
  /** The error line the user was shown, when the run ended by one. */
  error?: string;
}

/**
 * Completes the run's --summary-json: the summary the command wrote (or, when it failed before writing one, just
 * the command) with `outcome`, `exit_code` and, for a failure, `error`: the same line as on stderr. A cron wrapper
 * then learns from the file alone how the run ended. Returns a line to print when the file cannot be written.
 */
export async function completeSummaryJson(end: RunEnd): Promise<string | undefined> {
  const written = summaryWrittenTo(end.path);
  // anything else (the input given as --summary-json by mistake) is left alone: the refusal already said so
  if (written === undefined && !mayHoldSummary(end.path)) return undefined;
  // a command that writes no object has refused an s3:// one, or has not got as far as to (a usage error)
  if (!mayWriteReportAt(end.command, end.path)) return undefined;
  const body: Record<string, unknown> = {
    ...(written ?? { command: end.command }),
    outcome: outcomeOf(end.exitCode, written, end.error !== undefined),
    exit_code: end.exitCode,
    ...(end.error !== undefined ? { error: end.error } : {}),
  };
  try {
    await writeSummaryJson(end.path, body);
    return undefined;
  } catch (err) {
    return `cannot write --summary-json ${end.path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
  }
}
