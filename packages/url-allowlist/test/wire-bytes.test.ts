// Bytes an allowed server sends that never count toward maxBodyBytes: a body that decodes to (almost)
// nothing, chunk extensions, endless interim (1xx) responses. undici parses and drops them without a
// limit; unbounded, one call streamed hundreds of megabytes through the parser and zlib (a core busy)
// until timeoutMs. Raw servers on 127.0.0.1 write what no HTTP library would.
import net from 'node:net';
import { gzipSync } from 'node:zlib';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUrlPolicy, UrlRefusedError } from '../src/index.js';
import { stubResolver } from './support/stub-resolver.js';

const TIMEOUT_MS = 4000;
const MAX_BODY_BYTES = 64 * 1024;

/** Writes `head`, then `block` again and again, as fast as the client reads, until the socket closes. */
function flood(socket: net.Socket, head: Buffer | string, block: Buffer): void {
  socket.write(head);
  const pump = (): void => {
    while (!socket.destroyed) {
      if (!socket.write(block)) {
        socket.once('drain', pump);
        return;
      }
    }
  };
  pump();
}

// gzip header with FNAME set: a file name that never ends; zlib reads and drops it, producing nothing.
const GZIP_ENDLESS_NAME = Buffer.from([0x1f, 0x8b, 8, 0x08, 0, 0, 0, 0, 0, 3]);
// zlib header, then empty non-final stored blocks (BFINAL 0, BTYPE 00, LEN 0, NLEN 0xffff): no output.
const EMPTY_STORED_BLOCK = Buffer.from([0x00, 0x00, 0x00, 0xff, 0xff]);

