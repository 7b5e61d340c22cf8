// Red-team regression suite: SSRF attacks from a model that controls every URL argument (and from
// an allowed server that controls its redirects), over real HTTP on loopback and real SDK round trips.
import { brotliCompressSync, gzipSync, constants as zlibConstants } from 'node:zlib';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createSilentLogger, defineTool, ok, registerTools } from '@toolgate/core';
import { connectTestClient, expectFailure, type TestClient } from '@toolgate/core/testing';
import { EnvHttpProxyAgent, getGlobalDispatcher, setGlobalDispatcher } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createUrlGuard, createUrlPolicy, type UrlPolicy, UrlRefusedError } from '../src/index.js';
import { type LocalServer, startLocalServer } from './support/local-server.js';
import { type StubResolver, stubResolver } from './support/stub-resolver.js';

// 4 MiB compressed to a few dozen bytes with brotli's largest window (16 MiB): a decoder for it
// holds that window however little of the body is read.
const BROTLI_BOMB = brotliCompressSync(Buffer.alloc(4 * 1024 * 1024, 'a'), {
  params: { [zlibConstants.BROTLI_PARAM_LGWIN]: 24, [zlibConstants.BROTLI_PARAM_QUALITY]: 5 },
});

let api: LocalServer;
let stranger: LocalServer;
let proxy: LocalServer;

beforeAll(async () => {
  // Another local service: nothing may ever reach it.
  stranger = await startLocalServer({ '/': (_request, response) => response.end('internal secrets') });
  // A would-be proxy: if any request goes through an environment proxy, it lands here.
  proxy = await startLocalServer({});
  api = await startLocalServer({
    '/ok': (_request, response) => response.end('carrier page'),
    // An allowed server that promises a body and hangs up halfway through it.
    '/cut': (_request, response) => {
      response.writeHead(200, { 'content-length': '1000' });
      response.write('partial', () => response.socket?.destroy());
    },
    // An allowed server turned hostile: a brotli body the client never asked for.
    '/br': (_request, response) => response.writeHead(200, { 'content-encoding': 'br' }).end(BROTLI_BOMB),
    '/gzip-br': (_request, response) =>
      response
        .writeHead(200, { 'content-encoding': 'gzip, br' })
        .end(brotliCompressSync(gzipSync(Buffer.alloc(4 * 1024 * 1024, 'a')))),
    '/raw': (request, response) =>
      response.end(JSON.stringify({ path: request.path, headers: request.headers })),
    // Redirects to whatever the query says: an allowed server turned hostile (or an open redirect).
    '/r': (request, response) => {
      const to = new URL(request.path, 'http://local').searchParams.get('to') ?? '/ok';
      const location = to.replaceAll('STRANGER', String(stranger.port)).replaceAll('PORT', String(api.port));
      response.writeHead(302, { location }).end();
    },
  });
});

afterAll(async () => {
  await Promise.all([api.close(), stranger.close(), proxy.close()]);
});

const DNS_TABLE = {
  'api.carrier.test': ['127.0.0.1'],
  'gcp6.example.test': ['fd20:ce::254'],
  'openstack6.example.test': ['fe80::a9fe:a9fe'],
  // An IPv6-only network's DNS64 answering with its local-use NAT64 prefix (RFC 8215, /96 form).
  'nat64-local.example.test': ['64:ff9b:1::a9fe:a9fe'],
  'nip.example.test': ['169.254.169.254'],
  'octal-meta.example.test': ['0251.0376.0251.0376'],
  'rebind.carrier.test': [['127.0.0.1'], ['10.0.0.1']],
  'internal.carrier.test': ['10.9.8.7'],
} as const;

function carrier(overrides: Partial<Parameters<typeof createUrlPolicy>[0]> = {}): {
  policy: UrlPolicy;
  dns: StubResolver;
} {
  const dns = stubResolver(DNS_TABLE);
  const policy = createUrlPolicy({
    allow: ['api.carrier.test', 'rebind.carrier.test', 'internal.carrier.test', '*.example.test'],
    schemes: ['http'],
    ports: [api.port],
    allowPrivate: ['127.0.0.1'],
    resolve: dns.resolve,
    timeoutMs: 3000,
    ...overrides,
  });
  return { policy, dns };
}

async function refusalOf(promise: Promise<unknown>): Promise<UrlRefusedError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(UrlRefusedError);
  return error as UrlRefusedError;
}

