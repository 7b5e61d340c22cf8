import type { AddressInfo } from 'node:net';
import { connect, createServer, type Server, type Socket } from 'node:net';

/** A TCP proxy on 127.0.0.1 in front of a server, that a test can take down and bring back. */
export interface TcpProxy {
  /** The port it listens on; the same after `down()` and `up()`. */
  readonly port: number;
  /** Connections relayed since the start. */
  readonly connections: number;
  /** Stops listening (new connections get ECONNREFUSED) and cuts every live connection. */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  /**
   * For `durationMs`, forwards what clients send but loses every reply: the first byte the server
   * sends back cuts that connection. A statement committed in that window is never acknowledged.
   * Resolves when the window ends.
   */
  loseReplies(durationMs: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * The database "going away" as a client sees it: live connections reset, the port closed, or replies
 * lost. Nothing in the code under test knows about the proxy; it only sees the URL.
 */
export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const live = new Set<Socket>();
  let connections = 0;
  let losingReplies = false;
  let server: Server | undefined;
  let port = 0;
  const listen = async (): Promise<void> => {
    const next = createServer((client) => {
      connections += 1;
      const upstream = connect(target.port, target.host);
      live.add(client);
      live.add(upstream);
      const cut = (): void => {
        client.destroy();
        upstream.destroy();
        live.delete(client);
        live.delete(upstream);
      };
      client.on('error', cut).on('close', cut);
      upstream.on('error', cut).on('close', cut);
      client.on('data', (chunk: Buffer) => upstream.write(chunk));
      upstream.on('data', (chunk: Buffer) => {
        if (losingReplies) cut();
        else client.write(chunk);
      });
    });
    await new Promise<void>((resolveListen, rejectListen) => {
      next.once('error', rejectListen);
      next.listen(port, '127.0.0.1', () => {
        next.off('error', rejectListen);
        resolveListen();
      });
    });
    port = (next.address() as AddressInfo).port;
    server = next;
  };
  const down = async (): Promise<void> => {
    const current = server;
    server = undefined;
    for (const socket of live) socket.destroy();
    live.clear();
    if (current) await new Promise<void>((resolveClose) => current.close(() => resolveClose()));
  };
  await listen();
  return {
    get port() {
      return port;
    },
    get connections() {
      return connections;
    },
    down,
    up: async () => {
      if (!server) await listen();
    },
    loseReplies: async (durationMs) => {
      losingReplies = true;
      await new Promise((resolveWindow) => setTimeout(resolveWindow, durationMs));
      losingReplies = false;
    },
    close: down,
  };
}
