import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUrlPolicy } from '../src/index.js';
import { type LocalServer, startLocalServer, TEST_CERT } from './support/local-server.js';
import { stubResolver } from './support/stub-resolver.js';

// An https server on 127.0.0.1 with a self-signed certificate for api.carrier.test. The name
// exists only in the stub resolver, so a success proves the pinned address was dialled, and the
// certificate check proves SNI and verification used the hostname, not the address.
let server: LocalServer;

beforeAll(async () => {
  server = await startLocalServer(
    { '/status': (_request, response) => response.end('{"state":"in transit"}') },
    { tls: true },
  );
});

afterAll(async () => {
  await server.close();
});

function tlsPolicy(names: Record<string, string[]>, ca?: string) {
  const dns = stubResolver(names);
  const policy = createUrlPolicy({
    allow: ['api.carrier.test', 'other.carrier.test'],
    ports: [server.port],
    allowPrivate: ['127.0.0.1'],
    resolve: dns.resolve,
    ...(ca !== undefined && { ca }),
  });
  return { policy, dns };
}

describe('fetch() over https', () => {
  it('asks for gzip and deflate only, not br (whose decoder the server can make take a 16 MiB window)', async () => {
    const { policy } = tlsPolicy({ 'api.carrier.test': ['127.0.0.1'] }, TEST_CERT);
    const seenBefore = server.seen.length;
    await policy.fetch(`https://api.carrier.test:${server.port}/status`);
    expect(server.seen.slice(seenBefore).map((seen) => seen.headers['accept-encoding'])).toEqual([
      'gzip, deflate',
    ]);
  });

  it('pins the connection, sends the hostname as SNI and Host, and verifies the certificate for it', async () => {
    const { policy, dns } = tlsPolicy({ 'api.carrier.test': ['127.0.0.1'] }, TEST_CERT);
    const seenBefore = server.seen.length;
    const result = await policy.fetch(`https://api.carrier.test:${server.port}/status`);
    expect([result.status, result.body]).toEqual([200, '{"state":"in transit"}']);
    expect(dns.calls).toEqual(['api.carrier.test']);
    expect(
      server.seen.slice(seenBefore).map((seen) => [seen.servername, seen.headers.host, seen.remoteAddress]),
    ).toEqual([['api.carrier.test', `api.carrier.test:${server.port}`, '127.0.0.1']]);
  });

  it('refuses a certificate that does not name the host: unavailable, no address in the message', async () => {
    const { policy } = tlsPolicy({ 'other.carrier.test': ['127.0.0.1'] }, TEST_CERT);
    await expect(policy.fetch(`https://other.carrier.test:${server.port}/status`)).rejects.toMatchObject({
      reason: 'connect',
      code: 'unavailable',
      message: 'Could not connect to other.carrier.test.',
      // undici's "fetch failed" wraps the TLS error: the certificate was checked against the name.
      cause: { cause: { code: 'ERR_TLS_CERT_ALTNAME_INVALID' } },
    });
  });

  it('refuses a certificate from an untrusted issuer', async () => {
    const { policy } = tlsPolicy({ 'api.carrier.test': ['127.0.0.1'] });
    await expect(policy.fetch(`https://api.carrier.test:${server.port}/status`)).rejects.toMatchObject({
      reason: 'connect',
      cause: { cause: { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' } },
    });
  });
});
