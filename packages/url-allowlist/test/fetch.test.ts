import net from 'node:net';
import { gzipSync } from 'node:zlib';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CheckedUrl, createUrlPolicy, type UrlPolicyOptions, UrlRefusedError } from '../src/index.js';
import { type LocalServer, startLocalServer, unusedPort } from './support/local-server.js';
import { refusedConnects } from './support/loopback-guard.js';
import { type StubResolver, stubResolver } from './support/stub-resolver.js';

// 16 MiB of zeros in about 16 KiB: the cap must hold after decompression, not on the wire.
const GZIP_BOMB = gzipSync(Buffer.alloc(16 * 1024 * 1024), { level: 9 });

let api: LocalServer;
let files: LocalServer;
let stranger: LocalServer;

beforeAll(async () => {
  // A different local service on another port: redirects must never reach it.
  stranger = await startLocalServer({ '/': (_request, response) => response.end('internal secrets') });
  files = await startLocalServer({
    '/echo': (request, response) => response.end(JSON.stringify(request.headers)),
    '/back-to-api': (_request, response) =>
      response.writeHead(302, { location: `http://api.carrier.test:${api.port}/echo` }).end(),
  });
  api = await startLocalServer({
    '/hello': (_request, response) => {
      response.setHeader('set-cookie', 'session=abc');
      response.setHeader('x-internal-trace', 'node-7');
      response.setHeader('content-type', 'text/plain; charset=utf-8');
      response.end('hello from the carrier');
    },
    '/echo': (request, response) =>
      response.end(JSON.stringify({ method: request.method, body: request.body, headers: request.headers })),
    '/big': (_request, response) => response.end('x'.repeat(5000)),
    '/exact': (_request, response) => response.end('y'.repeat(1000)),
    '/slow': () => {
      // Never answers: the policy's deadline has to end the call.
    },
    '/final': (_request, response) => response.end('final page'),
    '/to-final': (_request, response) => response.writeHead(302, { location: '/final' }).end(),
    '/loop': (_request, response) => response.writeHead(302, { location: '/loop' }).end(),
    '/see-other': (_request, response) => response.writeHead(303, { location: '/echo' }).end(),
    '/temporary': (_request, response) => response.writeHead(307, { location: '/echo' }).end(),
    '/to-files': (_request, response) =>
      response.writeHead(302, { location: `http://files.carrier.test:${files.port}/echo` }).end(),
    '/temporary-to-files': (_request, response) =>
      response.writeHead(307, { location: `http://files.carrier.test:${files.port}/echo` }).end(),
    '/to-files-and-back': (_request, response) =>
      response.writeHead(302, { location: `http://files.carrier.test:${files.port}/back-to-api` }).end(),
    '/to-same-origin-echo': (_request, response) => response.writeHead(301, { location: '/echo' }).end(),
    '/to-metadata': (_request, response) =>
      response.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/iam/' }).end(),
    '/to-localhost': (_request, response) =>
      response.writeHead(302, { location: `http://localhost:${stranger.port}/` }).end(),
    '/to-loopback-literal': (_request, response) =>
      response.writeHead(302, { location: `http://127.0.0.1:${stranger.port}/` }).end(),
    '/to-internal-name': (_request, response) =>
      response.writeHead(302, { location: `http://internal.carrier.test:${api.port}/hello` }).end(),
    '/to-file': (_request, response) => response.writeHead(302, { location: 'file:///etc/passwd' }).end(),
    '/to-userinfo': (_request, response) =>
      response.writeHead(302, { location: `http://api.carrier.test:${api.port}@evil.example/` }).end(),
    '/to-gopher': (_request, response) =>
      response.writeHead(302, { location: 'gopher://api.carrier.test:70/_x' }).end(),
    '/to-bad': (_request, response) => response.writeHead(302, { location: 'http://[::1' }).end(),
    // `\\host` is scheme-relative to the URL parser: the hop goes to 127.0.0.1, which must be checked.
    '/to-backslashes': (_request, response) =>
      response.writeHead(302, { location: `\\\\127.0.0.1:${stranger.port}/` }).end(),
    '/cut': (_request, response) => {
      // Headers and the start of a promised 1000-byte body, then the server goes away.
      response.writeHead(200, { 'content-length': '1000' });
      response.write('partial', () => response.socket?.destroy());
    },
    '/not-gzip': (_request, response) =>
      response.writeHead(200, { 'content-encoding': 'gzip' }).end('this was never gzip'),
    '/gzip-bomb': (_request, response) =>
      response.writeHead(200, { 'content-encoding': 'gzip' }).end(GZIP_BOMB),
    '/drip': (_request, response) => {
      // Headers at once, then a byte every 20 ms, forever: the deadline has to cover the body too.
      response.writeHead(200);
      const timer = setInterval(() => response.write('x'), 20);
      response.on('close', () => clearInterval(timer));
    },
  });
});