describe('cloud metadata stays refused even where allowPrivate opens the range around it', () => {
  // An operator who opens ULA (an internal IPv6 network) or link-local for a test server must not
  // open the metadata services that live there.
  const open = () =>
    carrier({
      // Even the literals listed on the allowlist itself.
      allow: [
        '*.example.test',
        '[fd20:ce::254]',
        '[fe80::a9fe:a9fe]',
        '169.254.169.254',
        '[2002:a9fe:a9fe::1]',
        '[2001:0:4136:e378:8000:63bf:5601:5601]',
        '[2001:0:a9fe:a9fe::1]',
        '[2600:1f18:42::5efe:a9fe:a9fe]',
        '[2a05:d018:1::5efe:a9fe:a9fe]',
        '[2600:1f18:42::200:5efe:a9fe:a9fe]',
        '[fe80::5efe:a9fe:a9fe]',
        '[64:ff9b:1::a9fe:a9fe]',
        '[64:ff9b:1:0:a9:fea9:fe00:0]',
        '[64:ff9b:1:a9:fe:a9fe::]',
        '[64:ff9b:1:a9fe:a9:fe00::]',
        '[::a9fe:a9fe]',
        '[::ffff:0:a9fe:a9fe]',
      ],
      ports: [80],
      allowPrivate: [
        '127.0.0.1',
        'fc00::/7',
        'fe80::/10',
        '169.254.0.0/16',
        '10.0.0.0/8',
        '2002::/16',
        '2001::/32',
        // An IPv6-only cluster that reaches its internal IPv4 services through a local-use NAT64.
        '64:ff9b:1::/48',
        // IPv4-compatible (automatic tunnels) and IPv4-translated (a SIIT translator, RFC 6145).
        '::/96',
        '::ffff:0:0:0/96',
      ],
    });

  it.each([
    ['GCP IPv6 metadata literal', 'http://[fd20:ce::254]/computeMetadata/v1/'],
    ['GCP IPv6 metadata, long form', 'http://[fd20:ce:0:0:0:0:0:254]/'],
    ['a name resolving to the GCP IPv6 metadata', 'http://gcp6.example.test/'],
    ['OpenStack IPv6 metadata literal', 'http://[fe80::a9fe:a9fe]/openstack'],
    ['a name resolving to the OpenStack IPv6 metadata', 'http://openstack6.example.test/'],
    ['AWS metadata, octal', 'http://0251.0376.0251.0376/latest/'],
    ['AWS metadata, hex', 'http://0xa9fea9fe/'],
    ['AWS metadata, mixed short form', 'http://169.254.43518/'],
    ['AWS metadata, NAT64 with dotted tail', 'http://[64:ff9b::169.254.169.254]/'],
    ['AWS metadata, mapped long form', 'http://[0:0:0:0:0:ffff:169.254.169.254]/'],
    ['a nip.io-style name resolving to metadata', 'http://nip.example.test/'],
    ['AWS metadata inside 6to4', 'http://[2002:a9fe:a9fe::1]/'],
    ['AWS metadata as a Teredo client (inverted)', 'http://[2001:0:4136:e378:8000:63bf:5601:5601]/'],
    ['AWS metadata as a Teredo server', 'http://[2001:0:a9fe:a9fe::1]/'],
    [
      'AWS metadata as an ISATAP interface id under a global prefix',
      'http://[2600:1f18:42::5efe:a9fe:a9fe]/',
    ],
    ['AWS metadata as an ISATAP id, dotted tail', 'http://[2a05:d018:1::5efe:169.254.169.254]/'],
    ['AWS metadata as a universal ISATAP id', 'http://[2600:1f18:42::200:5efe:a9fe:a9fe]/'],
    ['AWS metadata as a link-local ISATAP id', 'http://[fe80::5efe:a9fe:a9fe]/'],
    ['AWS metadata under a local-use NAT64 /96 prefix', 'http://[64:ff9b:1::a9fe:a9fe]/'],
    ['AWS metadata under a local-use NAT64 /64 prefix', 'http://[64:ff9b:1:0:a9:fea9:fe00:0]/'],
    ['AWS metadata under a local-use NAT64 /56 prefix', 'http://[64:ff9b:1:a9:fe:a9fe::]/'],
    ['AWS metadata under the local-use NAT64 /48 prefix', 'http://[64:ff9b:1:a9fe:a9:fe00::]/'],
    ['a DNS64 name for metadata under local-use NAT64', 'http://nat64-local.example.test/'],
    ['AWS metadata as an IPv4-compatible address', 'http://[::169.254.169.254]/'],
    ['AWS metadata as an IPv4-translated (SIIT) address', 'http://[::ffff:0:169.254.169.254]/'],
  ])('%s: %s', async (_what, url) => {
    const { policy } = open();
    const error = await refusalOf(policy.check(url));
    expect(error.reason).toBe('metadata');
    expect(error.code).toBe('permission_denied');
  });

  it('a resolver answer written in octal is not parsed as an address at all', async () => {
    const { policy } = open();
    const error = await refusalOf(policy.check('http://octal-meta.example.test/'));
    expect(error.reason).toBe('address');
    expect(error.detail.range).toBe('unparseable');
  });
});

