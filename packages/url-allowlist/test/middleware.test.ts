import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  createSilentLogger,
  defineTool,
  ok,
  type PolicyDecision,
  registerTools,
  type ToolMiddleware,
} from '@toolgate/core';
import { connectTestClient, expectFailure, type TestClient } from '@toolgate/core/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createUrlGuard, createUrlPolicy, type UrlGuardOptions, urlArgument } from '../src/index.js';
import { type LocalServer, startLocalServer } from './support/local-server.js';
import { stubResolver } from './support/stub-resolver.js';

let carrier: LocalServer;
let client: TestClient | undefined;

beforeAll(async () => {
  carrier = await startLocalServer({
    '/track/42': (_request, response) => response.end('{"state":"in transit"}'),
    '/to-metadata': (_request, response) =>
      response.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end(),
  });
});

afterAll(async () => {
  await carrier.close();
});

afterEach(async () => {
  await client?.close();
  client = undefined;
});

function setup(extra: Partial<UrlGuardOptions> = {}) {
  const dns = stubResolver({ 'api.carrier.test': ['127.0.0.1'], 'internal.carrier.test': ['10.0.0.7'] });
  const policy = createUrlPolicy({
    allow: ['api.carrier.test', 'internal.carrier.test'],
    schemes: ['http'],
    ports: [carrier.port],
    allowPrivate: ['127.0.0.1'],
    resolve: dns.resolve,
  });
  const decisions: PolicyDecision[][] = [];
  const handled: string[] = [];
  // Outermost: records the decisions each call ended with, as audit would.
  const recordDecisions: ToolMiddleware = async (ctx, next) => {
    try {
      return await next();
    } finally {
      decisions.push([...ctx.decisions]);
    }
  };
  const fetchPage = defineTool({
    name: 'fetch_page',
    description: 'Fetch a page from the carrier API.',
    input: { url: z.string() },
    middleware: [createUrlGuard({ paths: 'url', policy })],
    handler: async ({ url }, ctx) => {
      handled.push(url);
      // The URL the middleware checked, fetched without a second lookup.
      const page = await policy.fetch(ctx.state.checkedUrls?.url ?? url, { signal: ctx.signal });
      return ok({ status: page.status, body: page.body });
    },
  });
  const fetchLinks = defineTool({
    name: 'fetch_links',
    description: 'Check several links.',
    input: { links: z.array(z.object({ href: z.string(), label: z.string().optional() })).max(50) },
    handler: async ({ links }) => {
      handled.push(...links.map((link) => link.href));
      return ok({ count: links.length });
    },
  });
  const echoUrl = defineTool({
    name: 'echo_url',
    description: 'Echo a URL back without fetching it.',
    input: { url: z.string() },
    handler: async ({ url }) => {
      handled.push(url);
      return ok({ url });
    },
  });
  const server = new McpServer({ name: 'url-test', version: '1.0.0' });
  registerTools(server, [fetchPage, fetchLinks, echoUrl], {
    middleware: [
      recordDecisions,
      createUrlGuard({ paths: ['links[].href', 'url'], policy, maxUrls: 3, ...extra }),
    ],
    logger: createSilentLogger(),
  });
  return { server, dns, decisions, handled };
}

async function connect(server: McpServer): Promise<TestClient> {
  client = await connectTestClient(server);
  return client;
}