afterAll(async () => {
  await Promise.all([api.close(), files.close(), stranger.close()]);
});

function carrierPolicy(dns: StubResolver, overrides: Partial<UrlPolicyOptions> = {}) {
  return createUrlPolicy({
    allow: ['api.carrier.test', 'files.carrier.test', 'internal.carrier.test', 'localhost'],
    schemes: ['http'],
    ports: [api.port, files.port],
    allowPrivate: ['127.0.0.1'],
    resolve: dns.resolve,
    ...overrides,
  });
}

function carrierDns(): StubResolver {
  return stubResolver({
    'api.carrier.test': ['127.0.0.1'],
    'files.carrier.test': ['127.0.0.1'],
    'internal.carrier.test': ['10.1.2.3'],
    localhost: ['127.0.0.1'],
  });
}

describe('the loopback guard the tests run behind', () => {
  it('refuses a socket to any non-loopback address and records it', async () => {
    const socket = net.connect({ host: '192.0.2.1', port: 80 });
    await expect(new Promise((_resolve, reject) => socket.on('error', reject))).rejects.toThrow(
      'loopback guard: ENETUNREACH',
    );
    expect(refusedConnects.splice(0)).toEqual(['192.0.2.1:80']);
  });
});

describe('fetch(): an allowed host on a local server', () => {
  it('fetches over a connection pinned to the checked address, with filtered headers', async () => {
    const dns = carrierDns();
    const policy = carrierPolicy(dns);
    const seenBefore = api.seen.length;
    const result = await policy.fetch(`http://api.carrier.test:${api.port}/hello?x=1`);
    expect(result).toEqual({
      status: 200,
      headers: {
        'content-type': 'text/plain; charset=utf-8',
        'content-length': '22',
        date: expect.any(String),
      },
      body: 'hello from the carrier',
      bytes: 22,
      truncated: false,
      url: `http://api.carrier.test:${api.port}/hello?x=1`,
      redirects: 0,
    });
    expect(dns.calls).toEqual(['api.carrier.test']);
    const seen = api.seen.slice(seenBefore);
    expect(seen.map((request) => [request.path, request.headers.host, request.remoteAddress])).toEqual([
      ['/hello?x=1', `api.carrier.test:${api.port}`, '127.0.0.1'],
    ]);
  });

  it('sends the method, headers and body the caller gives', async () => {
    const policy = carrierPolicy(carrierDns());
    const result = await policy.fetch(`http://api.carrier.test:${api.port}/echo`, {
      method: 'post',
      headers: { 'Content-Type': 'application/json', authorization: 'Bearer t' },
      body: '{"q":1}',
    });
    const echoed = JSON.parse(result.body) as {
      method: string;
      body: string;
      headers: Record<string, string>;
    };
    expect(echoed.method).toBe('POST');
    expect(echoed.body).toBe('{"q":1}');
    expect(echoed.headers['content-type']).toBe('application/json');
    expect(echoed.headers.authorization).toBe('Bearer t');
  });

  it('refuses a Host header (it would address another virtual host on the pinned server)', async () => {
    const dns = carrierDns();
    const policy = carrierPolicy(dns);
    const before = api.seen.length;
    const error = await policy
      .fetch(`http://api.carrier.test:${api.port}/echo`, { headers: { Host: 'admin.internal' } })
      .then(
        () => undefined,
        (caught: unknown) => caught,
      );
    expect(error).toBeInstanceOf(UrlRefusedError);
    expect(error).toMatchObject({
      reason: 'request',
      code: 'invalid_argument',
      message: 'The host header cannot be set.',
    });
    expect(dns.calls).toEqual([]);
    expect(api.seen.length).toBe(before);
  });
});

