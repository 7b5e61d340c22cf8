// Red-team tests: a hostile token holder and a hostile client try to use or discover tools their token
// does not allow. Every attack here must fail; each test asserts what the attacker gets instead.
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import {
  defineTool,
  ok,
  type PolicyDecision,
  type ToolDefinition,
  type ToolMiddleware,
} from '@toolgate/core';
import { expectFailure, serveTools } from '@toolgate/core/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import * as z from 'zod';
import { AUTHZ_META_KEY, type AuthzOptions, createAuthz, createJwtVerifier } from '../src/index.js';
import { ISSUER, type Issuer, RESOURCE, startIssuer } from './fixtures.js';

function countingTool(name: string) {
  const runs = { count: 0 };
  const tool = defineTool({
    name,
    description: `The ${name} tool.`,
    input: { orderId: z.number().int() },
    handler: async ({ orderId }) => {
      runs.count += 1;
      return ok({ tool: name, orderId });
    },
  }) as ToolDefinition;
  return { tool, runs };
}

const refund = countingTool('refund');
const read = countingTool('get_order_status');
const TOOLS = [refund.tool, read.tool];

const OPTIONS: AuthzOptions = {
  require: { scopes: ['orders:read'] },
  tools: { refund: { require: { scopes: ['orders:write', 'payments'] } } },
};

const token = (scopes: unknown, extra: Record<string, unknown> = {}): AuthInfo => ({
  token: 't',
  clientId: 'desk',
  scopes: scopes as string[],
  expiresAt: Math.floor(Date.now() / 1000) + 300,
  extra: { sub: 'mallory', iss: 'https://auth.example.test', ...extra },
});

const open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
  refund.runs.count = 0;
  read.runs.count = 0;
});

async function serve(options: AuthzOptions, authInfo?: AuthInfo, tools: ToolDefinition[] = TOOLS) {
  const decisions: PolicyDecision[][] = [];
  const recorder: ToolMiddleware = async (ctx, next) => {
    try {
      return await next();
    } finally {
      decisions.push([...ctx.decisions]);
    }
  };
  const client = await serveTools(tools, {
    middleware: [recorder, createAuthz(options)],
    ...(authInfo ? { authInfo } : {}),
  });
  open.push(client);
  return Object.assign(client, { decisions });
}

const listed = async (client: Awaited<ReturnType<typeof serve>>) =>
  (await client.client.listTools()).tools.map((t) => t.name);

/** The attacker's view of a refused hidden call: the JSON-RPC error text, exactly as for an unknown tool. */
const callError = async (client: Awaited<ReturnType<typeof serve>>, name: string, args: object = {}) =>
  String(
    await client.callTool(name, args as Record<string, unknown>).then(
      (result) => `no error: ${JSON.stringify(result)}`,
      (error: unknown) => error,
    ),
  );

/** Asserts refund is neither listed nor callable for this token, and never ran. */
async function expectRefundHidden(authInfo: AuthInfo): Promise<void> {
  const client = await serve(OPTIONS, authInfo);
  expect(await listed(client)).not.toContain('refund');
  expect(await callError(client, 'refund', { orderId: 1 })).toBe(
    'McpError: MCP error -32602: Unknown tool: refund',
  );
  expect(refund.runs.count).toBe(0);
}

