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
  /**
   * Ends a partition: what waited is forwarded, as TCP's retransmission would, and a close that
   * `silentCloses` held reaches the side kept open.
   */
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
  /**
   * With `silentCloses`: connections one side of which closed inside a partition, whose other side
   * is still held open (it heard nothing). `heal()`, `cut()`, `down()` and `close()` end them.
   */
  readonly held: number;
  close(): Promise<void>;
}

export interface FaultProxyOptions {
  /**
   * A partition loses closes too: when one side of a connection that `silenceLive()`,
   * `silenceAfter()` (once its chunk is forwarded) or `blackhole()` holds closes or resets it, the
   * other side is not told. It stays open and hears nothing, as a server process behind a firewall
   * that lost the flow keeps its session (and its locks), until `heal()` (the close arrives late) or
   * `cut()`, `down()`, `close()`. Otherwise a close is passed on at once, partition or not.
   * @default false
   */
  silentCloses?: boolean;
}

/** Starts a {@link FaultProxy} in front of `target`. */
export async function startFaultProxy(
  target: { host: string; port: number },
  options: FaultProxyOptions = {},
): Promise<FaultProxy> {
  const silentCloses = options.silentCloses === true;
  const live = new Set<Socket>();
  // The connections a partition holds after a close it lost (silentCloses): each ends both its sides.
  const held = new Set<() => void>();
  let connections = 0;
  let paused = false;
  let losingReplies = false;
  let silenceMatch: ((chunk: Buffer) => boolean) | undefined;
  // Each live connection's pair, by its client socket: its silencing, and the end of its partition.
  const silencers = new Map<Socket, { silence(): void; heal(): void }>();
  let server: Server | undefined;
  let port = 0;
  const endHeld = (): void => {
    for (const endBoth of held) endBoth();
    held.clear();
  };
  const resetAll = (): void => {
    for (const socket of live) socket.destroy();
    live.clear();
    endHeld();
  };
  const listen = async (): Promise<void> => {
    const next = createServer({ allowHalfOpen: true }, (client) => {
      connections += 1;
      const upstream = connect(target.port, target.host);
      live.add(client).add(upstream);
      if (paused) {
        client.pause();
        upstream.pause();
      }
      let silent = false;
      let silenceOnReply = false;
      // Inside a partition that loses closes (silentCloses): from a silence until heal().
      let holdCloses = false;
      const silence = (): void => {
        silent = true;
        if (silentCloses) {
          // Both sides go on reading (and dropping) what comes, so a close is seen, and held.
          holdCloses = true;
          return;
        }
        client.pause();
        upstream.pause();
      };
      silencers.set(client, {
        silence,
        heal() {
          holdCloses = false;
        },
      });
      const cut = (): void => {
        client.destroy();
        upstream.destroy();
        live.delete(client);
        live.delete(upstream);
        silencers.delete(client);
      };
      // A close (or the client's half-close) inside a partition that loses closes: the other side is
      // not told, and the connection is held, silent, until heal() or a reset ends both sides.
      let holding = false;
      const endBoth = (): void => {
        client.destroy();
        upstream.destroy();
      };
      const hold = (): boolean => {
        if (holding) return true;
        if (!(silentCloses && (holdCloses || paused))) return false;
        holding = true;
        silent = true;
        held.add(endBoth);
        live.delete(client);
        live.delete(upstream);
        silencers.delete(client);
        return true;
      };
      const closed = (side: Socket) => (): void => {
        if (!hold()) {
          cut();
          return;
        }
        side.destroy();
        if (client.destroyed && upstream.destroyed) held.delete(endBoth);
      };
      client.on('error', closed(client)).on('close', closed(client));
      upstream.on('error', closed(upstream)).on('close', closed(upstream));
      // The server is made with allowHalfOpen, so that a client's FIN held in a partition is not
      // answered with one; outside it, the client's half-close ends the connection, as before.
      client.on('end', () => {
        if (!hold()) client.end();
      });
      client.on('data', (chunk: Buffer) => {
        if (silent) return;
        if (silenceMatch?.(chunk)) {
          silenceMatch = undefined;
          silenceOnReply = true;
          holdCloses = silentCloses;
        }
        upstream.write(chunk);
      });
      upstream.on('data', (chunk: Buffer) => {
        if (silenceOnReply && !silent) silence();
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
    get held() {
      return held.size;
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
      endHeld();
      for (const connection of silencers.values()) connection.heal();
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
      for (const connection of silencers.values()) connection.silence();
    },
    silenceAfter(match) {
      silenceMatch = match;
    },
    close: down,
  };
}