describe('fetch(): DNS rebinding', () => {
  it('resolves once and connects to the first checked address though the name now answers private', async () => {
    const dns = stubResolver({ 'rebind.carrier.test': [['127.0.0.1'], ['169.254.169.254'], ['10.0.0.1']] });
    const policy = createUrlPolicy({
      allow: ['rebind.carrier.test'],
      schemes: ['http'],
      ports: [api.port],
      allowPrivate: ['127.0.0.1'],
      resolve: dns.resolve,
    });
    const seenBefore = api.seen.length;
    const result = await policy.fetch(`http://rebind.carrier.test:${api.port}/hello`);
    expect(result.body).toBe('hello from the carrier');
    expect(dns.callsFor('rebind.carrier.test')).toBe(1);
    expect(api.seen.slice(seenBefore).map((request) => request.remoteAddress)).toEqual(['127.0.0.1']);
    // A fresh check now sees the rebound answer and refuses it.
    await expect(policy.check(`http://rebind.carrier.test:${api.port}/`)).rejects.toMatchObject({
      reason: 'metadata',
    });
  });

  it('a CheckedUrl handed to fetch is used as checked: no second lookup at all', async () => {
    const dns = stubResolver({ 'api.carrier.test': [['127.0.0.1'], ['10.0.0.1']] });
    const policy = carrierPolicy(dns);
    const checked = await policy.check(`http://api.carrier.test:${api.port}/hello`);
    const result = await policy.fetch(checked);
    expect(result.body).toBe('hello from the carrier');
    expect(dns.calls).toEqual(['api.carrier.test']);
  });

  it('a look-alike CheckedUrl not made by the policy is checked again', async () => {
    const dns = carrierDns();
    const policy = carrierPolicy(dns);
    const forged = {
      url: new URL(`http://internal.carrier.test:${api.port}/hello`),
      hostname: 'internal.carrier.test',
      port: api.port,
      addresses: ['127.0.0.1'],
    };
    await expect(policy.fetch(forged)).rejects.toMatchObject({
      reason: 'address',
      code: 'permission_denied',
    });
    expect(dns.calls).toEqual(['internal.carrier.test']);
  });

  it('a look-alike whose url is itself a look-alike is refused, never fetched as checked', async () => {
    const dns = carrierDns();
    const policy = carrierPolicy(dns, { ports: [api.port, stranger.port] });
    // 127.0.0.1 is not on the allowlist: only a bypass of the check could reach the stranger.
    const inner = {
      url: new URL(`http://127.0.0.1:${stranger.port}/`),
      hostname: '127.0.0.1',
      port: stranger.port,
      addresses: ['127.0.0.1'],
    };
    const forged = { url: inner, hostname: 'api.carrier.test', port: api.port, addresses: ['127.0.0.1'] };
    const seenBefore = stranger.seen.length;
    await expect(policy.fetch(forged as unknown as CheckedUrl)).rejects.toMatchObject({
      reason: 'malformed',
      code: 'invalid_argument',
      message: 'Not a URL, or longer than 8192 characters.',
    });
    expect(stranger.seen.length).toBe(seenBefore);
    expect(dns.calls).toEqual([]);
  });
});

