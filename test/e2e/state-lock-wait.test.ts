import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runMap } from '../../src/cli/map/map.js';
import { runOptoutCheck } from '../../src/cli/optout-check/optout-check.js';
import { runRemapDue } from '../../src/cli/remap-due/remap-due.js';
import type { InputCommandDeps } from '../../src/cli/shared/command-context.js';
import { openState, openStateReader, type StateStore } from '../../src/state/index.js';
import { META_KEYS } from '../../src/state/schema.js';
import { tempDir } from '../helpers/map-e2e-data.js';

// remap-due and optout-check --state wait for the state file's lock with --wait SECONDS, as state checkpoint
// does, instead of failing at once while another run holds it. In this process, against the embedded service:
// each command's run function is called with its typed options and deps, without the command parser.
const dir = tempDir('lock-wait');
let statePath: string;

function deps(): InputCommandDeps & { err: () => string } {
  const stderr = new PassThrough();
  let err = '';
  stderr.on('data', (d: Buffer) => (err += d.toString()));
  const stdin = Object.assign(new PassThrough(), { isTTY: true });
  return {
    stdin,
    stdout: new PassThrough().resume(),
    stderr,
    env: { XDG_CONFIG_HOME: dir.path },
    now: () => Date.now(),
    err: () => err,
  };
}

/** Another run's hold on the state file: its lock, taken by a second store of the same file. */
function holdLock(): StateStore {
  const reader = openStateReader(statePath);
  const env = reader.getMeta(META_KEYS.envFingerprint) as string;
  reader.close();
  const holder = openState(statePath, { envFingerprint: env, create: false });
  holder.lock();
  return holder;
}

beforeAll(async () => {
  statePath = dir.file('s.db');
  const input = dir.file('in.csv', 'email\nalice@example.com\nbob@example.com\n');
  const code = await runMap(
    {
      input,
      state: statePath,
      connection: { env: 'local' },
      output: { output: dir.file('m.csv'), format: 'csv', quiet: true },
    },
    deps(),
  );
  expect(code).toBe(0);
});

afterAll(() => dir.remove());

const commands: [string, (wait: string | undefined) => Promise<number>][] = [
  [
    'remap-due',
    (wait) =>
      runRemapDue(
        {
          state: statePath,
          dryRun: false,
          ...(wait !== undefined ? { wait: Number(wait) } : {}),
          connection: { env: 'local' },
          output: { format: 'csv', quiet: true },
        },
        deps(),
      ),
  ],
  [
    'optout-check --state',
    (wait) =>
      runOptoutCheck(
        {
          reading: {},
          onlyOptedOut: false,
          privateOperator: false,
          state: statePath,
          ...(wait !== undefined ? { wait: Number(wait) } : {}),
          connection: { env: 'local' },
          output: { output: dir.file('swept.csv'), format: 'csv', quiet: true },
        },
        deps(),
      ),
  ],
];

describe.each(commands)('%s --wait SECONDS', (_name, run) => {
  it('without --wait, a held lock is refused at once (exit 2)', async () => {
    const holder = holdLock();
    try {
      await expect(run(undefined)).rejects.toMatchObject({ name: 'StateLockedError' });
    } finally {
      holder.close();
    }
  });

  it('with --wait, runs once the other run lets go', async () => {
    const holder = holdLock();
    // the other run ends a moment after this one has started waiting
    const release = setTimeout(() => holder.close(), 300);
    try {
      expect(await run('30')).toBe(0);
    } finally {
      clearTimeout(release);
      holder.close();
    }
  });

  it('with --wait, a lock still held when the time is up is refused as without it', async () => {
    const holder = holdLock();
    try {
      await expect(run('0.2')).rejects.toMatchObject({ name: 'StateLockedError' });
    } finally {
      holder.close();
    }
  });
});