describe('more spellings of internal addresses', () => {
  it.each([
    'http://127.000.000.001/',
    'http://0177.1/',
    'http://0x7f.0.1/',
    'http://127.0.1/',
    'http://127.0.0.1./',
    'http://0x00000000/',
    'http://000000/',
    'http://\u2460\u2461\u2466.0.0.1/',
    'http://127\u30020\u30020\u30021/',
    'http://127\uFF0E0\uFF0E0\uFF0E1/',
    'http://[::ffff:0:7f00:1]/',
    'http://[0000:0000:0000:0000:0000:ffff:7f00:0001]/',
    'http://[::ffff:10.0.0.1]/',
    'http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/',
    'http://[2002:a00:1::1]/',
    'http://[100::1]/',
    'http://[3fff::1]/',
    'http://[2001:db8::1]/',
    'http://[fe80::1]/',
    'http://10.1/',
    'http://192.168.1/',
    'http://172.31.255.255/',
    'http://192.0.0.8/',
    'http://198.18.0.1/',
  ])('%s is refused as an address (allowPrivate only names 127.0.0.1 as the test server)', async (url) => {
    // Only the 127.0.0.1 literal is allowlisted nowhere: every form must be judged by its address.
    const { policy } = carrier({ allowPrivate: [] });
    const error = await refusalOf(policy.check(url));
    expect(['address', 'malformed']).toContain(error.reason);
    expect(error.code).not.toBe('unavailable');
  });

  it('refuses link-local with any zone id spelling', async () => {
    const { policy } = carrier({ allowPrivate: ['fe80::/10'] });
    for (const url of ['http://[fe80::1%25eth0]/', 'http://[fe80::1%eth0]/', 'http://[fe80::1%251]/']) {
      const error = await refusalOf(policy.check(url));
      expect(error.reason).toBe('malformed');
    }
  });
});