describe('fetch(): redirects are checked hop by hop', () => {
  const cases: [path: string, reason: string, code: string, message: string][] = [
    [
      '/to-metadata',
      'metadata',
      'permission_denied',
      'api.carrier.test redirected to a URL that is refused: Host 169.254.169.254 is a cloud metadata service and cannot be fetched.',
    ],
    [
      '/to-localhost',
      'address',
      'permission_denied',
      'api.carrier.test redirected to a URL that is refused: Host localhost is not allowed: it is or resolves to a private, loopback, link-local or reserved address.',
    ],
    [
      '/to-loopback-literal',
      'host',
      'permission_denied',
      "api.carrier.test redirected to a URL that is refused: Host 127.0.0.1 is not on this tool's allowlist.",
    ],
    [
      '/to-internal-name',
      'address',
      'permission_denied',
      'api.carrier.test redirected to a URL that is refused: Host internal.carrier.test is not allowed: it is or resolves to a private, loopback, link-local or reserved address.',
    ],
    [
      '/to-file',
      'scheme',
      'permission_denied',
      'api.carrier.test redirected to a URL that is refused: The URL scheme "file:" is not allowed.',
    ],
    [
      '/to-gopher',
      'scheme',
      'permission_denied',
      'api.carrier.test redirected to a URL that is refused: The URL scheme "gopher:" is not allowed.',
    ],
    [
      '/to-userinfo',
      'userinfo',
      'invalid_argument',
      'api.carrier.test redirected to a URL that is refused: URLs with a user name or password (user@host) are not accepted.',
    ],
    ['/to-bad', 'malformed', 'invalid_argument', 'api.carrier.test redirected to an invalid URL.'],
    [
      '/to-backslashes',
      'host',
      'permission_denied',
      "api.carrier.test redirected to a URL that is refused: Host 127.0.0.1 is not on this tool's allowlist.",
    ],
  ];

  it.each(cases)(
    '%s is refused (%s) and the target is never contacted',
    async (path, reason, code, message) => {
      // Every port is allowed here, so each refusal below comes from the hop's own URL: localhost is
      // allowlisted but answers 127.0.0.2 (not in allowPrivate); 127.0.0.1 is in allowPrivate but not
      // on the host allowlist.
      const dns = stubResolver({
        'api.carrier.test': ['127.0.0.1'],
        'internal.carrier.test': ['10.1.2.3'],
        localhost: ['127.0.0.2'],
      });
      const policy = carrierPolicy(dns, { ports: [api.port, files.port, stranger.port] });
      const strangerSeen = stranger.seen.length;
      const refusal = policy.fetch(`http://api.carrier.test:${api.port}${path}`);
      await expect(refusal).rejects.toBeInstanceOf(UrlRefusedError);
      await expect(refusal).rejects.toMatchObject({ reason, code, message });
      expect(stranger.seen.length).toBe(strangerSeen);
    },
  );

  it('a redirect to an allowed host on a port that is not allowed is refused', async () => {
    const policy = carrierPolicy(carrierDns());
    await expect(policy.fetch(`http://api.carrier.test:${api.port}/to-localhost`)).rejects.toMatchObject({
      reason: 'port',
      message: `api.carrier.test redirected to a URL that is refused: Port ${stranger.port} is not allowed for localhost.`,
    });
    expect(stranger.seen).toEqual([]);
  });

  it('follows an allowed redirect and reports the final URL', async () => {
    const result = await carrierPolicy(carrierDns()).fetch(`http://api.carrier.test:${api.port}/to-final`);
    expect({
      status: result.status,
      body: result.body,
      url: result.url,
      redirects: result.redirects,
    }).toEqual({
      status: 200,
      body: 'final page',
      url: `http://api.carrier.test:${api.port}/final`,
      redirects: 1,
    });
  });

  it('resolves every hop anew, pinning each to its own checked address', async () => {
    const dns = carrierDns();
    const result = await carrierPolicy(dns).fetch(`http://api.carrier.test:${api.port}/to-files`);
    expect(result.url).toBe(`http://files.carrier.test:${files.port}/echo`);
    expect(dns.calls).toEqual(['api.carrier.test', 'files.carrier.test']);
  });

  it('stops after maxRedirects with unavailable', async () => {
    const seenBefore = api.seen.length;
    const policy = carrierPolicy(carrierDns(), { maxRedirects: 3 });
    await expect(policy.fetch(`http://api.carrier.test:${api.port}/loop`)).rejects.toMatchObject({
      reason: 'redirects',
      code: 'unavailable',
      retryable: false,
      message: 'api.carrier.test redirected more than 3 times.',
    });
    expect(api.seen.length - seenBefore).toBe(4);
  });

  it('maxRedirects 0 refuses any redirect instead of following it (a secret body never travels on)', async () => {
    const policy = carrierPolicy(carrierDns(), { maxRedirects: 0 });
    await expect(policy.fetch(`http://api.carrier.test:${api.port}/to-final`)).rejects.toMatchObject({
      reason: 'redirects',
    });
  });

  it('303 after POST becomes a GET without body; 307 replays method and body', async () => {
    const policy = carrierPolicy(carrierDns());
    const init = { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'payload' };
    const seeOther = JSON.parse(
      (await policy.fetch(`http://api.carrier.test:${api.port}/see-other`, init)).body,
    );
    expect([seeOther.method, seeOther.body, seeOther.headers['content-type']]).toEqual([
      'GET',
      '',
      undefined,
    ]);
    const temporary = JSON.parse(
      (await policy.fetch(`http://api.carrier.test:${api.port}/temporary`, init)).body,
    );
    expect([temporary.method, temporary.body, temporary.headers['content-type']]).toEqual([
      'POST',
      'payload',
      'text/plain',
    ]);
  });

  it('keeps only the keep-list on a cross-origin redirect and every header on a same-origin one', async () => {
    const policy = carrierPolicy(carrierDns());
    const headers = {
      authorization: 'Bearer secret',
      cookie: 'a=1',
      'proxy-authorization': 'Basic cHJveHk=',
      'x-api-key': 'k-123',
      'X-Tenant': 'acme',
      'x-request-id': 'r1',
      accept: 'application/json',
      'accept-language': 'de',
      'user-agent': 'carrier-tool/1.0',
    };
    const crossOrigin = JSON.parse(
      (await policy.fetch(`http://api.carrier.test:${api.port}/to-files`, { headers })).body,
    ) as Record<string, string>;
    const callerNames = Object.keys(headers).map((name) => name.toLowerCase());
    expect(
      Object.fromEntries(Object.entries(crossOrigin).filter(([name]) => callerNames.includes(name))),
    ).toEqual({
      accept: 'application/json',
      'accept-language': 'de',
      'user-agent': 'carrier-tool/1.0',
    });
    const sameOrigin = JSON.parse(
      (await policy.fetch(`http://api.carrier.test:${api.port}/to-same-origin-echo`, { headers })).body,
    ) as { headers: Record<string, string> };
    expect(sameOrigin.headers).toMatchObject({
      authorization: 'Bearer secret',
      cookie: 'a=1',
      'x-api-key': 'k-123',
      'x-tenant': 'acme',
      'x-request-id': 'r1',
    });
  });

  it('redirectHeaders replaces the keep-list; a body resent cross-origin keeps its content-type', async () => {
    const policy = carrierPolicy(carrierDns(), { redirectHeaders: ['X-Request-Id'] });
    const headers = {
      'x-request-id': 'r1',
      'x-api-key': 'k-123',
      accept: 'text/plain',
      'content-type': 'text/plain',
    };
    const crossOrigin = JSON.parse(
      (await policy.fetch(`http://api.carrier.test:${api.port}/to-files`, { headers })).body,
    ) as Record<string, string>;
    expect([
      crossOrigin['x-request-id'],
      crossOrigin['x-api-key'],
      crossOrigin.accept,
      crossOrigin['content-type'],
    ]).toEqual(['r1', undefined, '*/*', undefined]);
    const resent = JSON.parse(
      (
        await policy.fetch(`http://api.carrier.test:${api.port}/temporary-to-files`, {
          method: 'POST',
          body: 'payload',
          headers,
        })
      ).body,
    ) as Record<string, string>;
    expect([resent['content-type'], resent['x-api-key'], resent['x-request-id']]).toEqual([
      'text/plain',
      undefined,
      'r1',
    ]);
  });

  it('a header dropped on the way out stays dropped when a later hop comes back to the first origin', async () => {
    const policy = carrierPolicy(carrierDns());
    const result = await policy.fetch(`http://api.carrier.test:${api.port}/to-files-and-back`, {
      headers: { 'x-api-key': 'k-123', authorization: 'Bearer secret', accept: 'text/plain' },
    });
    const back = JSON.parse(result.body) as { headers: Record<string, string> };
    expect(result.redirects).toBe(2);
    expect([back.headers['x-api-key'], back.headers.authorization, back.headers.accept]).toEqual([
      undefined,
      undefined,
      'text/plain',
    ]);
  });
});

