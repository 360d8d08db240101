import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  decodeBody,
  decodeStrictBase64,
  decryptRequest,
  decryptResponse,
  encryptResponse,
  isBinaryContentType,
} from '../../src/protocol/index.js';

/**
 * A loopback proxy in front of a local service that opens each 200 answer with the client secret, lets a test
 * alter its JSON (one item made malformed), and seals it again with the request's nonce and the answer's time:
 * to the CLI, the altered answer is as authentic as the service's own.
 */

/** Gets the decrypted answer JSON and the request JSON; returns the JSON to send instead, or undefined to pass. */
export type AnswerAlteration = (answer: Record<string, unknown>, request: Record<string, unknown>) => unknown;

export interface MalformedAnswerProxy {
  url: string;
  /** Alters every 200 answer on `path` from now on; undefined stops altering. */
  alter(path: string, alteration: AnswerAlteration | undefined): void;
  /** Answers altered so far. */
  altered(): number;
  close(): Promise<void>;
}

export async function startMalformedAnswerProxy(target: string, clientSecret: string): Promise<MalformedAnswerProxy> {
  const targetUrl = new URL(target);
  const secret = Buffer.from(clientSecret, 'base64');
  const alterations = new Map<string, AnswerAlteration>();
  let altered = 0;

  function reseal(
    path: string,
    requestBody: Buffer,
    requestType: string | undefined,
    answerBody: Buffer,
    answerType: string | undefined,
  ): Buffer | undefined {
    const alteration = alterations.get(path);
    if (alteration === undefined) return undefined;
    const envelope = isBinaryContentType(requestType)
      ? requestBody
      : decodeStrictBase64(requestBody.toString('latin1'));
    if (envelope === null || envelope === undefined) return undefined;
    const opened = decryptRequest(secret, envelope);
    const answer = decryptResponse(secret, decodeBody(answerBody, answerType), opened.nonce);
    const replacement = alteration(
      JSON.parse(answer.json.toString('utf8')) as Record<string, unknown>,
      JSON.parse(opened.json.toString('utf8')) as Record<string, unknown>,
    );
    if (replacement === undefined) return undefined;
    altered++;
    const sealed = encryptResponse(secret, opened.nonce, JSON.stringify(replacement), { nowMs: answer.timestampMs });
    return isBinaryContentType(answerType) ? sealed : Buffer.from(sealed.toString('base64'), 'latin1');
  }

  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] as string;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const requestBody = Buffer.concat(chunks);
      const upstream = request(
        {
          host: targetUrl.hostname,
          port: targetUrl.port,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, host: targetUrl.host, 'content-length': String(requestBody.length) },
        },
        (answer) => {
          const parts: Buffer[] = [];
          answer.on('data', (c: Buffer) => parts.push(c));
          answer.on('end', () => {
            let body: Buffer = Buffer.concat(parts);
            const answerType = answer.headers['content-type'];
            if (answer.statusCode === 200) {
              body = reseal(path, requestBody, req.headers['content-type'], body, answerType) ?? body;
            }
            const headers = { ...answer.headers, 'content-length': String(body.length) };
            delete headers['transfer-encoding'];
            res.writeHead(answer.statusCode ?? 502, headers).end(body);
          });
        },
      );
      upstream.on('error', () => res.destroy());
      upstream.end(requestBody);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    alter: (path, alteration) => {
      if (alteration === undefined) alterations.delete(path);
      else alterations.set(path, alteration);
    },
    altered: () => altered,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
