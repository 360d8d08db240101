// A loopback server whose answers never finish: a few bytes at short gaps, so only a deadline on a whole attempt ends the wait.
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TricklingServer {
  url: string;
  /** Requests received so far. */
  attempts(): number;
  stop(): Promise<void>;
}

export async function startTricklingServer(): Promise<TricklingServer> {
  let attempts = 0;
  const open = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    attempts++;
    req.resume();
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    // 50 bytes every 200 ms: the silence between two chunks never reaches any gap timeout
    const timer = setInterval(() => res.write(Buffer.alloc(50, 1)), 200);
    open.add(res);
    res.on('close', () => {
      clearInterval(timer);
      open.delete(res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    attempts: () => attempts,
    stop: async () => {
      for (const res of open) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
