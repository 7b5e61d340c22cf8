import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';

/** One request a local test server received. */
export interface SeenRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  remoteAddress: string | undefined;
  /** TLS server name (SNI) the client sent, for https servers. */
  servername: string | undefined;
}

export type Route = (request: SeenRequest, response: http.ServerResponse) => void;

export interface LocalServer {
  readonly port: number;
  readonly seen: SeenRequest[];
  close(): Promise<void>;
}

const fixture = (name: string): string =>
  readFileSync(new URL(`../fixtures/${name}`, import.meta.url), 'utf8');

/** The self-signed certificate (CN and SAN `api.carrier.test`, test use only) and its key. */
export const TEST_CERT = fixture('carrier-test.cert.pem');
const TEST_KEY = fixture('carrier-test.key.pem');

/** Starts a server on 127.0.0.1 (never another interface) answering by path; unknown paths get 404. */
export async function startLocalServer(
  routes: Record<string, Route>,
  options: { tls?: boolean } = {},
): Promise<LocalServer> {
  const seen: SeenRequest[] = [];
  const handler = (request: http.IncomingMessage, response: http.ServerResponse): void => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const record: SeenRequest = {
        method: request.method ?? '',
        path: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        remoteAddress: request.socket.remoteAddress,
        servername: options.tls
          ? (request.socket as TLSSocket & { servername?: string | false }).servername || undefined
          : undefined,
      };
      seen.push(record);
      const route = routes[new URL(record.path, 'http://local').pathname];
      if (route) route(record, response);
      else response.writeHead(404).end('not found');
    });
  };
  const server = options.tls
    ? https.createServer({ cert: TEST_CERT, key: TEST_KEY }, handler)
    : http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A port nothing listens on (a server bound, then closed). */
export async function unusedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