describe('userinfo, fullwidth and parser tricks', () => {
  it.each([
    'http://api.carrier.test:@evil.example/',
    'http://:@api.carrier.test/',
    'http://api.carrier.test\uFF20evil.example/',
    'http://api.carrier.test%40evil.example/',
    'http://api.carrier.test\uFF05\uFF14\uFF10evil.example/',
    'http://api.carrier.test%00.evil.example/',
    'http://api.carrier.test%2F@evil.example/',
    'http://evil.example%2F.api.carrier.test/',
    'http://api.carrier.test\u3002evil.example/',
    'http:/api.carrier.test/',
    'http:api.carrier.test/',
    'http://[api.carrier.test]/',
  ])('%s never reaches evil.example or an unchecked host', async (url) => {
    const { policy, dns } = carrier();
    const error = await refusalOf(policy.check(url));
    expect(['userinfo', 'malformed', 'host', 'port']).toContain(error.reason);
    expect(dns.calls.filter((name) => name !== 'api.carrier.test')).toEqual([]);
  });

  it('reads the single-slash and no-slash http forms as the host they name, then checks it', async () => {
    // WHATWG reads `http:/host` and `http:host` (special scheme) as `http://host`: the check sees that host.
    const { policy } = carrier();
    for (const url of [`http:/api.carrier.test:${api.port}/ok`, `http:api.carrier.test:${api.port}/ok`]) {
      const checked = await policy.check(url);
      expect(checked.hostname).toBe('api.carrier.test');
    }
  });

  it.each([
    'blob:http://api.carrier.test/uuid',
    'ws://api.carrier.test/',
    'wss://api.carrier.test/',
    'ldap://api.carrier.test/',
    'netdoc:/etc/passwd',
    'view-source:http://api.carrier.test/',
    'https+unix://%2Fvar%2Frun%2Fdocker.sock/containers/json',
    'file://localhost/etc/passwd',
    'tftp://api.carrier.test/x',
  ])('refuses the scheme of %s', async (url) => {
    const { policy } = carrier();
    expect((await refusalOf(policy.check(url))).reason).toBe('scheme');
  });

  it('refuses a URL one character over maxUrlLength, before any lookup, and allows one at the limit', async () => {
    const { policy, dns } = carrier({ maxUrlLength: 200 });
    const base = `http://api.carrier.test:${api.port}/`;
    const atLimit = base + 'a'.repeat(200 - base.length);
    await expect(policy.check(atLimit)).resolves.toMatchObject({ hostname: 'api.carrier.test' });
    const error = await refusalOf(policy.check(`${atLimit}a`));
    expect(error.reason).toBe('malformed');
    expect(dns.calls).toEqual(['api.carrier.test']);
    // A host label past 63 characters or a name past 253 is refused by shape, never resolved.
    expect((await refusalOf(policy.check(`http://${'a'.repeat(64)}.example.test/`))).reason).toBe(
      'malformed',
    );
  });

  it('sends percent-encoded CR LF in the path as text: no header is injected', async () => {
    const { policy } = carrier();
    const page = await policy.fetch(
      `http://api.carrier.test:${api.port}/raw?q=%0D%0AX-Injected:%20yes%0d%0a`,
    );
    const seen = JSON.parse(page.body) as { path: string; headers: Record<string, string> };
    expect(seen.headers['x-injected']).toBeUndefined();
    expect(seen.path).toBe('/raw?q=%0D%0AX-Injected:%20yes%0d%0a');
  });
});

describe('redirects from an allowed server to internal targets', () => {
  const to = (target: string) => `http://api.carrier.test:${api.port}/r?to=${encodeURIComponent(target)}`;

  it.each([
    ['a loopback literal in hex', 'http://0x7f.1:STRANGER/', 'host'],
    ['a mapped IPv6 loopback', 'http://[::ffff:127.0.0.1]:STRANGER/', 'host'],
    ['metadata in decimal', 'http://2852039166/latest/meta-data/', 'metadata'],
    ['a name resolving to GCP IPv6 metadata', 'http://gcp6.example.test:PORT/', 'metadata'],
    ['a scheme-relative metadata host', '//169.254.169.254/', 'metadata'],
    ['an allowed name resolving to metadata', 'http://nip.example.test:PORT/', 'metadata'],
    ['the allowed host on port 0', 'http://api.carrier.test:0/', 'port'],
    ['userinfo onto the allowed host', 'http://evil.example@api.carrier.test/', 'userinfo'],
    ['the allowed host on the stranger’s port', 'http://api.carrier.test:STRANGER/', 'port'],
    ['a file URL', 'file:///etc/passwd', 'scheme'],
    ['a data URL', 'data:text/plain,hi', 'scheme'],
  ])('refuses a redirect to %s', async (_what, target, reason) => {
    const { policy } = carrier();
    const before = stranger.seen.length;
    const error = await refusalOf(policy.fetch(to(target)));
    expect(error.reason).toBe(reason);
    expect(error.message).toMatch(/^api\.carrier\.test redirected to a URL that is refused: /);
    expect(stranger.seen.length).toBe(before);
  });

  it('refuses a redirect to an allowed name that resolves to a private address', async () => {
    const { policy } = carrier();
    const error = await refusalOf(policy.fetch(to(`http://internal.carrier.test:${api.port}/`)));
    expect(error.reason).toBe('address');
    expect(error.message).not.toContain('10.9.8.7');
  });

  it('refuses an over-long Location', async () => {
    const { policy } = carrier({ maxUrlLength: 300 });
    const error = await refusalOf(policy.fetch(to(`http://api.carrier.test:${api.port}/${'a'.repeat(400)}`)));
    expect(error.reason).toBe('malformed');
  });
});

