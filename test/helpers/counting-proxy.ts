import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A loopback HTTP proxy that forwards everything to a target and measures, per path, how many requests were in
 * flight at once and over how many client connections they came: the sequential rule of /v2/optout/status,
 * observed from outside the CLI.
 */
export interface CountingProxy {
  url: string;
  peakInFlight(path: string): number;
  requests(path: string): number;
  /** Distinct client sockets that sent this path. */
  connections(path: string): number;
  close(): Promise<void>;
}

export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const targetUrl = new URL(target);
  const inFlight = new Map<string, number>();
  const peak = new Map<string, number>();
  const count = new Map<string, number>();
  const sockets = new Map<string, Set<unknown>>();
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const now = (inFlight.get(path) ?? 0) + 1;
    inFlight.set(path, now);
    peak.set(path, Math.max(peak.get(path) ?? 0, now));
    count.set(path, (count.get(path) ?? 0) + 1);
    let seen = sockets.get(path);
    if (seen === undefined) sockets.set(path, (seen = new Set()));
    seen.add(req.socket);
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      inFlight.set(path, (inFlight.get(path) ?? 1) - 1);
    };
    const upstream = request(
      {
        host: targetUrl.hostname,
        port: targetUrl.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: targetUrl.host },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        answer.on('end', finish);
      },
    );
    upstream.on('error', () => {
      finish();
      res.destroy();
    });
    res.on('close', finish);
    req.pipe(upstream);
  });
  server.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    peakInFlight: (path) => peak.get(path) ?? 0,
    requests: (path) => count.get(path) ?? 0,
    connections: (path) => sockets.get(path)?.size ?? 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
