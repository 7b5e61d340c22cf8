import { isIP, type Socket } from 'node:net';
import { buildConnector } from 'undici';

/** The one origin a connector may dial, and the checked address it dials instead of resolving. */
export interface ConnectionPin {
  readonly protocol: 'https:' | 'http:';
  readonly hostname: string;
  readonly port: number;
  /** A checked address; the socket connects here, whatever DNS says by then. */
  readonly address: string;
}

export interface PinnedConnectorOptions {
  ca?: string | Buffer | (string | Buffer)[] | undefined;
  /** Connect (and TLS handshake) timeout in ms. */
  timeoutMs: number;
  /**
   * Most bytes the HTTP client may read from the connection (status lines, headers, framing, the body
   * as sent); one more destroys the socket with `ResponseBytesExceededError`. No limit when omitted.
   */
  maxResponseBytes?: number | undefined;
}

/** The server sent more bytes on one connection than `maxResponseBytes` allows. */
export class ResponseBytesExceededError extends Error {
  readonly code = 'TOOLGATE_RESPONSE_BYTES_EXCEEDED';
  constructor(readonly limit: number) {
    super(`toolgate url-allowlist: the server sent more than ${limit} bytes on one connection`);
    this.name = 'ResponseBytesExceededError';
  }
}

/**
 * An undici connector pinned to one checked address. Undici hands it the URL's hostname; it dials
 * the pinned address instead, so no second resolution happens (DNS rebinding has nothing to
 * rebind). For https the TLS server name stays the hostname: SNI and the certificate check are
 * against the name that was allowed, not the address. Any other origin is refused: an Agent built
 * for one hop never connects anywhere else.
 */
export function createPinnedConnector(
  pin: ConnectionPin,
  options: PinnedConnectorOptions,
  base: buildConnector.connector = buildConnector({
    timeout: options.timeoutMs,
    ...(options.ca !== undefined && { ca: options.ca }),
  }),
): buildConnector.connector {
  const servername = isIP(pin.hostname) === 0 ? pin.hostname : undefined;
  return (target, callback) => {
    const hostname = target.hostname.replace(/^\[(.*)\]$/, '$1');
    const port = Number(target.port) || (target.protocol === 'https:' ? 443 : 80);
    if (hostname !== pin.hostname || target.protocol !== pin.protocol || port !== pin.port) {
      callback(new Error('toolgate url-allowlist: refused a connection to an unchecked origin'), null);
      return;
    }
    const { maxResponseBytes } = options;
    base(
      {
        ...target,
        hostname: pin.address,
        ...(servername !== undefined && { servername }),
      },
      maxResponseBytes === undefined
        ? callback
        : (...args) => {
            // On failure undici passes the error alone (no second argument, not null).
            const socket = args[1];
            if (socket) capReads(socket, maxResponseBytes);
            callback(...args);
          },
    );
  };
}

/**
 * Caps the bytes the HTTP client reads from `socket`. maxBodyBytes counts the body after decoding
 * only, and most of what a server can send never reaches it: a gzip/deflate body that decodes to
 * (almost) nothing (an endless gzip file name, empty deflate blocks), chunk extensions, and 1xx
 * responses are all parsed and dropped by undici without a limit, so one response could stream
 * gigabytes through the parser and the decoder, a core busy, until timeoutMs. Counting here, below
 * the parser, bounds all of them at once. undici reads its socket with `read()` (on 'readable'),
 * so every byte it parses passes through this wrapper; one counter per connection.
 * When the body reader falls behind, undici pauses its parser and hands what it has not parsed back
 * with `unshift()`, to `read()` it again later: those bytes are given back to the count, so each byte
 * counts once however often the parser pauses (each pause re-read the rest of a socket read: a body
 * in 1-byte chunks read by a slow consumer counted about twice what was sent).
 */
function capReads(socket: Socket, limit: number): void {
  const read = socket.read;
  const unshift = socket.unshift;
  let received = 0;
  socket.read = function cappedRead(this: Socket, size?: number) {
    const chunk: unknown = read.call(this, size);
    if (chunk !== null && chunk !== undefined) {
      received += (chunk as { length: number }).length;
      if (received > limit) {
        this.destroy(new ResponseBytesExceededError(limit));
        return null;
      }
    }
    return chunk;
  };
  socket.unshift = function countedUnshift(this: Socket, chunk: unknown, encoding?: BufferEncoding) {
    // Only bytes read here come back (a string would be no read of ours): anything else stays counted.
    if (chunk instanceof Uint8Array) received = Math.max(0, received - chunk.byteLength);
    unshift.call(this, chunk, encoding);
  };
}
