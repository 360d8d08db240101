import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startServe, type ServeProcess } from '../helpers/map-e2e-processes.js';
import {
  describeEnd,
  REFRESH_PATH,
  requireBuilt,
  runAndKill,
  scaled,
  seeded,
  serveEnv,
  stackLines,
  tempDir,
  type KillPoint,
} from './harness.js';
import { recordWhenPassed } from './results.js';

/**
 * Crashes of `token refresh --in FILE --update`: SIGKILL and SIGINT at seeded points while the refresh is on its
 * way (the service answers after 400 ms) or being written. The identity file must be the old identity or the new
 * one, byte for byte whole, never torn and never looser than 0600; running the command again refreshes it.
 */

const POINTS = scaled(10);
const SEED = 0x746f6b;
const EMAIL = 'crash.token@example.com';
const FIELDS = [
  'advertising_token',
  'refresh_token',
  'identity_expires',
  'refresh_from',
  'refresh_expires',
  'refresh_response_key',
];

const dir = tempDir('crash-token');
let serve: ServeProcess;
let identityFile: string;
const figures = { crashes: 0, sigkill: 0, sigint: 0, left_old: 0, left_new: 0, reruns_ok: 0, torn_files: 0 };

/** A whole identity as token generate/refresh write it, or the reason it is not one. */
function identityProblem(text: string): string | null {
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return 'not JSON';
  }
  for (const field of FIELDS) if (parsed[field] === undefined || parsed[field] === '') return `no ${field}`;
  if (typeof parsed.refresh_token !== 'string' || parsed.refresh_token.length !== 388)
    return 'refresh_token is not 388 characters';
  return null;
}

recordWhenPassed('crash_token_refresh', () => figures);

beforeAll(async () => {
  requireBuilt();
  serve = await startServe(['--seed', 'reliability-crash-token', '--latency-ms', '400']);
  identityFile = dir.file('identity.json');
  const made = await runCli(['token', 'generate', '--email', '-', '--out', identityFile], {
    env: serveEnv(serve),
    input: `${EMAIL}\n`,
  });
  expect(made.code, made.stderr).toBe(0);
  expect(identityProblem(readFileSync(identityFile, 'utf8'))).toBeNull();
}, 60_000);

afterAll(async () => {
  await serve?.stop();
  dir.remove();
});

describe(`token refresh --in FILE --update killed at ${POINTS} seeded points`, () => {
  const random = seeded(SEED);
  const points: KillPoint[] = Array.from({ length: POINTS }, (_, i) =>
    i % 4 < 2
      ? // by the clock from the start: while it starts, reads the file, sends
        { signal: i % 2 === 0 ? 'SIGKILL' : 'SIGINT', afterRequests: 0, delayMs: 150 + random.int(600) }
      : // around the answer (400 ms after the request arrived) and the rename of the new file
        { signal: i % 2 === 0 ? 'SIGKILL' : 'SIGINT', afterRequests: 1, delayMs: 330 + random.int(150) },
  );
  points.forEach((point, i) => {
    it(`#${i + 1}: ${point.signal} ${point.afterRequests > 0 ? `${point.delayMs} ms after the request reached the service` : `${point.delayMs} ms after the start`}`, async () => {
      const env = serveEnv(serve);
      const before = readFileSync(identityFile, 'utf8');
      const killed = await runAndKill(
        ['token', 'refresh', '--in', identityFile, '--update'],
        env,
        serve.url,
        REFRESH_PATH,
        point,
      );
      expect(stackLines(killed.stderr)).toEqual([]);
      if (killed.killed) {
        figures.crashes++;
        if (point.signal === 'SIGKILL') figures.sigkill++;
        else figures.sigint++;
        // no handler of its own: Ctrl-C ends the process as the shell reports with 130
        if (point.signal === 'SIGINT')
          expect(killed.code === 130 || killed.signal === 'SIGINT', describeEnd(killed)).toBe(true);
      } else {
        expect(killed.code, killed.stderr).toBe(0);
      }
      const after = readFileSync(identityFile, 'utf8');
      const problem = identityProblem(after);
      if (problem !== null) figures.torn_files++;
      expect(problem).toBeNull();
      if (after === before) figures.left_old++;
      else {
        figures.left_new++;
        expect(JSON.parse(after).refresh_token).not.toBe(JSON.parse(before).refresh_token);
      }
      expect(statSync(identityFile).mode & 0o777).toBe(0o600);
      // nothing else but an abandoned temp file of the killed process
      for (const name of readdirSync(dirname(identityFile))) {
        if (name !== basename(identityFile)) expect(name).toMatch(/^\.identity\.json\.\d+\.[0-9a-f]+\.tmp$/);
      }

      const again = await runCli(['token', 'refresh', '--in', identityFile, '--update'], { env });
      expect(again.code, again.stderr).toBe(0);
      figures.reruns_ok++;
      const renewed = readFileSync(identityFile, 'utf8');
      expect(identityProblem(renewed)).toBeNull();
      expect(renewed).not.toBe(after);
    }, 60_000);
  });

  it('the identity left at the end is good: its advertising token validates for the email', async () => {
    const { advertising_token: token } = JSON.parse(readFileSync(identityFile, 'utf8')) as {
      advertising_token: string;
    };
    const checked = await runCli(['token', 'validate', '--token', token, '--email', '-'], {
      env: serveEnv(serve),
      input: `${EMAIL}\n`,
    });
    expect(checked.code, checked.stderr).toBe(0);
    expect(checked.stdout.trim()).toBe('true');
  });
});
