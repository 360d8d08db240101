// The tests' PostgreSQL harness: without the server's binaries it fails with how to install them.
import { describe, expect, it } from 'vitest';
import { postgresBinDir } from '../../bench/postgres-server.mjs';

describe('the PostgreSQL server of the tests', () => {
  it('finds initdb and postgres where Debian installs them', () => {
    expect(postgresBinDir()).toMatch(/bin$/);
  });

  it('fails, saying to install postgresql, when the binaries are absent', () => {
    expect(() => postgresBinDir('/nonexistent/postgresql', 'no-such-pg_config')).toThrow(
      /install Debian's `postgresql` package \(apt-get install -y --no-install-recommends postgresql\)/,
    );
  });
});