describe('scope parsing tricks', () => {
  it('one string holding several space-separated scopes grants none of them', async () => {
    await expectRefundHidden(token(['orders:read orders:write payments']));
    await expectRefundHidden(token(['orders:write payments']));
    await expectRefundHidden(token(['orders:write,payments', 'orders:read']));
  });

  it('case, whitespace, invisible and look-alike variants of a scope never match it', async () => {
    for (const variant of [
      'ORDERS:WRITE',
      'Orders:Write',
      ' orders:write',
      'orders:write ',
      'orders:write\n',
      'orders:write\t',
      'orders\u200b:write',
      'orders:write\u0000',
      '\uff4frders:write', // fullwidth o
      'orders\uff1awrite', // fullwidth colon
      'orders:wr\u0131te', // dotless i
      'orders:write'.normalize('NFKD').replace('r', 'r\u0301'),
    ]) {
      await expectRefundHidden(token(['orders:read', 'payments', variant]));
    }
  });

  it('wildcard-looking scopes are plain strings: "*", "orders:*", "orders", "" grant nothing', async () => {
    await expectRefundHidden(token(['*', 'orders:*', 'orders', '', '*:*', 'orders:write*', 'payments*']));
    // A requirement never reads a held scope as a pattern either.
    const client = await serve(OPTIONS, token(['orders:*']));
    expect(await listed(client)).toEqual([]);
  });

  it('non-strings in a scopes array never count, however they stringify', async () => {
    const tricky = [
      { toString: () => 'orders:write' },
      ['orders:write'],
      ['payments'],
      { 'orders:write': true },
      Object.assign(Object.create(String.prototype), { valueOf: () => 'payments' }),
      null,
      1,
      true,
      'orders:read',
    ];
    await expectRefundHidden(token(tricky));
  });

  it('scopes that are not an array (array-like, Set, string, object, null) grant nothing', async () => {
    for (const scopes of [
      { 0: 'orders:write', 1: 'payments', length: 2, includes: () => true },
      new Set(['orders:write', 'payments', 'orders:read']),
      'orders:write payments orders:read',
      { 'orders:write': true, payments: true },
      null,
      undefined,
    ]) {
      const client = await serve(OPTIONS, token(scopes));
      expect(await listed(client)).toEqual([]);
      expect(await callError(client, 'get_order_status', { orderId: 1 })).toBe(
        'McpError: MCP error -32602: Unknown tool: get_order_status',
      );
    }
    expect(read.runs.count).toBe(0);
  });

  it('a claim named like a scope, or a scope/scp/scopes claim, is not a scope', async () => {
    await expectRefundHidden(
      token([], {
        'orders:write': true,
        payments: true,
        'orders:read': true,
        scope: 'orders:read orders:write payments',
        scp: ['orders:read', 'orders:write', 'payments'],
        scopes: ['orders:read', 'orders:write', 'payments'],
      }),
    );
  });

  // No speed is asserted (speed lives in the benches): a check that compared every scope with every
  // other would take tens of seconds on 50,000 of them, and the test's timeout stops that as a failure.
  it('a huge scope list without the right one is still refused', { timeout: 5_000 }, async () => {
    const many = Array.from({ length: 50_000 }, (_, i) => `orders:write${i}`);
    await expectRefundHidden(token([...many, 'orders:read', 'payments']));
  });
});

