import { chmodSync } from 'node:fs';
import { closeOnFailure } from '../../pipeline/io/close-on-failure.js';
import { openSink as defaultOpenSink } from '../../pipeline/io/output/sink.js';
import { InputError, type TableSource } from '../../pipeline/io/table.js';
import { openInput, settleInput } from '../../pipeline/jobs/run-input.js';
import {
  BatchStopped,
  generateTokenBatch,
  RunConsentRefused,
  validateTokenBatch,
  type TokenBatchRun,
} from '../../pipeline/tokens/token-batch.js';
import { EXIT, UserError } from '../shared/exit-codes.js';
import { phoneRegionHint } from '../../pipeline/map/phone-region-hint.js';
import { createProgress, loadSpinner } from '../shared/progress.js';
import { refuseOverlappingPaths, standardOutputs } from '../shared/output-paths.js';
import { requestCounters } from '../../pipeline/run/run-report.js';
import { writeLine } from '../../pipeline/run/log-lines.js';
import { formatCount, formatDuration, makeSummary, writeSummaryJson } from '../../pipeline/run/summary.js';
import { sinkCompression, type OutputCompression, type OutputFormat } from '../shared/options.js';
import type { PhoneRegion } from '../../identity/index.js';
import {
  failureAdvice,
  note,
  UNREADABLE_CONSENT_FLAG,
  withConnection,
  type Connect,
  type TokenIo,
} from './token-io.js';
import { DEFAULT_TOKEN_CONCURRENCY, MAX_TOKEN_CONCURRENCY } from './token-numbers.js';

/** Flags of `token generate --input` and `token validate --input`. */
export interface TokenBatchFlags {
  input?: string;
  /** -o FILE; stdout when absent or '-'. */
  output?: string;
  format?: OutputFormat;
  /** --compress; absent: by the -o name. */
  compress?: OutputCompression;
  concurrency?: number;
  /** No progress and no summary on stderr. */
  quiet?: boolean;
  summaryJson?: string;
  /** --phone-region (or the profile's): national phone numbers are read as this country's. */
  phoneRegion?: PhoneRegion;
  /** --phone-region-col: each row's phones are read in the country this column names. */
  phoneRegionColumn?: string;
  /** --null-value: identifier cells so written are empty (besides \N). */
  nullValues?: string[];
  /** --tcf-consent-string: sent with every generate request whose row has no consent string of its own. */
  tcfConsentString?: string;
}

export interface TokenBatchDeps {
  io: TokenIo;
  connect: Connect;
  openSink?: typeof defaultOpenSink;
}

export { DEFAULT_TOKEN_CONCURRENCY, MAX_TOKEN_CONCURRENCY } from './token-numbers.js';

export async function runTokenBatch(
  which: 'generate' | 'validate',
  flags: TokenBatchFlags,
  deps: TokenBatchDeps,
): Promise<number> {
  const input = flags.input;
  if (input === undefined) throw new UserError('--input FILE is required for a batch');
  const concurrency = flags.concurrency ?? DEFAULT_TOKEN_CONCURRENCY;
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > MAX_TOKEN_CONCURRENCY) {
    throw new UserError(`--concurrency must be a whole number from 1 to ${MAX_TOKEN_CONCURRENCY}`);
  }
  const toFile = flags.output !== undefined && flags.output !== '-';
  refuseOverlappingPaths([{ flag: '--input', path: input }], standardOutputs(flags));

  let source: TableSource;
  try {
    // settled once, as map's is: the format by the name, the reading's defaults filled in; parsed on this thread
    const spec = await settleInput([input], {});
    source = (await openInput(spec, { stdin: deps.io.stdin, rowThreads: 0, findHeaderless: false })) as TableSource;
  } catch (err) {
    throw asUserError(err);
  }
  for (const n of source.notes) note(deps.io, n);
  return closeOnFailure(source, () => tokenRows(source, which, flags, concurrency, toFile, deps));
}

