/** Starts test/helpers/forward-proxy.mjs as a child process on loopback and collects the requests it logs. */
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { fileURLToPath } from 'node:url';

export interface ProxyLogEntry {
  kind: 'forward' | 'connect';
  method: string;
  /** Absolute URL (forwarded) or host:port (CONNECT). */
  target: string;
  auth: 'none' | 'ok' | 'bad';
}

export interface ProxyProcess {
  /** http://127.0.0.1:PORT */
  url: string;
  port: number;
  pid: number;
  /** Every request logged so far (flush markers left out). */
  log: ProxyLogEntry[];
  /**
   * Resolves once every request the proxy received before this call is in `log`: sends a marker request through the
   * proxy and waits for its line, since the proxy logs in arrival order.
   */
  flush(): Promise<void>;
  /** Kills the process by its PID and waits for it to exit. */
  stop(): Promise<void>;
}

const SCRIPT = fileURLToPath(new URL('./forward-proxy.mjs', import.meta.url));

export async function startProxyProcess(args: string[] = []): Promise<ProxyProcess> {
  const child: ChildProcess = spawn(process.execPath, [SCRIPT, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const log: ProxyLogEntry[] = [];
  const markers = new Map<string, () => void>();
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const port = await new Promise<number>((resolve, reject) => {
    let pending = '';
    child.once('exit', (code) => reject(new Error(`the test proxy exited (${code}) before listening: ${stderr}`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      pending += chunk.toString();
      let end: number;
      while ((end = pending.indexOf('\n')) >= 0) {
        const entry = JSON.parse(pending.slice(0, end)) as ProxyLogEntry | { listening: number };
        pending = pending.slice(end + 1);
        if ('listening' in entry) resolve(entry.listening);
        else if (markers.has(entry.target)) markers.get(entry.target)!();
        else log.push(entry);
      }
    });
  });
  const pid = child.pid!;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    pid,
    log,
    async flush() {
      const marker = `http://flush.invalid/${markers.size}-${Date.now()}`;
      const seen = new Promise<void>((resolve) => markers.set(marker, resolve));
      await new Promise<void>((resolve) => {
        const req = request({ host: '127.0.0.1', port, method: 'GET', path: marker }, (res) => {
          res.resume();
          res.on('end', resolve);
        });
        req.on('error', () => resolve());
        req.end();
      });
      await seen;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) process.kill(pid, 'SIGTERM');
      await exited;
    },
  };
}