describe('claims: prototype keys and hostile values', () => {
  const tenantOnly: AuthzOptions = {
    require: {},
    tools: { refund: { require: { claims: { tenant: (v) => v === 'acme' } } } },
  };

  it('a claim inherited through __proto__ (parsed JSON) or a prototype is not the token’s claim', async () => {
    // As a JSON parser hands it over: an own key named __proto__, not a prototype.
    const parsed = JSON.parse(
      '{"sub":"mallory","iss":"https://auth.example.test","__proto__":{"tenant":"acme"}}',
    );
    const viaJson = await serve(tenantOnly, { ...token([]), extra: parsed });
    expect(await listed(viaJson)).toEqual(['get_order_status']);
    // A verifier that builds claims by assignment could leave one on the prototype: still not a claim.
    const inherited = Object.assign(Object.create({ tenant: 'acme' }), { sub: 'mallory' });
    const viaPrototype = await serve(tenantOnly, { ...token([]), extra: inherited });
    expect(await listed(viaPrototype)).toEqual(['get_order_status']);
    expect(await callError(viaPrototype, 'refund', { orderId: 1 })).toContain('Unknown tool: refund');
    expect(refund.runs.count).toBe(0);
  });

  it('a predicate sees the value the token holds: arrays, case and padding variants do not pass', async () => {
    for (const tenant of [['acme'], 'ACME', 'acme ', 'acme\u0000', { toString: () => 'acme' }, null]) {
      const client = await serve(tenantOnly, token([], { tenant }));
      expect(await listed(client)).toEqual(['get_order_status']);
    }
    const legit = await serve(tenantOnly, token([], { tenant: 'acme' }));
    expect(await legit.callToolJson('refund', { orderId: 3 })).toEqual({
      ok: true,
      tool: 'refund',
      orderId: 3,
    });
  });

  it('very long and unicode subjects and claims neither crash nor widen access', async () => {
    const long = '\u{1F600}'.repeat(20_000);
    const client = await serve(OPTIONS, token(['orders:read'], { sub: long, tenant: long, [long]: long }));
    expect(await listed(client)).toEqual(['get_order_status']);
    expect(await client.callToolJson('get_order_status', { orderId: 2 })).toEqual({
      ok: true,
      tool: 'get_order_status',
      orderId: 2,
    });
    expect(await callError(client, 'refund', { orderId: 2 })).toContain('Unknown tool: refund');
  });
});

describe('tool names a client chooses', () => {
  it('names of Object members and odd names are unknown tools: same error, nothing recorded as hidden', async () => {
    const client = await serve(OPTIONS, token(['orders:read']));
    const names = [
      '__proto__',
      'constructor',
      'toString',
      'hasOwnProperty',
      'valueOf',
      'Refund',
      'refund ',
      '',
    ];
    for (const name of names) {
      expect(await callError(client, name)).toBe(`McpError: MCP error -32602: Unknown tool: ${name}`);
    }
    // The chain saw each call (audit would record it) but authz hid nothing: it knows no such tool.
    expect(client.decisions).toEqual(names.map(() => []));
  });

  it('inherited per-tool entries (a polluted prototype) neither opt a tool out nor loosen it', async () => {
    // The SDK keeps tools in a plain object, so tools named like Object members cannot be registered;
    // what authz must survive is options objects whose prototype carries entries (a polluted prototype).
    const tools = Object.assign(Object.create({ refund: false, get_order_status: { require: {} } }), {});
    const client = await serve({ ...OPTIONS, tools }, token(['support']));
    expect(await listed(client)).toEqual([]);
    expect(await callError(client, 'refund', { orderId: 1 })).toContain('Unknown tool: refund');
    expect(refund.runs.count + read.runs.count).toBe(0);
  });
});

/** What a call with an expired token is answered, in either mode: the expiry, nothing else. */
const EXPIRED_ANSWER = (tool: string) => ({
  ok: false,
  error: 'permission_denied',
  message: `The access token has expired; calling ${tool} needs a fresh one.`,
  hint: 'Do not retry with this token. The client must obtain a fresh one (refresh it, or have the user sign in again); the call can succeed then.',
  retryable: false,
});