describe('DNS rebinding between the guard’s check and a handler’s fetch', () => {
  let client: TestClient | undefined;
  afterEach(async () => {
    await client?.close();
    client = undefined;
  });

  it('a handler that re-fetches the string URL re-checks it and is refused when the name now answers private', async () => {
    const { policy, dns } = carrier();
    const tool = defineTool({
      name: 'careless_fetch',
      description: 'Fetches the URL string again instead of the checked URL (test).',
      input: { url: z.string() },
      middleware: [createUrlGuard({ paths: 'url', policy })],
      handler: async ({ url }, ctx) => {
        const page = await policy.fetch(url, { signal: ctx.signal });
        return ok({ body: page.body });
      },
    });
    const server = new McpServer({ name: 'rebind', version: '1.0.0' });
    registerTools(server, [tool], { logger: createSilentLogger() });
    client = await connectTestClient(server);
    const result = await client.callTool('careless_fetch', {
      url: `http://rebind.carrier.test:${api.port}/ok`,
    });
    const envelope = expectFailure(result);
    expect(envelope.error).toBe('permission_denied');
    expect(dns.callsFor('rebind.carrier.test')).toBe(2);
    // Nothing of the rebound address reaches the model.
    expect(JSON.stringify(result)).not.toContain('10.0.0.1');
  });
});

describe('environment proxies and a global dispatcher are never used', () => {
  const saved: Record<string, string | undefined> = {};
  const names = [
    'HTTP_PROXY',
    'http_proxy',
    'HTTPS_PROXY',
    'https_proxy',
    'ALL_PROXY',
    'NO_PROXY',
    'no_proxy',
  ];
  let previous: ReturnType<typeof getGlobalDispatcher> | undefined;

  afterEach(() => {
    for (const name of names) {
      if (saved[name] === undefined) delete process.env[name];
      else process.env[name] = saved[name];
    }
    if (previous) setGlobalDispatcher(previous);
    previous = undefined;
  });

  it('goes straight to the checked address though every proxy variable and a proxying global dispatcher point elsewhere', async () => {
    for (const name of names) saved[name] = process.env[name];
    const proxyUrl = `http://127.0.0.1:${proxy.port}`;
    for (const name of ['HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy', 'ALL_PROXY']) {
      process.env[name] = proxyUrl;
    }
    process.env.NO_PROXY = '';
    process.env.no_proxy = '';
    previous = getGlobalDispatcher();
    setGlobalDispatcher(new EnvHttpProxyAgent());
    const { policy } = carrier();
    const before = { api: api.seen.length, proxy: proxy.seen.length };
    const page = await policy.fetch(`http://api.carrier.test:${api.port}/ok`);
    expect(page.body).toBe('carrier page');
    expect(api.seen.length).toBe(before.api + 1);
    expect(proxy.seen.length).toBe(before.proxy);
    expect(api.seen.at(-1)?.headers.host).toBe(`api.carrier.test:${api.port}`);
  });
});

describe('what the model sees: no address, errno, stack or path, in content or _meta', () => {
  let client: TestClient | undefined;
  afterEach(async () => {
    await client?.close();
    client = undefined;
  });

  it.each([
    ['a name that does not resolve', 'http://nowhere.example.test:PORT/', 'not_found'],
    ['a refused connection', 'http://api.carrier.test:PORT_CLOSED/ok', 'unavailable'],
    ['a connection cut in the middle of the body', 'http://api.carrier.test:PORT/cut', 'unavailable'],
    ['a name resolving to a private address', 'http://internal.carrier.test:PORT/', 'permission_denied'],
    [
      'a redirect to metadata',
      'http://api.carrier.test:PORT/r?to=http%3A%2F%2F169.254.169.254%2F',
      'permission_denied',
    ],
  ])('%s', async (_what, template, code) => {
    const closed = await import('./support/local-server.js').then((module) => module.unusedPort());
    const { policy } = carrier({ ports: [api.port, closed] });
    const tool = defineTool({
      name: 'fetch_page',
      description: 'Fetches a carrier page (test).',
      input: { url: z.string() },
      handler: async ({ url }, ctx) => {
        const page = await policy.fetch(url, { signal: ctx.signal });
        return ok({ body: page.body });
      },
    });
    const server = new McpServer({ name: 'leaks', version: '1.0.0' });
    registerTools(server, [tool], { logger: createSilentLogger() });
    client = await connectTestClient(server);
    const url = template.replace('PORT_CLOSED', String(closed)).replace('PORT', String(api.port));
    const result = await client.callTool('fetch_page', { url });
    expect(expectFailure(result).error).toBe(code);
    const everything = JSON.stringify(result);
    for (const internal of [
      '127.0.0.1',
      '10.9.8.7',
      'ECONNREFUSED',
      'ENOTFOUND',
      'getaddrinfo',
      'undici',
      'node_modules',
      '/work/',
      '    at ',
      'toolgate url-allowlist: refused',
    ]) {
      expect(everything).not.toContain(internal);
    }
  });

  it('the guard refuses 10 000 URLs in one call before any lookup', async () => {
    const { policy, dns } = carrier();
    const tool = defineTool({
      name: 'check_links',
      description: 'Checks links (test).',
      input: { links: z.array(z.string()) },
      middleware: [createUrlGuard({ paths: 'links[]', policy })],
      handler: async () => ok({}),
    });
    const server = new McpServer({ name: 'many', version: '1.0.0' });
    registerTools(server, [tool], { logger: createSilentLogger() });
    client = await connectTestClient(server);
    const links = Array.from({ length: 10_000 }, (_, index) => `http://h${index}.example.test/`);
    const envelope = expectFailure(await client.callTool('check_links', { links }));
    expect(envelope.message).toBe('At most 16 URLs per call.');
    expect(dns.calls).toEqual([]);
  });
});

