import { describe, expect, it } from 'vitest';
import { openMapState } from '../../src/pipeline/jobs/map-state.js';

describe('map with a database state', () => {
  it('refuses --api v2 in one line that names the database without its password', async () => {
    const opening = Promise.resolve().then(() =>
      openMapState({
        location: 'postgres://batch:hunter2-pw@127.0.0.1:9/uid2?schema=a',
        mode: 'write',
        envFingerprint: 'uid2:integ',
        api: 'v2',
      }),
    );
    const err = await opening.then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toMatch(
      /^map --api v2 keeps its state in a file.*--state postgres:\/\/batch@127\.0\.0\.1:9\/uid2\?schema=a/,
    );
    expect(err?.message).not.toContain('hunter2');
    expect(err?.message).not.toContain('\n');
  });
});
