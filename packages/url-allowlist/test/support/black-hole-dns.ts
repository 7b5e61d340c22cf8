import dgram from 'node:dgram';

/** A DNS server on loopback that reads every query and never answers. */
export interface BlackHoleDns {
  readonly port: number;
  /** Names asked for, each once, in the order first asked. */
  readonly names: string[];
  /** Resolves when `name` has been asked for. */
  asked(name: string): Promise<void>;
  close(): Promise<void>;
}

/** Binds UDP 127.0.0.1 (`port` 0: any free one); queries are parsed for their name, then dropped. */
export async function startBlackHoleDns(port = 0): Promise<BlackHoleDns> {
  const socket = dgram.createSocket('udp4');
  const names: string[] = [];
  const watchers = new Map<string, (() => void)[]>();
  socket.on('message', (message) => {
    const name = questionName(message);
    if (name === undefined || names.includes(name)) return;
    names.push(name);
    for (const watcher of watchers.get(name) ?? []) watcher();
  });
  await new Promise<void>((resolve) => socket.bind(port, '127.0.0.1', resolve));
  return {
    port: socket.address().port,
    names,
    asked: (name) =>
      names.includes(name)
        ? Promise.resolve()
        : new Promise((resolve) => watchers.set(name, [...(watchers.get(name) ?? []), resolve])),
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
}

/** The QNAME of a DNS query: length-prefixed labels after the 12-byte header. */
export function questionName(message: Buffer): string | undefined {
  const labels: string[] = [];
  let offset = 12;
  while (offset < message.length) {
    const length = message[offset]!;
    if (length === 0) return labels.join('.').toLowerCase();
    if (length > 63) return undefined;
    labels.push(message.toString('latin1', offset + 1, offset + 1 + length));
    offset += 1 + length;
  }
  return undefined;
}