describe('expired tokens', () => {
  const now = () => Math.floor(Date.now() / 1000);
  /** A token holding every scope, as a verifier that does not check expiry (or caches answers) hands it on. */
  const writer = (expiresAt: unknown): AuthInfo => ({
    ...token(['orders:read', 'orders:write', 'payments']),
    expiresAt: expiresAt as number,
  });

  it('a token whose expiresAt has passed opens no tool, not even one that requires nothing, and is told it expired', async () => {
    const options: AuthzOptions = {
      ...OPTIONS,
      tools: { ...OPTIONS.tools, get_order_status: { require: {} } },
    };
    for (const expiresAt of [now() - 3600, now() - 60, Number.NaN, String(now() + 3600)]) {
      const client = await serve(options, writer(expiresAt));
      // Listed as for a fresh token of the same rights: a call is answered as expired, not as unknown.
      expect(await listed(client)).toEqual(['refund', 'get_order_status']);
      for (const tool of ['refund', 'get_order_status']) {
        const result = await client.callTool(tool, { orderId: 1 });
        expect(expectFailure(result)).toEqual(EXPIRED_ANSWER(tool));
        expect(result._meta?.[AUTHZ_META_KEY]).toBeUndefined();
      }
      expect(client.decisions).toEqual([
        [{ by: 'authz', action: 'deny', reason: 'token expired' }],
        [{ by: 'authz', action: 'deny', reason: 'token expired' }],
      ]);
    }
    expect(refund.runs.count + read.runs.count).toBe(0);

    // Refuse mode: the same answer, naming no scope (none would help).
    const refusing = await serve({ ...OPTIONS, mode: 'refuse' }, writer(now() - 3600));
    const result = await refusing.callTool('refund', { orderId: 1 });
    expect(expectFailure(result)).toEqual(EXPIRED_ANSWER('refund'));
    expect(result._meta?.[AUTHZ_META_KEY]).toBeUndefined();
    expect(refusing.decisions).toEqual([[{ by: 'authz', action: 'deny', reason: 'token expired' }]]);
    expect(refund.runs.count).toBe(0);

    // The same token before it expires, and one without expiresAt (a static token), keep their rights.
    for (const expiresAt of [now() + 300, undefined]) {
      const client = await serve(OPTIONS, writer(expiresAt));
      expect(await listed(client)).toEqual(['refund', 'get_order_status']);
      expect(await client.callToolJson('refund', { orderId: 2 })).toEqual({
        ok: true,
        tool: 'refund',
        orderId: 2,
      });
    }
  });

  it('an expired token still sees only what its rights allow: a tool they do not is hidden as unknown', async () => {
    const client = await serve(OPTIONS, { ...token(['orders:read']), expiresAt: now() - 3600 });
    expect(await listed(client)).toEqual(['get_order_status']);
    expect(await callError(client, 'refund', { orderId: 1 })).toBe(
      'McpError: MCP error -32602: Unknown tool: refund',
    );
    expect(await callError(client, 'refunds', { orderId: 1 })).toBe(
      'McpError: MCP error -32602: Unknown tool: refunds',
    );
    expect(expectFailure(await client.callTool('get_order_status', { orderId: 1 }))).toEqual(
      EXPIRED_ANSWER('get_order_status'),
    );
    expect(client.decisions[0]).toEqual([
      { by: 'authz', action: 'hide', reason: 'missing scope(s): orders:write payments' },
    ]);
    expect(refund.runs.count + read.runs.count).toBe(0);
  });

  it('allows the verifier’s default 5 s of clock skew past expiresAt, and not a second more', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(new Date('2026-12-01T12:00:00Z'));
      const nowSec = Date.parse('2026-12-01T12:00:00Z') / 1000;
      const withinSkew = await serve(OPTIONS, writer(nowSec - 5));
      expect(await withinSkew.callToolJson('refund', { orderId: 3 })).toMatchObject({ ok: true });
      const pastSkew = await serve(OPTIONS, writer(nowSec - 6));
      expect(expectFailure(await pastSkew.callTool('refund', { orderId: 3 }))).toEqual(
        EXPIRED_ANSWER('refund'),
      );
    } finally {
      vi.useRealTimers();
    }
  });

  it('clockToleranceSec sets the skew for tokens from another verifier (0 to 300 s)', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(new Date('2026-12-01T12:00:00Z'));
      const nowSec = Date.parse('2026-12-01T12:00:00Z') / 1000;
      const lenient = await serve({ ...OPTIONS, clockToleranceSec: 60 }, writer(nowSec - 30));
      expect(await lenient.callToolJson('refund', { orderId: 4 })).toMatchObject({ ok: true });
      const strict = await serve({ ...OPTIONS, clockToleranceSec: 0 }, writer(nowSec - 1));
      expect(expectFailure(await strict.callTool('refund', { orderId: 4 }))).toEqual(
        EXPIRED_ANSWER('refund'),
      );
    } finally {
      vi.useRealTimers();
    }
    for (const clockToleranceSec of [-1, 301, Number.NaN, '5' as unknown as number]) {
      expect(() => createAuthz({ ...OPTIONS, clockToleranceSec })).toThrow(/clockToleranceSec/);
    }
  });
});

