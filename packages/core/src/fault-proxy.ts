import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy in front of a real server (PostgreSQL, Redis), with the faults a network really
 * has. Nothing in the code under test knows about it; it only sees the proxy's port.
 */
export interface FaultProxy {
  /** The port it listens on (127.0.0.1); the same after `down()` and `up()`. */
  readonly port: number;
  /** Connections relayed since the start. */
  readonly connections: number;
  /** Stops listening (new connections get ECONNREFUSED) and resets every live connection: a hard outage. */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  /**
   * A silent partition: connections stay open and new ones are accepted, but nothing is forwarded and
   * nothing answers (bytes wait in the kernel's buffers, as unacknowledged segments wait for
   * retransmission).
   */
  blackhole(): void;
  /** Ends a partition: what waited is forwarded, as TCP's retransmission would. */
  heal(): void;
  /** Resets every live connection (the port stays open). */
  cut(): void;
  /**
   * For `durationMs`, forwards what clients send but loses every reply: the first byte the server sends
   * back cuts that connection, so a statement committed in that window is never acknowledged. Resolves
   * when the window ends.
   */
  loseReplies(durationMs: number): Promise<void>;
  /**
   * The connections open now go silent for good, both ways and without a reset (a stateful firewall or
   * NAT that lost their flows); new connections are relayed as usual.
   */
  silenceLive(): void;
  /**
   * The next chunk a client sends that `match` accepts (an `INSERT`, a COPY's end) is forwarded; then
   * its connection goes silent for good before the reply: the server did the work, the client never
   * hears of it, and nothing resets. Other connections are not touched.
   */
  silenceAfter(match: (chunk: Buffer) => boolean): void;
  close(): Promise<void>;
}

/** Starts a {@link FaultProxy} in front of `target`. */
export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  const live = new Set<Socket>();
  let connections = 0;
  let paused = false;
  let losingReplies = false;
  let silenceMatch: ((chunk: Buffer) => boolean) | undefined;
  // The silencing of each live connection's pair, by its client socket.
  const silencers = new Map<Socket, () => void>();
  let server: Server | undefined;
  let port = 0;
  const resetAll = (): void => {
    for (const socket of live) socket.destroy();
    live.clear();
  };
  const listen = async (): Promise<void> => {
    const next = createServer((client) => {
      connections += 1;
      const upstream = connect(target.port, target.host);
      live.add(client).add(upstream);
      if (paused) {
        client.pause();
        upstream.pause();
      }
      let silent = false;
      let silenceOnReply = false;
      const silence = (): void => {
        silent = true;
        client.pause();
        upstream.pause();
      };
      silencers.set(client, silence);
      const cut = (): void => {
        client.destroy();
        upstream.destroy();
        live.delete(client);
        live.delete(upstream);
        silencers.delete(client);
      };
      client.on('error', cut).on('close', cut);
      upstream.on('error', cut).on('close', cut);
      client.on('data', (chunk: Buffer) => {
        if (silent) return;
        if (silenceMatch?.(chunk)) {
          silenceMatch = undefined;
          silenceOnReply = true;
        }
        upstream.write(chunk);
      });
      upstream.on('data', (chunk: Buffer) => {
        if (silenceOnReply) silence();
        if (silent) return;
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
    port = (next.address() as { port: number }).port;
    server = next;
  };
  const down = async (): Promise<void> => {
    const current = server;
    server = undefined;
    resetAll();
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
    blackhole() {
      paused = true;
      for (const socket of live) socket.pause();
    },
    heal() {
      paused = false;
      for (const socket of live) socket.resume();
    },
    cut: resetAll,
    async loseReplies(durationMs) {
      losingReplies = true;
      await new Promise((done) => setTimeout(done, durationMs));
      losingReplies = false;
    },
    silenceLive() {
      for (const silence of silencers.values()) silence();
    },
    silenceAfter(match) {
      silenceMatch = match;
    },
    close: down,
  };
}