describe('createUrlGuard through a real client', () => {
  it('lets an allowed URL through; the handler fetches it pinned, with one lookup in all', async () => {
    const { server, dns, decisions, handled } = setup();
    const c = await connect(server);
    const result = await c.callTool('fetch_page', {
      url: `http://api.carrier.test:${carrier.port}/track/42`,
    });
    expect(result.structuredContent).toEqual({ ok: true, status: 200, body: '{"state":"in transit"}' });
    expect(handled).toEqual([`http://api.carrier.test:${carrier.port}/track/42`]);
    // The global guard and the tool's own guard each check once; the handler reuses the tool's.
    expect(dns.calls).toEqual(['api.carrier.test', 'api.carrier.test']);
    expect(decisions[0]).toEqual([
      { by: 'url-allowlist', action: 'allow', detail: { paths: ['url'], hosts: ['api.carrier.test'] } },
      { by: 'url-allowlist', action: 'allow', detail: { paths: ['url'], hosts: ['api.carrier.test'] } },
    ]);
  });

  it('refuses a host off the allowlist before the handler runs: permission_denied with a hint', async () => {
    const { server, decisions, handled, dns } = setup();
    const c = await connect(server);
    const result = await c.callTool('echo_url', { url: 'https://evil.example/steal' });
    expect(result.isError).toBe(true);
    expect(expectFailure(result)).toEqual({
      ok: false,
      error: 'permission_denied',
      message: 'Argument url: The URL scheme "https:" is not allowed.',
      hint: 'Only http URLs can be fetched.',
      retryable: false,
    });
    const offList = await c.callTool('echo_url', { url: `http://evil.example:${carrier.port}/` });
    expect(expectFailure(offList)).toEqual({
      ok: false,
      error: 'permission_denied',
      message: "Argument url: Host evil.example is not on this tool's allowlist.",
      hint: 'Only these hosts can be fetched: api.carrier.test, internal.carrier.test.',
      retryable: false,
    });
    expect(handled).toEqual([]);
    expect(dns.calls).toEqual([]);
    expect(decisions).toEqual([
      [{ by: 'url-allowlist', action: 'deny', reason: 'scheme', detail: { path: 'url' } }],
      [
        {
          by: 'url-allowlist',
          action: 'deny',
          reason: 'host',
          detail: { path: 'url', host: 'evil.example' },
        },
      ],
    ]);
  });

  it('refuses a name resolving to a private address, naming the host and never the address', async () => {
    const { server, decisions, handled } = setup();
    const c = await connect(server);
    const result = await c.callTool('echo_url', {
      url: `http://internal.carrier.test:${carrier.port}/admin`,
    });
    const envelope = expectFailure(result);
    expect(envelope).toEqual({
      ok: false,
      error: 'permission_denied',
      message:
        'Argument url: Host internal.carrier.test is not allowed: it is or resolves to a private, loopback, link-local or reserved address.',
      hint: 'Only public hosts on the allowlist can be fetched. Do not retry with another spelling of the host.',
      retryable: false,
    });
    expect(JSON.stringify(result)).not.toContain('10.0.0.7');
    expect(handled).toEqual([]);
    expect(decisions[0]).toEqual([
      {
        by: 'url-allowlist',
        action: 'deny',
        reason: 'address',
        detail: { path: 'url', host: 'internal.carrier.test' },
      },
    ]);
  });

  it('ends a check whose DNS never answers at the policy timeout, before the handler runs', async () => {
    const policy = createUrlPolicy({
      allow: ['slow.carrier.test'],
      timeoutMs: 100,
      resolve: () => new Promise(() => undefined),
    });
    const handled: string[] = [];
    const decisions: PolicyDecision[][] = [];
    const tool = defineTool({
      name: 'fetch_slow',
      description: 'Fetch from a host whose DNS hangs.',
      input: { url: z.string() },
      middleware: [
        async (ctx, next) => {
          try {
            return await next();
          } finally {
            decisions.push([...ctx.decisions]);
          }
        },
        createUrlGuard({ paths: 'url', policy }),
      ],
      handler: ({ url }) => {
        handled.push(url);
        return ok({});
      },
    });
    const server = new McpServer({ name: 'slow-dns', version: '1.0.0' });
    registerTools(server, [tool], { logger: createSilentLogger() });
    const c = await connect(server);
    const envelope = expectFailure(await c.callTool('fetch_slow', { url: 'https://slow.carrier.test/' }));
    expect(envelope).toEqual({
      ok: false,
      error: 'timeout',
      message: 'Argument url: Resolving slow.carrier.test took longer than 100 ms.',
      hint: 'The host name did not resolve in time; try again later, and if it keeps failing, tell the user.',
      retryable: true,
    });
    expect(handled).toEqual([]);
    expect(decisions[0]).toEqual([
      {
        by: 'url-allowlist',
        action: 'deny',
        reason: 'timeout',
        detail: { path: 'url', host: 'slow.carrier.test' },
      },
    ]);
  });

  it('refuses userinfo as invalid_argument naming the field', async () => {
    const { server, handled } = setup();
    const c = await connect(server);
    const result = await c.callTool('echo_url', {
      url: `http://api.carrier.test:${carrier.port}@evil.example/`,
    });
    expect(expectFailure(result)).toEqual({
      ok: false,
      error: 'invalid_argument',
      message: 'Argument url: URLs with a user name or password (user@host) are not accepted.',
      hint: 'Remove the part before "@" and give the host directly; credentials are never sent in URLs.',
      retryable: false,
      fields: [{ path: 'url', expected: 'an absolute http(s) URL without user name or password' }],
    });
    expect(handled).toEqual([]);
  });

  it('refuses a soft hyphen in the host and a backslash in the authority before the handler runs', async () => {
    const { server, handled, dns } = setup();
    const c = await connect(server);
    const hidden = expectFailure(
      await c.callTool('echo_url', { url: `http://api.carrier\u00ad.test:${carrier.port}/track/42` }),
    );
    expect([hidden.error, hidden.message]).toEqual([
      'invalid_argument',
      'Argument url: The host name contains an invisible character.',
    ]);
    const slashed = expectFailure(
      await c.callTool('echo_url', { url: `http://evil.example\\@api.carrier.test:${carrier.port}/` }),
    );
    expect([slashed.error, slashed.message]).toEqual([
      'invalid_argument',
      'Argument url: The URL contains a backslash before its path.',
    ]);
    expect(handled).toEqual([]);
    expect(dns.calls).toEqual([]);
  });

  it('checks every element of a nested array path and names the one refused', async () => {
    const { server, handled, decisions } = setup();
    const c = await connect(server);
    const good = `http://api.carrier.test:${carrier.port}/a`;
    const result = await c.callTool('fetch_links', {
      links: [{ href: good }, { href: 'http://[::ffff:169.254.169.254]/', label: 'x' }],
    });
    expect(expectFailure(result)).toMatchObject({
      error: 'permission_denied',
      message:
        'Argument links[1].href: Host ::ffff:a9fe:a9fe is a cloud metadata service and cannot be fetched.',
    });
    expect(handled).toEqual([]);
    expect(decisions[0]).toEqual([
      {
        by: 'url-allowlist',
        action: 'deny',
        reason: 'metadata',
        detail: { path: 'links[1].href', host: '::ffff:a9fe:a9fe' },
      },
    ]);
    const allowed = await c.callTool('fetch_links', { links: [{ href: good }, { href: good }] });
    expect(allowed.structuredContent).toEqual({ ok: true, count: 2 });
    expect(decisions[1]).toEqual([
      {
        by: 'url-allowlist',
        action: 'allow',
        detail: {
          paths: ['links[0].href', 'links[1].href'],
          hosts: ['api.carrier.test', 'api.carrier.test'],
        },
      },
    ]);
  });

  it('refuses more URLs than maxUrls before resolving any', async () => {
    const { server, dns, handled } = setup();
    const c = await connect(server);
    const href = `http://api.carrier.test:${carrier.port}/`;
    const result = await c.callTool('fetch_links', { links: [{ href }, { href }, { href }, { href }] });
    expect(expectFailure(result)).toMatchObject({
      error: 'invalid_argument',
      message: 'At most 3 URLs per call.',
      hint: 'Split the request into calls of at most 3 URLs.',
    });
    expect(dns.calls).toEqual([]);
    expect(handled).toEqual([]);
  });

  it('a per-tool maxUrls overrides the global one; the global paths and policy still apply', async () => {
    const { server, dns, handled } = setup({ tools: { fetch_links: { maxUrls: 1 } } });
    const c = await connect(server);
    const href = `http://api.carrier.test:${carrier.port}/`;
    const result = await c.callTool('fetch_links', { links: [{ href }, { href }] });
    expect(expectFailure(result)).toEqual({
      ok: false,
      error: 'invalid_argument',
      message: 'At most 1 URLs per call.',
      hint: 'Split the request into calls of at most 1 URLs.',
      retryable: false,
    });
    expect(dns.calls).toEqual([]);
    expect((await c.callTool('fetch_links', { links: [{ href }] })).structuredContent).toEqual({
      ok: true,
      count: 1,
    });
    expect(handled).toEqual([href]);
  });

  it('a tool opted out with tools: { name: false } is not checked', async () => {
    const { server, handled, decisions } = setup({ tools: { echo_url: false } });
    const c = await connect(server);
    const result = await c.callTool('echo_url', { url: 'http://169.254.169.254/' });
    expect(result.structuredContent).toEqual({ ok: true, url: 'http://169.254.169.254/' });
    expect(handled).toEqual(['http://169.254.169.254/']);
    expect(decisions[0]).toEqual([]);
  });

  it('leaves arguments the schema refused to core: invalid_argument, no url decision', async () => {
    const { server, decisions } = setup();
    const c = await connect(server);
    const result = await c.callTool('echo_url', { url: 42 });
    expect(expectFailure(result).error).toBe('invalid_argument');
    expect(decisions[0]).toEqual([]);
  });

  it("a redirect refused inside the handler's fetch reaches the model as permission_denied", async () => {
    const { server, handled } = setup();
    const c = await connect(server);
    const result = await c.callTool('fetch_page', {
      url: `http://api.carrier.test:${carrier.port}/to-metadata`,
    });
    expect(expectFailure(result)).toEqual({
      ok: false,
      error: 'permission_denied',
      message:
        'api.carrier.test redirected to a URL that is refused: Host 169.254.169.254 is a cloud metadata service and cannot be fetched.',
      hint: 'The redirect target is not allowed. Do not retry; tell the user the page cannot be fetched here.',
      retryable: false,
      // The refusal's cause (the resolved hop) goes to the server log under this id.
      incidentId: expect.stringMatching(/^inc_/),
    });
    expect(handled).toHaveLength(1);
  });

  it('refuses a non-string at a URL path, and leaves a missing optional one to the schema', async () => {
    const policy = createUrlPolicy({ allow: ['api.carrier.test'], resolve: stubResolver({}).resolve });
    const handled: unknown[] = [];
    const tool = defineTool({
      name: 'loose',
      description: 'Takes anything at target.url.',
      input: { target: z.object({ url: z.unknown() }).optional() },
      middleware: [createUrlGuard({ paths: 'target.url', policy })],
      handler: (args) => {
        handled.push(args);
        return ok({});
      },
    });
    const server = new McpServer({ name: 'loose', version: '1.0.0' });
    registerTools(server, [tool], { logger: createSilentLogger() });
    const c = await connect(server);
    expect(expectFailure(await c.callTool('loose', { target: { url: ['http://10.0.0.1/'] } }))).toEqual({
      ok: false,
      error: 'invalid_argument',
      message: 'Argument target.url must be a URL string.',
      hint: 'Fix the argument named in the message and call the tool again.',
      retryable: false,
      fields: [{ path: 'target.url', expected: 'an absolute URL string' }],
    });
    expect((await c.callTool('loose', {})).structuredContent).toEqual({ ok: true });
    expect(handled).toEqual([{}]);
  });

  it('refuses malformed paths, policies and per-tool options at creation, naming where', () => {
    const policy = createUrlPolicy({ allow: ['a.example'] });
    expect(() => createUrlGuard({ paths: 'links[0].href', policy })).toThrow(
      'createUrlGuard: "links[0].href" is not a path like url, target.url or links[].href',
    );
    expect(() => createUrlGuard({ paths: [], policy })).toThrow(
      'createUrlGuard: give at least one argument path',
    );
    expect(() => createUrlGuard({ paths: 'url', policy: {} as never })).toThrow(
      'createUrlGuard: give a policy from createUrlPolicy()',
    );
    expect(() => createUrlGuard({ paths: 'url', policy, maxUrls: 0 })).toThrow(
      'createUrlGuard: maxUrls must be an integer >= 1',
    );
    expect(() => createUrlGuard({ paths: 'url', policy, tools: { fetch_page: { paths: 'a..b' } } })).toThrow(
      'createUrlGuard: tools.fetch_page: "a..b" is not a path like url, target.url or links[].href',
    );
    expect(() => createUrlGuard({ paths: 'url', policy, tools: { fetch_page: { maxUrls: 1.5 } } })).toThrow(
      'createUrlGuard: tools.fetch_page: maxUrls must be an integer >= 1',
    );
    expect(() =>
      createUrlGuard({ paths: 'url', policy, tools: { fetch_page: { path: 'url' } as never } }),
    ).toThrow(
      'createUrlGuard: tools.fetch_page has unknown option(s) path; a tool may set paths, policy, maxUrls',
    );
    expect(() => createUrlGuard({ paths: 'url', policy, tools: { fetch_page: null as never } })).toThrow(
      'createUrlGuard: tools.fetch_page must be an object of options or false',
    );
  });

  it('a wildcard over a public suffix throws while the server is built; the exact host it suggests serves', async () => {
    const dns = stubResolver({
      'toolgate.github.io': ['185.199.108.153'],
      'attacker.github.io': ['185.199.109.153'],
    });
    const handled: string[] = [];
    const build = (allow: string[]): McpServer => {
      const policy = createUrlPolicy({ allow, resolve: dns.resolve });
      const readDocs = defineTool({
        name: 'read_docs',
        description: 'Read a page of the project documentation.',
        input: { url: z.string() },
        middleware: [createUrlGuard({ paths: 'url', policy })],
        handler: async ({ url }) => {
          handled.push(url);
          return ok({ url });
        },
      });
      const server = new McpServer({ name: 'docs', version: '1.0.0' });
      registerTools(server, [readDocs], { logger: createSilentLogger() });
      return server;
    };
    // Anyone can publish attacker.github.io: the entry is refused before any server exists.
    expect(() => build(['*.github.io'])).toThrow(
      'allow: "*.github.io" is too broad: github.io is a public suffix (in the private section of the Public Suffix List',
    );
    const c = await connect(build(['toolgate.github.io']));
    const allowed = await c.callTool('read_docs', { url: 'https://toolgate.github.io/guide' });
    expect(allowed.structuredContent).toEqual({ ok: true, url: 'https://toolgate.github.io/guide' });
    const refused = expectFailure(await c.callTool('read_docs', { url: 'https://attacker.github.io/' }));
    expect([refused.error, refused.message]).toEqual([
      'permission_denied',
      "Argument url: Host attacker.github.io is not on this tool's allowlist.",
    ]);
    expect(handled).toEqual(['https://toolgate.github.io/guide']);
    expect(dns.calls).toEqual(['toolgate.github.io']);
  });

  it('urlArgument, the deprecated form, builds the same guard', async () => {
    const policy = createUrlPolicy({ allow: ['api.carrier.test'], resolve: stubResolver({}).resolve });
    expect(() => urlArgument([], policy)).toThrow('createUrlGuard: give at least one argument path');
    const tool = defineTool({
      name: 'old_style',
      description: 'Guarded the old way.',
      input: { url: z.string() },
      middleware: [urlArgument('url', policy, { maxUrls: 1 })],
      handler: () => ok({}),
    });
    const server = new McpServer({ name: 'old', version: '1.0.0' });
    registerTools(server, [tool], { logger: createSilentLogger() });
    const c = await connect(server);
    expect(expectFailure(await c.callTool('old_style', { url: 'http://elsewhere.test/' })).error).toBe(
      'permission_denied',
    );
  });
});