describe('request headers, method and body the model passes through a tool', () => {
  // A tool that lets the model call the carrier's API with its own method, headers and body: the
  // values are the model's, so one that cannot be sent is the model's mistake (invalid_argument,
  // nothing resolved or sent), never "the carrier is unavailable" (which a circuit breaker counts
  // against the carrier for every caller, and which tells the model to retry the same values).
  let client: TestClient | undefined;
  afterEach(async () => {
    await client?.close();
    client = undefined;
  });

  async function serveCarrierApi(): Promise<{ client: TestClient; dns: StubResolver }> {
    const { policy, dns } = carrier();
    const tool = defineTool({
      name: 'call_carrier_api',
      description: 'Calls the carrier API with a method, headers and body (test).',
      input: {
        url: z.string(),
        method: z.string().optional(),
        headers: z.record(z.string(), z.string()).optional(),
        body: z.string().optional(),
      },
      handler: async ({ url, method, headers, body }, ctx) => {
        const page = await policy.fetch(url, {
          signal: ctx.signal,
          ...(method !== undefined && { method }),
          ...(headers !== undefined && { headers }),
          ...(body !== undefined && { body }),
        });
        return ok({ status: page.status, body: page.body });
      },
    });
    const server = new McpServer({ name: 'carrier-api', version: '1.0.0' });
    registerTools(server, [tool], { logger: createSilentLogger() });
    client = await connectTestClient(server);
    return { client, dns };
  }

  const VALUE_HINT = 'Send each header value on one line, as Latin-1 text; leave out line breaks and NUL.';
  const HOP_HINT =
    'Leave out host, connection, content-length, transfer-encoding, expect and other hop-by-hop headers: they come from the URL and the body.';
  it.each([
    [
      'a CR LF in a header value (header injection)',
      { headers: { 'x-track': 'a\r\nX-Injected: yes' } },
      'The x-track header value holds a line break, NUL or a character above U+00FF.',
      VALUE_HINT,
    ],
    [
      'a NUL in a header value',
      { headers: { 'x-track': 'a\u0000b' } },
      'The x-track header value holds a line break, NUL or a character above U+00FF.',
      VALUE_HINT,
    ],
    [
      'a character above U+00FF in a header value',
      { headers: { 'x-track': 'price \u20ac' } },
      'The x-track header value holds a line break, NUL or a character above U+00FF.',
      VALUE_HINT,
    ],
    [
      'a space in a header name',
      { headers: { 'x track': 'a' } },
      'A request header name is not a valid HTTP header name.',
      'Header names are letters, digits and - (for example x-request-id).',
    ],
    [
      'a Host header (another virtual host on the pinned server)',
      { headers: { Host: 'admin.internal' } },
      'The host header cannot be set.',
      HOP_HINT,
    ],
    [
      'a Transfer-Encoding header (request smuggling)',
      { headers: { 'Transfer-Encoding': 'chunked' } },
      'The transfer-encoding header cannot be set.',
      HOP_HINT,
    ],
    [
      'an Expect header',
      { headers: { expect: '100-continue' } },
      'The expect header cannot be set.',
      HOP_HINT,
    ],
    [
      'a method that is no HTTP token',
      { method: 'GET /admin HTTP/1.1\r\nHost: x' },
      'The request method is not a valid HTTP method.',
      'Use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS.',
    ],
    [
      'TRACE',
      { method: 'trace' },
      'The TRACE method cannot be used.',
      'Use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS.',
    ],
    [
      'a body on GET',
      { method: 'GET', body: 'x' },
      'A GET request cannot have a body.',
      'Leave the body out, or send it with POST, PUT or PATCH.',
    ],
  ])('%s is invalid_argument, before any lookup or connection', async (_what, args, message, hint) => {
    const { client: caller, dns } = await serveCarrierApi();
    const before = api.seen.length;
    const result = await caller.callTool('call_carrier_api', {
      url: `http://api.carrier.test:${api.port}/raw`,
      ...args,
    });
    expect(expectFailure(result)).toEqual({
      ok: false,
      error: 'invalid_argument',
      message,
      hint,
      retryable: false,
    });
    expect(dns.calls).toEqual([]);
    expect(api.seen.length).toBe(before);
  });

  it('sends what fetch can send: Latin-1 values, and a value with a trailing line break trimmed', async () => {
    const { client: caller } = await serveCarrierApi();
    const result = await caller.callTool('call_carrier_api', {
      url: `http://api.carrier.test:${api.port}/raw`,
      method: 'post',
      headers: { 'x-track': 'caf\u00e9', 'x-token': ' t0k3n\n' },
      body: 'q',
    });
    expect(result.isError).not.toBe(true);
    const { body } = result.structuredContent as { body: string };
    const seen = JSON.parse(body) as { headers: Record<string, string> };
    expect(Buffer.from(seen.headers['x-track']!, 'latin1').toString('latin1')).toBe('caf\u00e9');
    expect(seen.headers['x-token']).toBe('t0k3n');
  });
});

