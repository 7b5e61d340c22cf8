import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type FaultProxy, startFaultProxy } from '../src/testing.js';

/** A loopback server that answers every line with `ok <line>` and keeps what each connection sent. */
async function lineServer(): Promise<{ server: Server; port: number; received: string[][] }> {
  const received: string[][] = [];
  const server = createServer((socket) => {
    const mine: string[] = [];
    received.push(mine);
    socket.setEncoding('utf8').on('data', (chunk: string) => {
      for (const line of chunk.split('\n').filter((part) => part !== '')) {
        mine.push(line);
        socket.write(`ok ${line}\n`);
      }
    });
    socket.on('error', () => undefined);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as { port: number }).port, received };
}

/** A client of the proxy that keeps every line it was answered. */
async function client(port: number): Promise<{ socket: Socket; answers: string[] }> {
  const answers: string[] = [];
  const socket = connect(port, '127.0.0.1');
  socket.setEncoding('utf8').on('data', (chunk: string) => {
    answers.push(...chunk.split('\n').filter((part) => part !== ''));
  });
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  return { socket, answers };
}

async function until(check: () => boolean): Promise<void> {
  for (let waited = 0; !check(); waited += 5) {
    if (waited > 10_000) throw new Error('timed out');
    await new Promise((done) => setTimeout(done, 5));
  }
}

let proxy: FaultProxy | undefined;
let target: Server | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await proxy?.close();
  target?.close();
});

describe('startFaultProxy', () => {
  it('silenceLive: the connections open now go silent for good, without a reset; new ones flow', async () => {
    const upstream = await lineServer();
    target = upstream.server;
    proxy = await startFaultProxy({ host: '127.0.0.1', port: upstream.port });
    const old = await client(proxy.port);
    sockets.push(old.socket);
    old.socket.write('one\n');
    await until(() => old.answers.length === 1);
    proxy.silenceLive();
    old.socket.write('two\n');
    proxy.heal(); // a heal does not bring a silenced connection back
    const fresh = await client(proxy.port);
    sockets.push(fresh.socket);
    fresh.socket.write('three\n');
    await until(() => fresh.answers.length === 1);
    expect(fresh.answers).toEqual(['ok three']);
    // The old connection is neither answered nor reset, and its bytes never reached the server.
    expect(old.answers).toEqual(['ok one']);
    expect(old.socket.destroyed).toBe(false);
    expect(upstream.received[0]).toEqual(['one']);
  });

  it('silenceAfter: the matching write reaches the server, its reply never comes back, other connections flow', async () => {
    const upstream = await lineServer();
    target = upstream.server;
    proxy = await startFaultProxy({ host: '127.0.0.1', port: upstream.port });
    const writer = await client(proxy.port);
    sockets.push(writer.socket);
    proxy.silenceAfter((chunk) => chunk.includes('COMMIT'));
    writer.socket.write('BEGIN\n');
    await until(() => writer.answers.length === 1);
    writer.socket.write('COMMIT\n');
    await until(() => upstream.received[0]!.length === 2);
    const other = await client(proxy.port);
    sockets.push(other.socket);
    other.socket.write('COMMIT\n'); // the fault was spent on the first match
    await until(() => other.answers.length === 1);
    expect(upstream.received[0]).toEqual(['BEGIN', 'COMMIT']);
    expect(writer.answers).toEqual(['ok BEGIN']);
    expect(writer.socket.destroyed).toBe(false);
    expect(other.answers).toEqual(['ok COMMIT']);
  });
});
