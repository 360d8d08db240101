import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, ROOT } from './map-e2e-build.js';

export interface ServeProcess {
  url: string;
  apiKey: string;
  clientSecret: string;
  pid: number;
  /** GET /_local/stats. */
  stats(): Promise<{ requests: Record<string, number>; items: Record<string, number>; faults: Record<string, number> }>;
  /** SIGTERM by PID, then waits for the exit. */
  stop(): Promise<void>;
}

/** Environment for every child: no profile file of the machine, no credentials from the shell. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('UID2_')) env[k] = v;
  return { ...env, XDG_CONFIG_HOME: join(tmpdir(), 'uid2-batch-e2e-no-config'), NO_COLOR: '1', ...extra };
}

/** Starts `uid2-batch serve --port 0 ...` in its own process and reads its ready line. */
export async function startServe(args: string[] = []): Promise<ServeProcess> {
  const child = spawn(process.execPath, [BIN, 'serve', ...(args.includes('--port') ? [] : ['--port', '0']), ...args], {
    cwd: ROOT,
    env: cleanEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const ready = await new Promise<{ url: string; api_key: string; client_secret: string }>((resolve, reject) => {
    let out = '';
    const onData = (d: Buffer): void => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl === -1) return;
      child.stdout?.off('data', onData);
      try {
        resolve(JSON.parse(out.slice(0, nl)) as { url: string; api_key: string; client_secret: string });
      } catch (err) {
        reject(err);
      }
    };
    child.stdout?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`serve exited with ${code} before it was ready: ${stderr}`)));
  });
  const pid = child.pid as number;
  return {
    url: ready.url,
    apiKey: ready.api_key,
    clientSecret: ready.client_secret,
    pid,
    async stats() {
      const res = await fetch(`${ready.url}/_local/stats`);
      return (await res.json()) as Awaited<ReturnType<ServeProcess['stats']>>;
    },
    async stop() {
      await stopChild(child);
    },
  };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  process.kill(child.pid as number, 'SIGTERM');
  const timer = setTimeout(() => {
    if (child.exitCode === null && child.signalCode === null) process.kill(child.pid as number, 'SIGKILL');
  }, 5_000);
  await exited;
  clearTimeout(timer);
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CliRun {
  child: ChildProcess;
  done: Promise<CliResult>;
}

/** Spawns the built CLI. The caller must await `done` (or kill the child by PID) before the test ends. */
export function spawnCli(
  args: string[],
  options: { input?: string | Buffer; env?: Record<string, string>; cwd?: string } = {},
): CliRun {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: options.cwd ?? ROOT,
    env: cleanEnv(options.env),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout?.on('data', (d: Buffer) => out.push(d));
  child.stderr?.on('data', (d: Buffer) => err.push(d));
  child.stdin?.on('error', () => undefined);
  if (options.input !== undefined) child.stdin?.end(options.input);
  else child.stdin?.end();
  const done = new Promise<CliResult>((resolve) => {
    child.once('close', (code, signal) =>
      resolve({
        code,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      }),
    );
  });
  return { child, done };
}

export function runCli(
  args: string[],
  options: { input?: string | Buffer; env?: Record<string, string>; cwd?: string } = {},
): Promise<CliResult> {
  return spawnCli(args, options).done;
}

/** Flags and environment that point the CLI at a `serve` process. */
export function serveConnection(serve: ServeProcess): { args: string[]; env: Record<string, string> } {
  return {
    args: ['--base-url', serve.url],
    env: { UID2_API_KEY: serve.apiKey, UID2_CLIENT_SECRET: serve.clientSecret },
  };
}
