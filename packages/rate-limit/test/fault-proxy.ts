import type { AddressInfo } from 'node:net';
import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy in front of a real server, with the faults a network really has:
 * `blackhole()` keeps every connection open and accepts new ones but forwards nothing and never
 * replies (a partition: the client sees silence, not an error), `heal()` forwards again what TCP
 * would have retransmitted meanwhile, `cut()` resets every connection.
 */
export interface FaultProxy {
  readonly port: number;
  blackhole(): void;
  heal(): void;
  cut(): void;
  close(): Promise<void>;
}

export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  const live = new Set<Socket>();
  let dropping = false;
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    live.add(client).add(upstream);
    if (dropping) {
      client.pause();
      upstream.pause();
    }
    const cut = (): void => {
      client.destroy();
      upstream.destroy();
      live.delete(client);
      live.delete(upstream);
    };
    client.on('error', cut).on('close', cut);
    upstream.on('error', cut).on('close', cut);
    // Paused sockets read nothing: bytes wait in the kernel's buffers, as unacknowledged segments
    // wait for retransmission during a partition (dropping them would corrupt the stream instead).
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => client.write(chunk));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    blackhole() {
      dropping = true;
      for (const socket of live) socket.pause();
    },
    heal() {
      dropping = false;
      for (const socket of live) socket.resume();
    },
    cut() {
      for (const socket of live) socket.destroy();
      live.clear();
    },
    async close() {
      for (const socket of live) socket.destroy();
      live.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