async function tokenRows(
  source: TableSource,
  which: 'generate' | 'validate',
  flags: TokenBatchFlags,
  concurrency: number,
  toFile: boolean,
  deps: TokenBatchDeps,
): Promise<number> {
  const command = `token ${which}`;
  const openSink = deps.openSink ?? defaultOpenSink;
  const format = flags.format ?? 'csv';
  return withConnection(deps.connect, { apiKey: true, clientSecret: true }, async ({ client }) => {
    const startedMs = deps.io.now();
    await loadSpinner(deps.io.stderr);
    const progress = createProgress({
      label: command,
      quiet: flags.quiet,
      stream: deps.io.stderr,
      dataOnStdout: !toFile,
    });
    const phones = { validPhones: 0, phonesNeedingRegion: 0 };
    const run: TokenBatchRun = {
      source,
      client,
      concurrency,
      phones,
      ...(flags.phoneRegion !== undefined ? { phoneRegion: flags.phoneRegion } : {}),
      ...(flags.phoneRegionColumn !== undefined ? { phoneRegionColumn: flags.phoneRegionColumn } : {}),
      ...(flags.nullValues !== undefined ? { nullValues: flags.nullValues } : {}),
      ...(flags.tcfConsentString !== undefined ? { tcfConsentString: flags.tcfConsentString } : {}),
      openSink: (header) =>
        openSink({
          path: flags.output,
          format,
          ...sinkCompression(flags),
          header,
          ...(toFile ? {} : { stream: deps.io.stdout }),
        }),
      onRow: (done) => progress.update({ done, retries: client.stats.retries, http429: client.stats.http429 }),
    };
    const finish = async (
      counts: Record<string, number> & { rows: number; error: number },
      words: string,
    ): Promise<number> => {
      progress.stop();
      const summary = makeSummary({
        command,
        rows: counts.rows,
        status: { error: counts.error, optout: counts.optout ?? 0, invalid: counts.invalid ?? 0 },
        ...requestCounters(client.stats),
        startedMs,
        endedMs: deps.io.now(),
        extra: { results: counts },
      });
      if (!flags.quiet) {
        writeLine(
          deps.io.stderr,
          `${command}: ${formatCount(counts.rows)} rows in ${formatDuration(summary.duration_s)}: ${words}; ` +
            `${formatCount(summary.requests)} requests, ${formatCount(summary.retries)} retries, ${formatCount(summary.http_429)} x 429`,
          { counts: summary },
        );
      }
      const hint = phoneRegionHint(flags.phoneRegion !== undefined || flags.phoneRegionColumn !== undefined, phones);
      if (hint !== undefined && !flags.quiet) note(deps.io, hint);
      if (flags.summaryJson !== undefined) await writeSummaryJson(flags.summaryJson, summary);
      return counts.error > 0 ? EXIT.partial : EXIT.ok;
    };
    try {
      if (which === 'validate') {
        const c = await validateTokenBatch(run);
        const code = await finish(
          { rows: c.rows, true: c.valid, false: c.invalid, invalid: c.rejected, error: c.error },
          `${formatCount(c.valid)} true, ${formatCount(c.invalid)} false, ${formatCount(c.rejected)} invalid, ${formatCount(c.error)} error`,
        );
        if (c.invalid > 0 && !flags.quiet)
          note(
            deps.io,
            'false usually means the identifier was formatted differently when the token was made: compare the hash column',
          );
        return code;
      }
      // The rows carry refresh_response_keys: the file is made private from its first byte (the sink creates its
      // temp file under this umask) and again after the rename, whatever mode the sink used.
      const umask = toFile ? process.umask(0o077) : undefined;
      let c: Awaited<ReturnType<typeof generateTokenBatch>>;
      try {
        c = await generateTokenBatch(run);
      } finally {
        if (umask !== undefined) process.umask(umask);
      }
      if (toFile) chmodSync(flags.output!, 0o600);
      return await finish(
        {
          rows: c.rows,
          success: c.success,
          optout: c.optout,
          ...(c.insufficient_user_consent > 0 ? { insufficient_user_consent: c.insufficient_user_consent } : {}),
          invalid: c.invalid,
          error: c.error,
        },
        `${formatCount(c.success)} success, ${formatCount(c.optout)} optout, ` +
          (c.insufficient_user_consent > 0
            ? `${formatCount(c.insufficient_user_consent)} insufficient_user_consent, `
            : '') +
          `${formatCount(c.invalid)} invalid, ${formatCount(c.error)} error`,
      );
    } catch (err) {
      progress.stop();
      if (err instanceof RunConsentRefused) {
        const outcome = toFile ? 'no output file written' : 'the rows on stdout are incomplete';
        throw new UserError(`${UNREADABLE_CONSENT_FLAG} (${outcome})`);
      }
      if (err instanceof BatchStopped) {
        const advice = failureAdvice(err.failure, 'GENERATOR');
        throw new UserError(
          `stopped (${toFile ? 'no output file written' : 'the rows on stdout are incomplete'}): ${advice.message}`,
          advice.exitCode,
        );
      }
      throw asUserError(err);
    }
  });
}

function asUserError(err: unknown): unknown {
  if (err instanceof InputError) return new UserError(err.message);
  return err;
}
