// A loopback HTTP proxy run as its own process by the proxy tests: forwards plain http and tunnels CONNECT, logging each request as one JSON line on stdout.
//
//   node forward-proxy.mjs [--auth USER:PASSWORD] [--host NAME=ADDRESS]... [--hang-connect yes]
//
// The first stdout line is {"listening":PORT}. Every request after it prints
// {"kind":"forward"|"connect","method":...,"target":...,"auth":"none"|"ok"|"bad"} (never the credentials).
// --host makes the proxy resolve NAME itself, so a request for NAME can only succeed through the proxy.
// --hang-connect yes: CONNECT requests are logged and never answered.
import { createServer, request } from 'node:http';
import { connect } from 'node:net';

const args = process.argv.slice(2);
let auth;
let hangConnect = false;
const hosts = new Map();
for (let i = 0; i < args.length; i += 2) {
  if (args[i] === '--auth') auth = args[i + 1];
  else if (args[i] === '--hang-connect') hangConnect = args[i + 1] === 'yes';
  else if (args[i] === '--host') {
    const [name, address] = args[i + 1].split('=');
    hosts.set(name.toLowerCase(), address);
  } else {
    process.stderr.write(`forward-proxy: unknown argument ${args[i]}\n`);
    process.exit(2);
  }
}

const log = (entry) => process.stdout.write(`${JSON.stringify(entry)}\n`);
const resolveHost = (name) => hosts.get(name.toLowerCase().replace(/^\[|\]$/g, '')) ?? name;

function checkAuth(req) {
  const header = req.headers['proxy-authorization'];
  if (auth === undefined) return header === undefined ? 'none' : 'ok';
  const expected = `Basic ${Buffer.from(auth).toString('base64')}`;
  if (header === undefined) return 'none';
  return header === expected ? 'ok' : 'bad';
}

const server = createServer((req, res) => {
  const state = checkAuth(req);
  log({ kind: 'forward', method: req.method, target: req.url, auth: state });
  if (auth !== undefined && state !== 'ok') {
    res.writeHead(407, { 'proxy-authenticate': 'Basic realm="test"', 'content-length': '0' }).end();
    return;
  }
  let target;
  try {
    target = new URL(req.url);
  } catch {
    res.writeHead(400, { 'content-length': '0' }).end();
    return;
  }
  // the test helper's flush marker: answered here, so it needs no name lookup
  if (target.hostname === 'flush.invalid') {
    res.writeHead(204).end();
    return;
  }
  const headers = { ...req.headers };
  delete headers['proxy-authorization'];
  delete headers['proxy-connection'];
  const upstream = request(
    {
      host: resolveHost(target.hostname),
      port: target.port || 80,
      method: req.method,
      path: target.pathname + target.search,
      headers,
    },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on('error', () => {
    if (!res.headersSent) res.writeHead(502, { 'content-length': '0' });
    res.end();
  });
  req.pipe(upstream);
});

server.on('connect', (req, socket, head) => {
  const state = checkAuth(req);
  log({ kind: 'connect', method: 'CONNECT', target: req.url, auth: state });
  socket.on('error', () => socket.destroy());
  if (hangConnect) return;
  if (auth !== undefined && state !== 'ok') {
    socket.end(
      'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n\r\n',
    );
    return;
  }
  const at = req.url.lastIndexOf(':');
  const upstream = connect({ host: resolveHost(req.url.slice(0, at)), port: Number(req.url.slice(at + 1)) });
  upstream.once('connect', () => {
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) upstream.write(head);
    upstream.pipe(socket);
    socket.pipe(upstream);
  });
  upstream.on('error', () => {
    if (socket.writable) socket.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n');
  });
});

server.listen(0, '127.0.0.1', () => log({ listening: server.address().port }));
process.on('SIGTERM', () => process.exit(0));