describe('fetch(): caps and failures', () => {
  it('cuts a body longer than maxBodyBytes and says so', async () => {
    const policy = carrierPolicy(carrierDns(), { maxBodyBytes: 1000 });
    const result = await policy.fetch(`http://api.carrier.test:${api.port}/big`);
    expect({
      body: result.body,
      bytes: result.bytes,
      truncated: result.truncated,
      note: result.note,
    }).toEqual({
      body: 'x'.repeat(1000),
      bytes: 1000,
      truncated: true,
      note: 'The response body was cut at 1000 bytes; only its beginning is shown.',
    });
  });

  it('cuts a compressed body at maxBodyBytes of decompressed bytes, reading no further', async () => {
    const policy = carrierPolicy(carrierDns(), { maxBodyBytes: 1000 });
    const result = await policy.fetch(`http://api.carrier.test:${api.port}/gzip-bomb`);
    expect({ body: result.body, bytes: result.bytes, truncated: result.truncated }).toEqual({
      body: '\0'.repeat(1000),
      bytes: 1000,
      truncated: true,
    });
  });

  it('ends a body that trickles past timeoutMs with timeout', async () => {
    const policy = carrierPolicy(carrierDns(), { timeoutMs: 200 });
    await expect(policy.fetch(`http://api.carrier.test:${api.port}/drip`)).rejects.toMatchObject({
      reason: 'timeout',
      code: 'timeout',
      message: 'Fetching api.carrier.test took longer than 200 ms.',
    });
  });

  it('a body of exactly maxBodyBytes is not cut', async () => {
    const policy = carrierPolicy(carrierDns(), { maxBodyBytes: 1000 });
    const result = await policy.fetch(`http://api.carrier.test:${api.port}/exact`);
    expect([result.bytes, result.truncated, result.note]).toEqual([1000, false, undefined]);
  });

  it('ends a call past timeoutMs with timeout', async () => {
    const policy = carrierPolicy(carrierDns(), { timeoutMs: 200 });
    await expect(policy.fetch(`http://api.carrier.test:${api.port}/slow`)).rejects.toMatchObject({
      reason: 'timeout',
      code: 'timeout',
      message: 'Fetching api.carrier.test took longer than 200 ms.',
    });
  });

  it('counts resolution in the deadline', async () => {
    const policy = createUrlPolicy({
      allow: ['api.carrier.test'],
      timeoutMs: 100,
      resolve: () => new Promise(() => undefined),
    });
    await expect(policy.fetch('https://api.carrier.test/')).rejects.toMatchObject({ code: 'timeout' });
  });

  it('bounds the resolution of a check on its own by timeoutMs', async () => {
    const policy = createUrlPolicy({
      allow: ['api.carrier.test'],
      timeoutMs: 100,
      resolve: () => new Promise(() => undefined),
    });
    await expect(policy.check('https://api.carrier.test/')).rejects.toMatchObject({
      reason: 'timeout',
      code: 'timeout',
      host: 'api.carrier.test',
      message: 'Resolving api.carrier.test took longer than 100 ms.',
    });
  });

  it("a check follows the caller's signal, rejecting with its reason unchanged", async () => {
    const policy = createUrlPolicy({
      allow: ['api.carrier.test'],
      resolve: () => new Promise(() => undefined),
    });
    const controller = new AbortController();
    const call = policy.check('https://api.carrier.test/', { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('client cancelled')), 20);
    await expect(call).rejects.toThrow('client cancelled');
  });

  it("follows the caller's signal", async () => {
    const policy = carrierPolicy(carrierDns());
    const controller = new AbortController();
    const call = policy.fetch(`http://api.carrier.test:${api.port}/slow`, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('client cancelled')), 50);
    await expect(call).rejects.toThrow('client cancelled');
  });

  it('a refused connection is unavailable, naming the host and no address', async () => {
    const port = await unusedPort();
    const policy = carrierPolicy(carrierDns(), { ports: [port] });
    const refusal = policy.fetch(`http://api.carrier.test:${port}/`);
    await expect(refusal).rejects.toMatchObject({
      reason: 'connect',
      code: 'unavailable',
      retryable: true,
      message: 'Could not connect to api.carrier.test.',
    });
  });

  it('a connection cut in the middle of the body is unavailable, naming the host and no address', async () => {
    const entries: LogEntry[] = [];
    const policy = carrierPolicy(carrierDns(), { logger: recordingLogger(entries) });
    const error = await policy.fetch(`http://api.carrier.test:${api.port}/cut`).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(UrlRefusedError);
    expect(error).toMatchObject({
      reason: 'connect',
      code: 'unavailable',
      retryable: true,
      message: 'Could not read the response from api.carrier.test.',
    });
    // The address goes to the policy's log, with the error; never to the message.
    expect(entries.map(({ level, fields, message }) => [level, fields.address, message])).toEqual([
      ['warn', '127.0.0.1', 'url-allowlist: reading the response failed'],
    ]);
  });

  it('a body whose content-encoding does not decode is unavailable, not a raw stream error', async () => {
    const policy = carrierPolicy(carrierDns());
    const error = await policy.fetch(`http://api.carrier.test:${api.port}/not-gzip`).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(UrlRefusedError);
    expect(error).toMatchObject({
      reason: 'connect',
      code: 'unavailable',
      message: 'Could not read the response from api.carrier.test.',
    });
  });

  it('a name DNS says does not exist is not_found (the model named it; no dependency failed)', async () => {
    const policy = carrierPolicy(stubResolver({}));
    await expect(policy.fetch(`http://api.carrier.test:${api.port}/`)).rejects.toMatchObject({
      reason: 'nonexistent',
      code: 'not_found',
      retryable: false,
      message: 'Host api.carrier.test does not exist.',
    });
  });
});

describe('fetch(): a CheckedUrl cannot be steered after the check', () => {
  it('fetches what was checked even when the caller mutates checked.url afterwards', async () => {
    const dns = carrierDns();
    const policy = carrierPolicy(dns);
    const checked = await policy.check(`http://api.carrier.test:${api.port}/hello`);
    checked.url.hostname = 'internal.carrier.test';
    checked.url.pathname = '/echo';
    const result = await policy.fetch(checked);
    expect([result.url, result.body]).toEqual([
      `http://api.carrier.test:${api.port}/hello`,
      'hello from the carrier',
    ]);
    expect(dns.calls).toEqual(['api.carrier.test']);
    expect(Object.isFrozen(checked.addresses)).toBe(true);
  });
});
