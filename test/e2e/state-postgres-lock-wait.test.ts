// remap-due and optout-check --wait on a PostgreSQL state: waiting for another run's hold on their share.
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runMap } from '../../src/cli/map/map.js';
import { runOptoutCheck } from '../../src/cli/optout-check/optout-check.js';
import { runRemapDue } from '../../src/cli/remap-due/remap-due.js';
import type { Shard } from '../../src/pipeline/shard/shard-spec.js';
import type { InputCommandDeps } from '../../src/cli/shared/command-context.js';
import type { StateBackend } from '../../src/state/backend.js';
import { openStateBackend } from '../../src/state/open-backend.js';
import { tempDir } from '../helpers/map-e2e-data.js';
import { usePostgres } from '../helpers/postgres.js';

// remap-due and optout-check --state on a PostgreSQL state wait for another run's hold on their share with --wait
// SECONDS, as on a state file, instead of failing at once. In this process, against the embedded service: each
// command's run function is called with its typed options and deps, without the command parser.
const pg = usePostgres();
const dir = tempDir('postgres-lock-wait');
let url: string;

function deps(): InputCommandDeps {
  const stdin = Object.assign(new PassThrough(), { isTTY: true });
  return {
    stdin,
    stdout: new PassThrough().resume(),
    stderr: new PassThrough().resume(),
    env: { XDG_CONFIG_HOME: dir.path },
    now: () => Date.now(),
  };
}

/** Another run's hold on a command's whole share: its advisory lock, taken through a second connection. */
async function holdShare(command: string, shard?: Shard): Promise<StateBackend> {
  const holder = await openStateBackend(url, { envFingerprint: 'UID2:local', create: false });
  await holder.lock({ kind: 'sweep', command, ...(shard !== undefined ? { shard } : {}) });
  return holder;
}

beforeAll(async () => {
  url = pg.schemaUrl();
  const input = dir.file('in.csv', 'email\nalice@example.com\nbob@example.com\n');
  const code = await runMap(
    {
      input,
      state: url,
      connection: { env: 'local' },
      output: { output: dir.file('m.csv'), format: 'csv', quiet: true },
    },
    deps(),
  );
  expect(code).toBe(0);
}, 120_000);

afterAll(() => dir.remove());

const commands: [string, (wait: number | undefined, shard?: Shard) => Promise<number>][] = [
  [
    'remap-due',
    (wait, shard) =>
      runRemapDue(
        {
          state: url,
          ...(shard !== undefined ? { shard } : {}),
          dryRun: false,
          ...(wait !== undefined ? { wait } : {}),
          connection: { env: 'local' },
          output: { format: 'csv', quiet: true },
        },
        deps(),
      ),
  ],
  [
    'optout-check',
    (wait, shard) =>
      runOptoutCheck(
        {
          ...(shard !== undefined ? { shard } : {}),
          reading: {},
          onlyOptedOut: false,
          privateOperator: false,
          state: url,
          ...(wait !== undefined ? { wait } : {}),
          connection: { env: 'local' },
          output: { output: dir.file('swept.csv'), format: 'csv', quiet: true },
        },
        deps(),
      ),
  ],
];

describe.each(commands)('%s --wait SECONDS on a PostgreSQL state', (command, run) => {
  it('without --wait, a held share is refused at once', async () => {
    const holder = await holdShare(command);
    try {
      await expect(run(undefined)).rejects.toMatchObject({
        name: 'StateLockedError',
        message: expect.stringMatching(`another uid2-batch run is doing ${command} \\(shard all\\)`),
      });
    } finally {
      await holder.close();
    }
  });

  it('with --wait, runs once the other run lets go', async () => {
    const holder = await holdShare(command);
    // the other run ends a moment after this one has started waiting
    const release = setTimeout(() => void holder.close(), 500);
    try {
      expect(await run(30)).toBe(0);
    } finally {
      clearTimeout(release);
      await holder.close();
    }
  });

  it('with --wait, a share still held when the time is up is refused as without it', async () => {
    const holder = await holdShare(command);
    try {
      const started = Date.now();
      await expect(run(0.3)).rejects.toMatchObject({ name: 'StateLockedError' });
      expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    } finally {
      await holder.close();
    }
  });
});

describe.each(commands)('%s --shard of another N on a PostgreSQL state', (command, run) => {
  const ofThree: Shard = { index: 1, count: 3 };
  const ofFour: Shard = { index: 2, count: 4 };

  it('is refused in one line naming both counts while a shard of another N runs', async () => {
    const holder = await holdShare(command, ofThree);
    try {
      await expect(run(undefined, ofFour)).rejects.toMatchObject({
        name: 'StateLockedError',
        message: `${command} --shard K/4 cannot run while runners of ${command} --shard K/3 hold ${
          holder.where
        } (shares of different counts overlap); wait for those runners to finish, or use --shard K/3`,
      });
    } finally {
      await holder.close();
    }
  });

  it('with --wait, runs once the runners of the other N let go', async () => {
    const holder = await holdShare(command, ofThree);
    const release = setTimeout(() => void holder.close(), 500);
    try {
      expect(await run(30, ofFour)).toBe(0);
    } finally {
      clearTimeout(release);
      await holder.close();
    }
  });
});
