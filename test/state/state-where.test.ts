import { describe, expect, it } from 'vitest';
import { openStateBackend } from '../../src/state/open-backend.js';

describe('a database that cannot be reached', () => {
  it('is named in one line without its password, however the URL gives it', async () => {
    for (const url of [
      'postgres://batch:hunter2-pw@127.0.0.1:1/uid2?schema=a',
      'postgres://batch@127.0.0.1:1/uid2?password=hunter2-pw&schema=a',
    ]) {
      const err = await openStateBackend(url, { envFingerprint: 'uid2:integ' }).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(err?.message).toMatch(/127\.0\.0\.1:1/);
      expect(err?.message).not.toContain('hunter2');
      expect(err?.message).not.toContain('\n');
    }
  });
});
