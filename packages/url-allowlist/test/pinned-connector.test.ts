import net from 'node:net';
import type { buildConnector } from 'undici';
import { describe, expect, it } from 'vitest';
import { createPinnedConnector, ResponseBytesExceededError } from '../src/pinned-connector.js';

// The base connector is a recorder: nothing here opens a socket.
function recordingBase(): { base: buildConnector.connector; dialed: buildConnector.Options[] } {
  const dialed: buildConnector.Options[] = [];
  const base: buildConnector.connector = (options, callback) => {
    dialed.push(options);
    callback(new Error('recorded, not connected'), null);
  };
  return { base, dialed };
}

function connectWith(
  connector: buildConnector.connector,
  options: buildConnector.Options,
): Promise<Error | null> {
  return new Promise((resolve) => connector(options, (...args) => resolve(args[0])));
}

describe('createPinnedConnector', () => {
  const pin = {
    protocol: 'https:',
    hostname: 'api.carrier.example',
    port: 443,
    address: '93.184.216.34',
  } as const;

  it('dials the pinned address for https and keeps the hostname as TLS server name', async () => {
    const { base, dialed } = recordingBase();
    const connector = createPinnedConnector(pin, { timeoutMs: 1000 }, base);
    await connectWith(connector, {
      hostname: 'api.carrier.example',
      host: 'api.carrier.example',
      protocol: 'https:',
      port: '',
    });
    expect(dialed).toEqual([
      {
        hostname: '93.184.216.34',
        host: 'api.carrier.example',
        protocol: 'https:',
        port: '',
        servername: 'api.carrier.example',
      },
    ]);
  });

  it('dials the pinned address for http too', async () => {
    const { base, dialed } = recordingBase();
    const httpPin = { ...pin, protocol: 'http:', port: 8080 } as const;
    await connectWith(createPinnedConnector(httpPin, { timeoutMs: 1000 }, base), {
      hostname: 'api.carrier.example',
      host: 'api.carrier.example:8080',
      protocol: 'http:',
      port: '8080',
    });
    expect(dialed.map((options) => options.hostname)).toEqual(['93.184.216.34']);
  });

  it('sends no server name for an IP literal host and unwraps IPv6 brackets', async () => {
    const { base, dialed } = recordingBase();
    const v6 = { protocol: 'https:', hostname: '2606:4700::1', port: 443, address: '2606:4700::1' } as const;
    await connectWith(createPinnedConnector(v6, { timeoutMs: 1000 }, base), {
      hostname: '[2606:4700::1]',
      host: '[2606:4700::1]',
      protocol: 'https:',
      port: '',
    });
    expect(dialed).toEqual([
      { hostname: '2606:4700::1', host: '[2606:4700::1]', protocol: 'https:', port: '' },
    ]);
  });

  it.each([
    ['another host', { hostname: 'evil.example', host: 'evil.example', protocol: 'https:', port: '' }],
    ['another port', { hostname: 'api.carrier.example', host: 'x', protocol: 'https:', port: '8443' }],
    ['another scheme', { hostname: 'api.carrier.example', host: 'x', protocol: 'http:', port: '443' }],
  ])('refuses %s without dialling anything', async (_case, options) => {
    const { base, dialed } = recordingBase();
    const error = await connectWith(createPinnedConnector(pin, { timeoutMs: 1000 }, base), options);
    expect(error?.message).toBe('toolgate url-allowlist: refused a connection to an unchecked origin');
    expect(dialed).toEqual([]);
  });
});

/** Waits (polling, no time limit of its own: the test's applies) until `ready()` holds. */
async function until(ready: () => boolean): Promise<void> {
  while (!ready()) await new Promise((resolve) => setTimeout(resolve, 5));
}

describe('createPinnedConnector: maxResponseBytes', () => {
  it('counts the bytes the HTTP client hands back with unshift() and reads again once, and cuts one byte past the limit', async () => {
    const peers: net.Socket[] = [];
    const server = net.createServer((peer) => peers.push(peer));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    // A real socket on loopback, as buildConnector would hand it over.
    const base: buildConnector.connector = (_options, callback) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => callback(null, socket));
    };
    const connector = createPinnedConnector(
      { protocol: 'http:', hostname: 'api.carrier.test', port, address: '127.0.0.1' },
      { timeoutMs: 1000, maxResponseBytes: 10 },
      base,
    );
    const socket = await new Promise<net.Socket>((resolve, reject) =>
      connector(
        {
          hostname: 'api.carrier.test',
          host: `api.carrier.test:${port}`,
          protocol: 'http:',
          port: String(port),
        },
        (...args) => (args[0] ? reject(args[0]) : resolve(args[1] as net.Socket)),
      ),
    );
    const errors: Error[] = [];
    socket.on('error', (error) => errors.push(error));
    // Paused mode, read() on 'readable', as undici reads.
    socket.on('readable', () => undefined);
    try {
      await until(() => peers.length === 1);
      const peer = peers[0]!;
      peer.write('12345678');
      await until(() => socket.readableLength >= 8);
      const first = socket.read() as Buffer;
      expect(first.toString()).toBe('12345678');
      // What undici does each time the body reader falls behind: the unparsed rest goes back and is read again.
      for (let pause = 0; pause < 5; pause += 1) {
        socket.unshift(first.subarray(2));
        expect((socket.read() as Buffer).toString()).toBe('345678');
      }
      peer.write('90');
      await until(() => socket.readableLength >= 2);
      // 10 bytes sent, 10 counted: exactly the limit is allowed.
      expect((socket.read() as Buffer).toString()).toBe('90');
      expect(socket.destroyed).toBe(false);
      peer.write('!');
      await until(() => socket.readableLength >= 1);
      expect(socket.read()).toBeNull();
      expect(socket.destroyed).toBe(true);
      await until(() => errors.length > 0);
      expect(errors).toHaveLength(1);
      expect(errors[0]).toBeInstanceOf(ResponseBytesExceededError);
      expect(errors[0]).toMatchObject({ limit: 10, code: 'TOOLGATE_RESPONSE_BYTES_EXCEEDED' });
    } finally {
      socket.destroy();
      for (const peer of peers) peer.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