describe('content codings the client did not ask for', () => {
  // Brotli and zstd decoders take the window the server declares (brotli up to 16 MiB, zstd up to
  // 128 MiB on Node versions that decode it) for every response, however little of it is read:
  // maxBodyBytes caps the text, not that memory. fetch asks for gzip and deflate only, and refuses
  // a body in another coding unless the caller's own accept-encoding asked for it.
  let client: TestClient | undefined;
  afterEach(async () => {
    await client?.close();
    client = undefined;
  });

  async function servePageTool(acceptEncoding?: string): Promise<TestClient> {
    const { policy } = carrier();
    const tool = defineTool({
      name: 'fetch_page',
      description: 'Fetches a carrier page (test).',
      input: { url: z.string() },
      handler: async ({ url }, ctx) => {
        const page = await policy.fetch(url, {
          signal: ctx.signal,
          ...(acceptEncoding !== undefined && { headers: { 'accept-encoding': acceptEncoding } }),
        });
        return ok({ bytes: page.bytes, truncated: page.truncated });
      },
    });
    const server = new McpServer({ name: 'codings', version: '1.0.0' });
    registerTools(server, [tool], { logger: createSilentLogger() });
    client = await connectTestClient(server);
    return client;
  }

  it.each(['/br', '/gzip-br'])('a %s body nobody asked for is unavailable, not decoded', async (path) => {
    const caller = await servePageTool();
    const before = api.seen.length;
    const result = await caller.callTool('fetch_page', { url: `http://api.carrier.test:${api.port}${path}` });
    const { incidentId: _incident, ...envelope } = expectFailure(result);
    expect(envelope).toEqual({
      ok: false,
      error: 'unavailable',
      message: 'Could not read the response from api.carrier.test.',
      hint: 'A service this tool depends on is unavailable. Do not retry now; tell the user and try once later.',
      retryable: true,
    });
    expect(api.seen.slice(before).map((seen) => seen.headers['accept-encoding'])).toEqual(['gzip, deflate']);
  });

  it("decodes br when the caller's own accept-encoding asked for it", async () => {
    const caller = await servePageTool('br');
    const result = await caller.callTool('fetch_page', { url: `http://api.carrier.test:${api.port}/br` });
    expect(result.structuredContent).toEqual({ ok: true, bytes: 1024 * 1024, truncated: true });
  });
});
