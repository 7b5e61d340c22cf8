import type { buildConnector } from 'undici';
import { describe, expect, it } from 'vitest';
import { createPinnedConnector } from '../src/pinned-connector.js';

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
