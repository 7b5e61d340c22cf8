import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type FaultProxy, startFaultProxy } from '../src/testing.js';

/**
 * A loopback server that answers every line with `ok <line>`, keeps what each connection sent and
 * its sockets (`closed` lists the connections, by index, whose client side was heard to close).
 */
async function lineServer(): Promise<{
  server: Server;
  port: number;
  received: string[][];
  sockets: Socket[];
  closed: number[];
}> {
  const received: string[][] = [];
  const sockets: Socket[] = [];
  const closed: number[] = [];
  const server = createServer((socket) => {
    const mine: string[] = [];
    const index = received.length;
    received.push(mine);
    sockets.push(socket);
    socket.on('close', () => closed.push(index));
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
  return { server, port: (server.address() as { port: number }).port, received, sockets, closed };
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
  proxy = undefined;
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

  it("passes a client's close on to the server by default, partition or not", async () => {
    const upstream = await lineServer();
    target = upstream.server;
    proxy = await startFaultProxy({ host: '127.0.0.1', port: upstream.port });
    const gone = await client(proxy.port);
    gone.socket.write('one\n');
    await until(() => gone.answers.length === 1);
    proxy.silenceLive();
    gone.socket.destroy();
    await until(() => upstream.closed.length === 1);
    expect(upstream.closed).toEqual([0]);
    expect(proxy.held).toBe(0);
  });

  it('silentCloses: a client gives a silenced connection up; the server never hears of it and holds it, open and silent, until heal()', async () => {
    const upstream = await lineServer();
    target = upstream.server;
    proxy = await startFaultProxy({ host: '127.0.0.1', port: upstream.port }, { silentCloses: true });
    const gone = await client(proxy.port);
    gone.socket.write('one\n');
    await until(() => gone.answers.length === 1);
    proxy.silenceLive();
    gone.socket.write('two\n');
    gone.socket.destroy();
    await until(() => proxy!.held === 1);
    // A later connection is answered: the server has read everything that reached it by then.
    const fresh = await client(proxy.port);
    sockets.push(fresh.socket);
    fresh.socket.write('three\n');
    await until(() => fresh.answers.length === 1);
    expect(fresh.answers).toEqual(['ok three']);
    expect(upstream.closed).toEqual([]);
    expect(upstream.sockets[0]!.destroyed).toBe(false);
    expect(upstream.received[0]).toEqual(['one']);
    expect(gone.answers).toEqual(['ok one']);
    // The partition ends: the close arrives late, and only the held connection is ended.
    proxy.heal();
    await until(() => upstream.closed.length === 1);
    expect(upstream.closed).toEqual([0]);
    expect(proxy.held).toBe(0);
    fresh.socket.write('four\n');
    await until(() => fresh.answers.length === 2);
    expect(fresh.answers).toEqual(['ok three', 'ok four']);
  });

  it('silentCloses: the server ends a connection whose reply silenceAfter lost; the client hears nothing until close()', async () => {
    const upstream = await lineServer();
    target = upstream.server;
    proxy = await startFaultProxy({ host: '127.0.0.1', port: upstream.port }, { silentCloses: true });
    const writer = await client(proxy.port);
    sockets.push(writer.socket);
    let clientClosed = false;
    writer.socket.on('close', () => {
      clientClosed = true;
    });
    proxy.silenceAfter((chunk) => chunk.includes('COMMIT'));
    writer.socket.write('COMMIT\n');
    await until(() => upstream.received[0]?.length === 1);
    // The server process is ended (pg_terminate_backend, an idle timeout): its close is lost too.
    upstream.sockets[0]!.destroy();
    await until(() => proxy!.held === 1);
    writer.socket.write('again\n');
    const other = await client(proxy.port);
    sockets.push(other.socket);
    other.socket.write('ping\n');
    await until(() => other.answers.length === 1);
    expect(writer.answers).toEqual([]);
    expect(clientClosed).toBe(false);
    expect(upstream.received).toEqual([['COMMIT'], ['ping']]);
    await proxy.close();
    await until(() => clientClosed);
    expect(proxy.held).toBe(0);
  });

  it('silentCloses: cut() resets the connections it holds, like every live one', async () => {
    const upstream = await lineServer();
    target = upstream.server;
    proxy = await startFaultProxy({ host: '127.0.0.1', port: upstream.port }, { silentCloses: true });
    const gone = await client(proxy.port);
    gone.socket.write('one\n');
    await until(() => gone.answers.length === 1);
    proxy.silenceLive();
    gone.socket.destroy();
    await until(() => proxy!.held === 1);
    proxy.cut();
    await until(() => upstream.closed.length === 1);
    expect(proxy.held).toBe(0);
  });

  it("silentCloses: a client's goodbye (a half-close) past a silenceAfter chunk is not answered; heal() ends both sides", async () => {
    const upstream = await lineServer();
    target = upstream.server;
    proxy = await startFaultProxy({ host: '127.0.0.1', port: upstream.port }, { silentCloses: true });
    const leaving = await client(proxy.port);
    sockets.push(leaving.socket);
    let heardEnd = false;
    leaving.socket.on('end', () => {
      heardEnd = true;
    });
    proxy.silenceAfter((chunk) => chunk.includes('bye'));
    leaving.socket.end('bye\n');
    await until(() => proxy!.held === 1);
    const other = await client(proxy.port);
    sockets.push(other.socket);
    other.socket.write('ping\n');
    await until(() => other.answers.length === 1);
    // The server got the goodbye's bytes but not its close; the client waits for an answer to its FIN.
    expect(upstream.received[0]).toEqual(['bye']);
    expect(upstream.closed).toEqual([]);
    expect(leaving.answers).toEqual([]);
    expect(heardEnd).toBe(false);
    proxy.heal();
    await until(() => heardEnd && upstream.closed.length === 1);
    expect(upstream.closed).toEqual([0]);
    expect(proxy.held).toBe(0);
  });
});