const HOSTILE: Record<string, (socket: net.Socket) => void> = {
  '/gzip-endless-name': (socket) =>
    flood(
      socket,
      Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\n\r\n'), GZIP_ENDLESS_NAME]),
      Buffer.alloc(64 * 1024, 0x61),
    ),
  '/deflate-empty-blocks': (socket) =>
    flood(
      socket,
      Buffer.from([...Buffer.from('HTTP/1.1 200 OK\r\ncontent-encoding: deflate\r\n\r\n'), 0x78, 0x9c]),
      Buffer.concat(Array.from({ length: 13_000 }, () => EMPTY_STORED_BLOCK)),
    ),
  '/chunk-extension': (socket) =>
    flood(socket, 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1;x=', Buffer.alloc(64 * 1024, 0x61)),
  '/endless-103': (socket) =>
    flood(socket, '', Buffer.from('HTTP/1.1 103 Early Hints\r\nlink: </style.css>\r\n\r\n'.repeat(1000))),
};

// 3 MiB gzip-stored (level 0), as for data that does not compress: about as many bytes sent as decoded.
const STORED_GZIP = gzipSync(Buffer.alloc(3 * 1024 * 1024, 0x63), { level: 0 });

let server: net.Server;
let port: number;
const sockets = new Set<net.Socket>();

beforeAll(async () => {
  server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.once('data', (request) => {
      const path = /^[A-Z]+ (\S+)/.exec(request.toString('latin1'))?.[1] ?? '/';
      const hostile = HOSTILE[path];
      if (hostile) return hostile(socket);
      const smallChunks = /^\/one-byte-chunks\/(\d+)$/.exec(path);
      if (smallChunks) {
        // A genuine server streaming its body in 1-byte chunks (`1\r\nc\r\n`): 6 wire bytes a body byte.
        socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n');
        return void socket.end(`${'1\r\nc\r\n'.repeat(Number(smallChunks[1]))}0\r\n\r\n`, 'latin1');
      }
      if (path === '/long-gzip') {
        socket.write(
          `HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: ${STORED_GZIP.length}\r\n\r\n`,
        );
        return void socket.end(STORED_GZIP);
      }
      // A long plain body sent in one write: the reader cuts it at maxBodyBytes, as before.
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 4194304\r\n\r\n');
      socket.end(Buffer.alloc(4 * 1024 * 1024, 0x62));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as net.AddressInfo).port;
});

afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function policyWith(entries: LogEntry[], maxBodyBytes = MAX_BODY_BYTES) {
  return createUrlPolicy({
    allow: ['api.carrier.test'],
    schemes: ['http'],
    ports: [port],
    allowPrivate: ['127.0.0.1'],
    resolve: stubResolver({ 'api.carrier.test': ['127.0.0.1'] }).resolve,
    maxBodyBytes,
    timeoutMs: TIMEOUT_MS,
    logger: recordingLogger(entries),
  });
}

describe('fetch(): bytes on the wire are bounded, not only the decoded body', () => {
  it.each(Object.keys(HOSTILE))(
    '%s ends at once as unavailable, not after streaming until timeoutMs; long bodies are still cut',
    async (path) => {
      const entries: LogEntry[] = [];
      const policy = policyWith(entries);
      const error = await policy.fetch(`http://api.carrier.test:${port}${path}`).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(UrlRefusedError);
      expect(error).toMatchObject({ reason: 'connect', code: 'unavailable' });
      expect((error as UrlRefusedError).message).toMatch(
        /^Could not (connect to|read the response from) api\.carrier\.test\.$/,
      );
      // The log says why (the wire bound cut it, not timeoutMs), with the address; the model's message does not.
      expect(JSON.stringify(entries.map(({ fields }) => causes(fields.err)))).toContain(
        'ResponseBytesExceededError',
      );

      // The bound sits above what a real response needs: a long body, plain or gzip, is still cut.
      for (const long of ['/long-plain', '/long-gzip']) {
        const page = await policy.fetch(`http://api.carrier.test:${port}${long}`);
        expect({ truncated: page.truncated, bytes: page.bytes }).toEqual({
          truncated: true,
          bytes: MAX_BODY_BYTES,
        });
      }
    },
  );
});

describe('fetch(): a genuine body in 1-byte chunks is held to maxBodyBytes, not taken for hostile framing', () => {
  // 1-byte chunks put 6 bytes on the wire per body byte: 768 KiB for a body of this size, past the
  // bound of the last release (2 x maxBodyBytes + 288 KiB = 544 KiB).
  const SMALL_CHUNKS_MAX = 128 * 1024;
  const urlOf = (length: number): string => `http://api.carrier.test:${port}/one-byte-chunks/${length}`;

  it('returns a body of exactly maxBodyBytes sent in 1-byte chunks whole', async () => {
    const entries: LogEntry[] = [];
    const page = await policyWith(entries, SMALL_CHUNKS_MAX).fetch(urlOf(SMALL_CHUNKS_MAX));
    expect(page).toEqual({
      status: 200,
      headers: { 'content-type': 'text/plain' },
      body: 'c'.repeat(SMALL_CHUNKS_MAX),
      bytes: SMALL_CHUNKS_MAX,
      truncated: false,
      url: urlOf(SMALL_CHUNKS_MAX),
      redirects: 0,
    });
    expect(entries).toEqual([]);
  });

  it.each([SMALL_CHUNKS_MAX + 1, 4 * SMALL_CHUNKS_MAX])(
    'cuts a body of %i bytes in 1-byte chunks at maxBodyBytes as too long, not as a wire violation',
    async (length) => {
      const entries: LogEntry[] = [];
      const page = await policyWith(entries, SMALL_CHUNKS_MAX).fetch(urlOf(length));
      expect(page).toEqual({
        status: 200,
        headers: { 'content-type': 'text/plain' },
        body: 'c'.repeat(SMALL_CHUNKS_MAX),
        bytes: SMALL_CHUNKS_MAX,
        truncated: true,
        url: urlOf(length),
        redirects: 0,
        note: `The response body was cut at ${SMALL_CHUNKS_MAX} bytes; only its beginning is shown.`,
      });
      expect(entries).toEqual([]);
    },
  );
});

/** The names along an error's cause chain. */
function causes(error: unknown): string[] {
  const names: string[] = [];
  for (let current = error; current instanceof Error && names.length < 8; current = current.cause) {
    names.push(current.name);
  }
  return names;
}
