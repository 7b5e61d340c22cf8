import { once } from 'node:events';
import { createConnection, createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { withDeadline } from '../src/index.js';

describe('withDeadline after an event-loop stall', () => {
  it('lets a reply that already arrived win over its own deadline', async () => {
    // The echo is written, then the loop stalls past the deadline (a GC pause or a long synchronous
    // task elsewhere in the process): the reply waits in the client's socket buffer meanwhile.
    const server = createServer((socket) =>
      socket.on('data', (chunk) => {
        socket.write(chunk);
        const until = Date.now() + 50;
        while (Date.now() < until) {
          // busy
        }
      }),
    );
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as { port: number };
    const socket = createConnection(port, '127.0.0.1');
    await once(socket, 'connect');
    try {
      const answer = withDeadline(
        () => new Promise<string>((resolve) => socket.once('data', (chunk) => resolve(chunk.toString()))),
        { timeoutMs: 5, what: 'the echo' },
      );
      socket.write('pong');
      await expect(answer).resolves.toBe('pong');
    } finally {
      socket.destroy();
      server.close();
    }
  });
});
