// The processes of the benchmarks: the built CLI's `serve` in its own process, and what it costs.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const BIN = join(ROOT, 'bin', 'uid2-batch.js');

/** The environment of a child: no UID2_* settings of whoever runs the bench, no user config, no colour. */
export function childEnv(work, extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('UID2_')) env[k] = v;
  return { ...env, XDG_CONFIG_HOME: join(work, 'no-config'), NO_COLOR: '1', ...extra };
}

/**
 * `uid2-batch serve --port 0` on the real clock, with `args` (`--latency-ms 250`, say); resolves with the child and
 * its first line (url, credentials).
 */
export async function startServe(work, args = []) {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', ...args], {
    env: childEnv(work),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise((resolveLine, reject) => {
    let text = '';
    child.stdout.on('data', (d) => {
      text += d;
      const nl = text.indexOf('\n');
      if (nl >= 0) resolveLine(text.slice(0, nl));
    });
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}`)));
  });
  return { child, ...JSON.parse(line) };
}

/** Stops a serve started above, by its PID, and waits for it to exit. */
export async function stopServe(serve) {
  if (serve.child.exitCode !== null) return;
  process.kill(serve.child.pid, 'SIGTERM');
  await once(serve.child, 'exit');
}

/** CPU seconds a process has used so far (Linux /proc). */
export function cpuSecondsOf(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}
