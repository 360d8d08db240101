// Starts a PostgreSQL server of its own for the tests and the state bench: Debian's binaries, a cluster made by
// initdb in a temporary folder, listening on loopback only, stopped by its PID.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const INSTALL_HINT =
  "PostgreSQL server binaries (initdb, postgres) not found: install Debian's `postgresql` package " +
  '(apt-get install -y --no-install-recommends postgresql)';

/**
 * The folder of initdb and postgres: pg_config's bindir, or the newest `root`/N/bin (Debian's layout); throws
 * saying to install the package when there is none.
 */
export function postgresBinDir(root = '/usr/lib/postgresql', pgConfig = 'pg_config') {
  const candidates = [];
  try {
    candidates.push(
      execFileSync(pgConfig, ['--bindir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim(),
    );
  } catch {
    // no pg_config (the client package alone ships it); look where Debian installs servers
  }
  if (existsSync(root)) {
    const versions = readdirSync(root).filter((v) => /^\d+$/.test(v));
    versions.sort((a, b) => Number(b) - Number(a));
    for (const v of versions) candidates.push(join(root, v, 'bin'));
  }
  const dir = candidates.find((d) => existsSync(join(d, 'initdb')) && existsSync(join(d, 'postgres')));
  if (dir === undefined) throw new Error(INSTALL_HINT);
  return dir;
}

/** A TCP port free on loopback now. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** The uid and gid of the `postgres` user, which runs the server when we are root (postgres refuses root). */
function postgresUser() {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (line === undefined) throw new Error(`running as root and there is no postgres user: ${INSTALL_HINT}`);
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** The command and arguments that run `bin` as the postgres user when we are root, else as ourselves. */
function asServerUser(bin, args) {
  if (process.getuid?.() !== 0) return [bin, args];
  return ['setpriv', ['--reuid=postgres', '--regid=postgres', '--init-groups', '--', bin, ...args]];
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts a server: initdb in a new temporary folder (password authentication on TCP, for the `postgres` user),
 * then postgres on a free loopback port, waiting until it accepts connections. `settings` are extra server
 * settings (`-c name=value`). Returns the URL of its `postgres` database, its password, port and `stop()`.
 */
export async function startPostgres(settings = {}) {
  const bin = postgresBinDir();
  const dir = mkdtempSync(join(tmpdir(), 'uid2-batch-pg-'));
  const data = join(dir, 'data');
  const password = randomBytes(12).toString('hex');
  const pwfile = join(dir, 'pw');
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  if (process.getuid?.() === 0) {
    const { uid, gid } = postgresUser();
    chownSync(dir, uid, gid);
    chownSync(pwfile, uid, gid);
  }
  const [initCmd, initArgs] = asServerUser(join(bin, 'initdb'), [
    '-D',
    data,
    '-U',
    'postgres',
    `--pwfile=${pwfile}`,
    '--auth-host=scram-sha-256',
    '--auth-local=trust',
    '-E',
    'UTF8',
    '--no-sync',
  ]);
  try {
    execFileSync(initCmd, initArgs, { stdio: 'pipe' });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${String(err.stderr ?? err.message).trim()}`);
  }
  const port = await freePort();
  const extra = Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]);
  const [cmd, args] = asServerUser(join(bin, 'postgres'), [
    '-D',
    data,
    '-k',
    dir,
    '-h',
    '127.0.0.1',
    '-p',
    String(port),
    ...extra,
  ]);
  const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.on('data', (d) => {
    log = (log + d.toString()).slice(-4000);
  });
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  const pid = child.pid;
  const stop = async () => {
    if (!exited && pid !== undefined) {
      // SIGINT: a fast shutdown (open sessions are ended); setpriv exec()s, so this PID is the server's
      try {
        process.kill(pid, 'SIGINT');
      } catch {
        // already gone
      }
      for (let i = 0; i < 200 && !exited; i++) await sleep(50);
      if (!exited) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exited) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`postgres did not start: ${log.trim()}`);
    }
    try {
      execFileSync(join(bin, 'pg_isready'), ['-q', '-h', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
      break;
    } catch {
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`postgres did not accept connections within 60 s: ${log.trim()}`);
      }
      await sleep(100);
    }
  }
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    password,
    port,
    pid,
    stop,
  };
}
