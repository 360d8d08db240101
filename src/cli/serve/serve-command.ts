/** Registers `uid2-batch serve`: its options and help; the local service is loaded only when it runs. */
import type { Command } from 'commander';
import { EXIT } from '../shared/exit-codes.js';
import { decimalNumber, wholeNumber } from '../shared/options.js';
import type { ServeFlags } from './serve.js';

const TEN_YEARS_S = 10 * 366 * 86_400;

const probability = (flag: string) => decimalNumber(flag, 0, 1);
const seconds = (flag: string) => wholeNumber(flag, 1, TEN_YEARS_S);

export function registerServe(program: Command): void {
  program
    .command('serve')
    .summary('run the local identity service (a faithful stand-in for the UID2/EUID operator, for tests and demos)')
    .description(
      [
        'Runs the local identity service, a faithful stand-in for the UID2/EUID operator for tests and demos. Prints {"url","api_key","client_secret"} on one line when ready; stops on Ctrl-C (SIGINT) or SIGTERM.',
        'Two clocks. Identity time decides salt buckets and their rotation, r and p, token lifetimes and expiry, opt-out times, the buckets endpoint and now_ms in /_local/stats. It starts at --now (default: the real time), runs at real speed, and jumps with POST /_local/clock {"advance_days": N} or {"set": "2026-01-01T00:00:00Z"}.',
        'Envelope time is what request timestamps must be within 2 minutes of, and what answers carry: the real time plus the distance of --now from the real time at start. POST /_local/clock never moves it, and neither does it move the CLI\'s own clock: remap-due picks what is due by its own now. So to run the nightly remap over simulated days, move both: POST /_local/clock {"advance_days": 30} for the service, and remap-due --now <the same simulated time> for the CLI (remap-due with nothing due says when the next entries come due). `serve --now <10 minutes from now>` behaves like an operator whose clock is 10 minutes off (every request refused for clock skew). To start at a given identity date without that skew, start without --now and POST {"set": ...}.',
      ].join('\n\n'),
    )
    .option(
      '--host <host>',
      'interface to listen on (default 127.0.0.1; anything else is reachable from other machines)',
    )
    .option('--port <port>', 'port (default 0 = a free port, see the printed url)', wholeNumber('--port', 0, 65535))
    .option('--api-key <key>', 'API key to accept (default: a fresh random key, printed)')
    .option('--client-secret <secret>', 'client secret, base64 of 32 bytes (default: fresh random, printed)')
    .option(
      '--seed <text>',
      'seed of every salt, bucket and token key: same seed, same raw UIDs (default uid2-batch-local)',
    )
    .option(
      '--now <time>',
      'identity time at start: ISO 8601 (no zone = UTC) or Unix seconds (default: now); also skews the envelope clock by as much, see above',
    )
    .option('--scope <scope>', 'uid2 (default) or euid')
    .option(
      '--optout-file <csv>',
      'CSV of opt-outs with a header of email, phone, email_hash, phone_hash, advertising_id, since_ms',
    )
    .option('--fault-429 <p>', 'probability of a bare 429 per API request', probability('--fault-429'))
    .option('--fault-500 <p>', 'probability of a 500 per API request', probability('--fault-500'))
    .option('--fault-drop <p>', 'probability of closing the connection without an answer', probability('--fault-drop'))
    .option('--latency-ms <ms>', 'delay before every API answer', wholeNumber('--latency-ms', 0, 600_000))
    .option(
      '--rate-limit <items>',
      'identity-map items admitted per second; above it a bare 429',
      wholeNumber('--rate-limit', 1, 1_000_000_000),
    )
    .option(
      '--identity-lifetime <s>',
      'advertising token lifetime, seconds (default 3600)',
      seconds('--identity-lifetime'),
    )
    .option('--refresh-from <s>', 'refresh_from after generation, seconds (default 900)', seconds('--refresh-from'))
    .option('--refresh-lifetime <s>', 'refresh token lifetime, seconds (default 86400)', seconds('--refresh-lifetime'))
    .action(async (flags: ServeFlags) => {
      const { runServe, stopOnSignal } = await import('./serve.js');
      await runServe(flags, { stdout: process.stdout, stderr: process.stderr, stopSignal: stopOnSignal() });
      process.exitCode = EXIT.ok;
    });
}
