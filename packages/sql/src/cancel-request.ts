import { connect } from 'node:net';

/** What a pg Client exposes that a cancel request needs (public fields of pg's Client). */
export interface CancellableClient {
  readonly processID?: unknown;
  readonly secretKey?: unknown;
  readonly host?: unknown;
  readonly port?: unknown;
  readonly ssl?: unknown;
}

// PostgreSQL's CancelRequest: length 16, code 80877102, the backend's pid and secret key.
const CANCEL_REQUEST_CODE = 80877102;

/**
 * Asks the server to cancel what `client`'s backend runs now, over a connection of its own (the
 * protocol's CancelRequest, as psql's Ctrl-C does), never through the pool: with every pooled
 * connection busy, a `pg_cancel_backend` query would queue behind the very statements it should
 * stop. Resolves true once the server has taken the request: it ends the connection after signalling
 * the backend, and only that end counts. Resolves false when the request could not be sent, or when
 * `timeoutMs` passed before the server ended the connection: a request handed to the kernel may still
 * sit in a send queue or behind a partition and land later, on whatever that backend runs then, so the
 * caller must never reuse that connection. Without a pid and key (an SSL-only server, a client that is
 * not pg's), nothing is sent.
 */
export function sendCancelRequest(client: CancellableClient, timeoutMs = 2000): Promise<boolean> {
  const { processID, secretKey, host, port } = client;
  if (typeof processID !== 'number' || typeof secretKey !== 'number' || client.ssl) {
    return Promise.resolve(false);
  }
  if (typeof host !== 'string' || typeof port !== 'number') return Promise.resolve(false);
  return new Promise<boolean>((resolve) => {
    // pg's convention: a host that starts with / is the directory of a Unix socket.
    const socket = host.startsWith('/') ? connect(`${host}/.s.PGSQL.${port}`) : connect(port, host);
    let sent = false;
    // The server ended the connection after the request was written: it signalled the backend. A
    // close by our own timer (no end seen) says nothing about where the request is.
    let taken = false;
    const timer = setTimeout(() => socket.destroy(), timeoutMs);
    timer.unref();
    socket.on('connect', () => {
      const packet = Buffer.alloc(16);
      packet.writeInt32BE(16, 0);
      packet.writeInt32BE(CANCEL_REQUEST_CODE, 4);
      packet.writeInt32BE(processID | 0, 8);
      packet.writeInt32BE(secretKey | 0, 12);
      socket.write(packet, () => {
        sent = true;
      });
    });
    socket.on('end', () => {
      taken = sent;
    });
    socket.on('error', () => socket.destroy());
    socket.on('close', (hadError) => {
      clearTimeout(timer);
      resolve(taken && !hadError);
    });
  });
}