describe('one clock tolerance: createJwtVerifier and createAuthz', () => {
  let issuer: Issuer;
  beforeAll(async () => {
    issuer = await startIssuer();
  });
  afterAll(() => issuer.close());
  const now = () => Math.floor(Date.now() / 1000);
  const verifier = (clockToleranceSec?: number) =>
    createJwtVerifier({ jwksUrl: issuer.jwksUrl, issuer: ISSUER, resource: RESOURCE, clockToleranceSec });

  it('a token the verifier accepts within its 60 s tolerance is served by authz (default options), not hidden', async () => {
    const auth = await verifier(60).verify(
      await issuer.sign({ sub: 'alice', scope: 'orders:read orders:write payments' }, { exp: now() - 30 }),
    );
    const client = await serve(OPTIONS, auth);
    expect(await listed(client)).toEqual(['refund', 'get_order_status']);
    expect(await client.callToolJson('refund', { orderId: 5 })).toEqual({
      ok: true,
      tool: 'refund',
      orderId: 5,
    });
    // The tolerance travels beside the claims, not among them.
    expect(Object.keys(auth)).not.toContain('clockToleranceSec');
    expect(JSON.stringify(auth)).not.toContain('clockTolerance');
  });

  it('once past the verifier’s tolerance too, a call is answered as expired', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const auth = await verifier(60).verify(
        await issuer.sign({ sub: 'alice', scope: 'orders:read' }, { exp: now() - 30 }),
      );
      vi.setSystemTime(Date.now() + 40_000);
      const client = await serve(OPTIONS, auth);
      expect(await listed(client)).toEqual(['get_order_status']);
      expect(expectFailure(await client.callTool('get_order_status', { orderId: 6 }))).toEqual(
        EXPIRED_ANSWER('get_order_status'),
      );
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('per-tool rules against the default', () => {
  it('an override that only sets mode (or an empty one) keeps the default requirement', async () => {
    const options: AuthzOptions = {
      require: { scopes: ['orders:admin'] },
      tools: { refund: { mode: 'refuse' }, get_order_status: {} },
    };
    const client = await serve(options, token(['orders:read', 'orders:write', 'payments']));
    expect(await listed(client)).toEqual(['refund']);
    const result = await client.callTool('refund', { orderId: 1 });
    expect(expectFailure(result).error).toBe('permission_denied');
    expect(result._meta?.[AUTHZ_META_KEY]).toEqual({ missingScopes: ['orders:admin'] });
    expect(await callError(client, 'get_order_status', { orderId: 1 })).toContain('Unknown tool');
    expect(refund.runs.count + read.runs.count).toBe(0);
  });

  it('refuse mode answers before arguments are looked at: no schema probing, nothing runs', async () => {
    const refuse: AuthzOptions = { ...OPTIONS, mode: 'refuse' };
    const client = await serve(refuse, token(['orders:read']));
    const answers = [];
    for (const args of [{ orderId: 1 }, { orderId: 'x' }, { nope: true }, {}]) {
      const result = await client.callTool('refund', args);
      answers.push(JSON.stringify({ content: result.content, meta: result._meta, isError: result.isError }));
    }
    expect(new Set(answers).size).toBe(1);
    expect(answers[0]).toContain('permission_denied');
    expect(answers[0]).not.toMatch(/orderId|number|invalid/);
    expect(refund.runs.count).toBe(0);
  });

  it('the refusal names only what this tool lacks: not the caller’s scopes, claims or other tools', async () => {
    const refuse: AuthzOptions = {
      require: { scopes: ['orders:read'] },
      mode: 'refuse',
      tools: { refund: { require: { scopes: ['orders:write'], claims: { tenant: (v) => v === 'acme' } } } },
    };
    const client = await serve(
      refuse,
      token(['orders:read', 'secret-scope'], { tenant: 'globex', pii: 'x@y' }),
    );
    const result = await client.callTool('refund', { orderId: 1 });
    const text = JSON.stringify(result);
    expect(text).toContain('orders:write');
    for (const leak of [
      'secret-scope',
      'globex',
      'tenant',
      'x@y',
      'mallory',
      'orders:read',
      'get_order_status',
    ])
      expect(text).not.toContain(leak);
  });

  it('one instance serving two callers at once decides per call (no verdict leaks across callers)', async () => {
    const authz = createAuthz(OPTIONS);
    const writer = await serveTools(TOOLS, {
      middleware: [authz],
      authInfo: token(['orders:read', 'orders:write', 'payments'], { sub: 'alice' }),
    });
    const attacker = await serveTools(TOOLS, { middleware: [authz], authInfo: token(['orders:read']) });
    open.push(writer, attacker);
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        (i % 2 === 0 ? writer : attacker).callTool('refund', { orderId: i }),
      ),
    );
    results.forEach((result, i) => {
      expect(result.status).toBe(i % 2 === 0 ? 'fulfilled' : 'rejected');
    });
    expect(refund.runs.count).toBe(10);
  });
});

describe('hostile claims through the JWT verifier', () => {
  let issuer: Issuer;
  beforeAll(async () => {
    issuer = await startIssuer();
  });
  afterAll(() => issuer.close());

  const verifier = () => createJwtVerifier({ jwksUrl: issuer.jwksUrl, issuer: ISSUER, resource: RESOURCE });

  it('scope tricks in the token map to no extra scope', async () => {
    const cases: Array<[Record<string, unknown>, string[]]> = [
      [{ scope: 'orders:read\torders:write\npayments' }, ['orders:read\torders:write\npayments']],
      [{ scope: ['orders:write', 'payments'] }, []], // `scope` must be a string; an array is not read as one
      [{ scp: ['orders:write', 5, null, ['payments'], { s: 'payments' }] }, ['orders:write']],
      [{ scope: 'orders:read', scp: ['orders:write', 'payments'] }, ['orders:read']],
      [{ 'orders:write': true, payments: 'payments' }, []],
    ];
    for (const [claims, scopes] of cases) {
      const auth = await verifier().verify(await issuer.sign({ sub: 'mallory', ...claims }));
      expect(auth.scopes).toEqual(scopes);
      const client = await serve(OPTIONS, auth);
      expect(await listed(client)).not.toContain('refund');
    }
  });

  it('a __proto__ claim carrying sub and tenant is neither the identity nor a claim', async () => {
    const payload = JSON.parse(
      '{"client_id":"desk","scope":"orders:read","__proto__":{"sub":"alice","tenant":"acme","scope":"orders:write payments"}}',
    );
    const auth = await verifier().verify(await issuer.sign(payload));
    expect(auth.scopes).toEqual(['orders:read']);
    const whoami = defineTool({
      name: 'whoami',
      description: 'Who the server thinks is calling.',
      input: {},
      handler: async (_args, ctx) => ok({ caller: ctx.caller.id, kind: ctx.caller.kind }),
    }) as ToolDefinition;
    const client = await serve(
      { require: {}, tools: { refund: { require: { claims: { tenant: (v) => v === 'acme' } } } } },
      auth,
      [whoami, refund.tool],
    );
    const me = (await client.callToolJson('whoami', {})) as { caller: string; kind: string };
    expect(me.kind).toBe('client');
    expect(me.caller).not.toContain('alice');
    expect(await listed(client)).toEqual(['whoami']);
    expect(refund.runs.count).toBe(0);
  });
});
