import { randomUUID } from 'node:crypto';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { defineTool, ok, type ToolDefinition, type ToolMiddleware, type ToolRequest } from '@toolgate/core';
import { createTestContext, reportMissingService, serveTools, type TestClient } from '@toolgate/core/testing';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRedisRepeatStore, createRepeatGuard, type RepeatStore } from '../src/index.js';

// Red team: one caller must never see, replay or poison another caller's cached answer, whatever the
// token claims look like (separators, types, unicode, prototype keys, length), with one guard per
// process (memory) or a fleet on one Redis. Each attack: caller A calls, caller B sends the identical
// call; B must get its own answer (the handler ran for B), and A's own repeat is still answered from
// the cache (so the guard was on and the attack had its chance).

const open: TestClient[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((client) => client.close()));
});

function tokenOf(clientId: string, extra: Record<string, unknown>, scopes: string[] = []): AuthInfo {
  return { token: `t-${randomUUID()}`, clientId, scopes, extra };
}

/** A read whose answer is the caller's own data: what a cross-caller leak would show. */
function ownDataTool(runs: { count: number }): ToolDefinition {
  return defineTool({
    name: 'my_account',
    description: 'The calling account’s private data.',
    input: { section: z.string() },
    handler: async ({ section }, ctx) => {
      runs.count += 1;
      const auth = ctx.request.authInfo;
      return ok({
        section,
        owner: JSON.stringify([auth?.clientId ?? null, auth?.scopes ?? null, auth?.extra ?? null]),
      });
    },
  }) as ToolDefinition;
}

const ownerOf = (auth: AuthInfo | undefined) =>
  JSON.stringify([auth?.clientId ?? null, auth?.scopes ?? null, auth?.extra ?? null]);

/** Two "replicas" (guards) on one store when `store` is given; one shared guard otherwise. */
async function attackPair(a: AuthInfo | undefined, b: AuthInfo | undefined, store?: () => RepeatStore) {
  const runs = { count: 0 };
  const tools = [ownDataTool(runs)];
  const shared = store === undefined ? createRepeatGuard() : undefined;
  const connect = async (authInfo: AuthInfo | undefined) => {
    const guard: ToolMiddleware = shared ?? createRepeatGuard({ store: store!() });
    const client = await serveTools(tools, {
      middleware: [guard],
      ...(authInfo === undefined ? {} : { authInfo }),
    });
    open.push(client);
    return client;
  };
  const [ca, cb] = [await connect(a), await connect(b)];
  const args = { section: 'billing' };
  const first = await ca.callTool('my_account', args);
  const second = await cb.callTool('my_account', args);
  const again = await ca.callTool('my_account', args);
  return { runs, first, second, again };
}

function expectApart(
  outcome: Awaited<ReturnType<typeof attackPair>>,
  a: AuthInfo | undefined,
  b: AuthInfo | undefined,
) {
  expect(outcome.first.structuredContent).toEqual({ ok: true, section: 'billing', owner: ownerOf(a) });
  // B's answer is B's: never A's cached result.
  expect(outcome.second.structuredContent).toEqual({ ok: true, section: 'billing', owner: ownerOf(b) });
  expect(outcome.second.structuredContent).not.toHaveProperty('note');
  // A's repeat is answered from the cache: the guard was on during the attack.
  expect(outcome.again.structuredContent).toMatchObject({
    owner: ownerOf(a),
    note: expect.stringMatching(/^Repeated call/),
  });
  expect(outcome.runs.count).toBe(2);
}

const ISS = 'https://idp.example';
const proto = JSON.parse('{"__proto__":{"tenant":"acme"},"org":"o"}') as Record<string, unknown>;

/** Pairs of tokens an attacker can hold whose claims try to collide with a victim's. */
const PAIRS: [string, AuthInfo | undefined, AuthInfo | undefined][] = [
  [
    'two issuers, one subject',
    tokenOf('desk', { iss: 'https://idp-a.example', sub: 'alice' }),
    tokenOf('desk', { iss: 'https://idp-b.example', sub: 'alice' }),
  ],
  [
    'a | moved between issuer and subject',
    tokenOf('desk', { iss: 'https://a.example|x', sub: 'y' }),
    tokenOf('desk', { iss: 'https://a.example', sub: 'x|y' }),
  ],
  [
    'an issuer spelling the escape of | (%7C) against a real |',
    tokenOf('desk', { iss: 'https://a%7Cb', sub: 'c' }),
    tokenOf('desk', { iss: 'https://a|b', sub: 'c' }),
  ],
  [
    'a subject without issuer against the same subject with one',
    tokenOf('desk', { sub: 'alice' }),
    tokenOf('desk', { iss: ISS, sub: 'alice' }),
  ],
  [
    'a numeric subject against its string',
    tokenOf('desk', { iss: ISS, sub: 1 }),
    tokenOf('desk', { iss: ISS, sub: '1' }),
  ],
  [
    'an empty subject against none (client identities)',
    tokenOf('desk', { iss: ISS, sub: '' }),
    tokenOf('desk', { iss: ISS }),
  ],
  [
    'a tenant claim "1" against 1 (no subject)',
    tokenOf('portal', { tenant: '1' }),
    tokenOf('portal', { tenant: 1 }),
  ],
  [
    'a tenant claim as an array against its joined string',
    tokenOf('portal', { tenant: ['a', 'b'] }),
    tokenOf('portal', { tenant: 'a,b' }),
  ],
  ['an empty-string claim against a missing one', tokenOf('portal', { tenant: '' }), tokenOf('portal', {})],
  ['a null claim against a missing one', tokenOf('portal', { tenant: null }), tokenOf('portal', {})],
  [
    'unicode NFC against NFD in a subject',
    tokenOf('desk', { iss: ISS, sub: 'jos\u00e9' }),
    tokenOf('desk', { iss: ISS, sub: 'jose\u0301' }),
  ],
  [
    'unicode NFC against NFD in a claim',
    tokenOf('portal', { tenant: 'caf\u00e9' }),
    tokenOf('portal', { tenant: 'cafe\u0301' }),
  ],
  [
    'a __proto__ claim (own key of parsed JSON) against none',
    tokenOf('portal', proto),
    tokenOf('portal', { org: 'o' }),
  ],
  [
    'a constructor claim against none',
    tokenOf('portal', { constructor: 'x', org: 'o' }),
    tokenOf('portal', { org: 'o' }),
  ],
  [
    'very long subjects differing in the last character',
    tokenOf('desk', { iss: ISS, sub: `${'x'.repeat(20_000)}a` }),
    tokenOf('desk', { iss: ISS, sub: `${'x'.repeat(20_000)}b` }),
  ],
  [
    'client ids with # against a client id and claims',
    tokenOf('portal#x', {}),
    tokenOf('portal', { '#': 'x' }),
  ],
  [
    'same client and claims, other scopes',
    tokenOf('portal', { tenant: 't' }, ['orders:read']),
    tokenOf('portal', { tenant: 't' }, ['orders:read', 'admin']),
  ],
  ['no auth (stdio: local) against a token', undefined, tokenOf('portal', {})],
  ['a subject that spells another kind of identity', tokenOf('desk', { iss: ISS, sub: 'local' }), undefined],
];

describe('repeat-guard red team: callers never share cached answers (memory, one guard)', () => {
  for (const [name, a, b] of PAIRS) {
    it(`keeps apart: ${name}`, async () => {
      expectApart(await attackPair(a, b), a, b);
    });
  }

  it('does not let one caller join another caller’s identical call in flight (single flight is per caller)', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const runs: string[] = [];
    const tool = defineTool({
      name: 'my_account',
      description: 'The calling account’s private data.',
      input: { section: z.string() },
      handler: async (_args, ctx) => {
        const sub = String(ctx.request.authInfo?.extra?.sub);
        runs.push(sub);
        await gate;
        return ok({ owner: sub });
      },
    }) as ToolDefinition;
    const guard = createRepeatGuard();
    const alice = await serveTools([tool], {
      middleware: [guard],
      authInfo: tokenOf('desk', { iss: 'https://idp-a.example', sub: 'alice' }),
    });
    const mallory = await serveTools([tool], {
      middleware: [guard],
      authInfo: tokenOf('desk', { iss: 'https://idp-b.example', sub: 'alice' }),
    });
    open.push(alice, mallory);
    const first = alice.callTool('my_account', { section: 'billing' });
    while (runs.length < 1) await new Promise((resolve) => setTimeout(resolve, 1));
    const second = mallory.callTool('my_account', { section: 'billing' });
    const alsoAlice = alice.callTool('my_account', { section: 'billing' });
    while (runs.length < 2) await new Promise((resolve) => setTimeout(resolve, 1));
    release();
    const [a, m, a2] = await Promise.all([first, second, alsoAlice]);
    expect(runs).toEqual(['alice', 'alice']);
    expect(a.structuredContent).toEqual({ ok: true, owner: 'alice' });
    expect(m.structuredContent).toEqual({ ok: true, owner: 'alice' });
    // Alice's own concurrent repeat joined her flight; Mallory's ran on its own (two runs, not three).
    expect(a2.structuredContent).toMatchObject({ owner: 'alice', note: expect.stringMatching(/^Repeated/) });
    expect(m.structuredContent).not.toHaveProperty('note');
  });

  // The SDK's own introspection example builds AuthInfo as `{ token, clientId: data.client_id, scopes,
  // expiresAt, resource }`: no claims, so no subject. With a public client (a Client ID Metadata
  // Document URL every installation shares) the client id names the app, not the person; and
  // `client_id` is optional in an introspection answer (RFC 7662), so it may be missing too. The server
  // then knows the person by the token alone (its own lookup), and so must every key.
  const introspected = (token: string, clientId: string | undefined): AuthInfo =>
    ({ token, clientId, scopes: ['mcp:tools'], expiresAt: 4_102_444_800 }) as AuthInfo;
  const accounts: Record<string, string> = { 'tok-alice-7f3a': 'alice', 'tok-bob-91c2': 'bob' };
  for (const [name, clientId] of [
    ['two people behind one public client whose tokens carry no claims', 'https://app.example/client.json'],
    ['two people whose tokens carry neither claims nor a client id', undefined],
  ] as const) {
    it(`keeps apart: ${name}`, async () => {
      const runs: string[] = [];
      const tool = defineTool({
        name: 'my_account',
        description: 'The calling account’s private data.',
        input: { section: z.string() },
        handler: async ({ section }, ctx) => {
          const owner = accounts[ctx.request.authInfo?.token ?? ''] ?? 'nobody';
          runs.push(owner);
          return ok({ section, owner });
        },
      }) as ToolDefinition;
      const guard = createRepeatGuard();
      const alice = await serveTools([tool], {
        middleware: [guard],
        authInfo: introspected('tok-alice-7f3a', clientId),
      });
      const bob = await serveTools([tool], {
        middleware: [guard],
        authInfo: introspected('tok-bob-91c2', clientId),
      });
      open.push(alice, bob);
      const args = { section: 'billing' };
      expect((await alice.callTool('my_account', args)).structuredContent).toEqual({
        ok: true,
        section: 'billing',
        owner: 'alice',
      });
      // Bob's answer is Bob's: never Alice's remembered result.
      expect((await bob.callTool('my_account', args)).structuredContent).toEqual({
        ok: true,
        section: 'billing',
        owner: 'bob',
      });
      // Alice's own repeat is answered from the cache: the guard was on during the attack.
      expect((await alice.callTool('my_account', args)).structuredContent).toMatchObject({
        owner: 'alice',
        note: expect.stringMatching(/^Repeated call/),
      });
      expect(runs).toEqual(['alice', 'bob']);
    });
  }

  it('keeps bound values apart by type: a customer id bound as "1" and as 1 never share an answer', async () => {
    const runs: unknown[] = [];
    const tool = defineTool({
      name: 'my_orders',
      description: 'The bound customer’s orders.',
      input: { status: z.enum(['open']) },
      bind: (request) => ({ customerId: request.authInfo?.extra?.customer_id }),
      handler: async (_args, ctx) => {
        runs.push(ctx.bindings.customerId);
        return ok({ customer: JSON.stringify(ctx.bindings.customerId) });
      },
    }) as ToolDefinition;
    const guard = createRepeatGuard();
    // One identity for both (a server identifying by client id alone): only the bindings split them.
    const identify = () => ({ id: 'client:portal', kind: 'client' as const, clientId: 'portal' });
    const one = await serveTools([tool], {
      middleware: [guard],
      identify,
      authInfo: tokenOf('portal', { customer_id: '1' }),
    });
    const oneNumber = await serveTools([tool], {
      middleware: [guard],
      identify,
      authInfo: tokenOf('portal', { customer_id: 1 }),
    });
    open.push(one, oneNumber);
    expect((await one.callTool('my_orders', { status: 'open' })).structuredContent).toEqual({
      ok: true,
      customer: '"1"',
    });
    expect((await oneNumber.callTool('my_orders', { status: 'open' })).structuredContent).toEqual({
      ok: true,
      customer: '1',
    });
    expect(runs).toEqual(['1', 1]);
  });

  it('keeps a no-progress streak per caller: another caller’s identical results neither start nor extend it', async () => {
    const runs = { count: 0 };
    const tool = defineTool({
      name: 'lookup',
      description: 'Looks a code up; always finds nothing.',
      input: { code: z.string() },
      handler: async () => {
        runs.count += 1;
        return ok({ found: false });
      },
    }) as ToolDefinition;
    const guard = createRepeatGuard({ noProgress: 3 });
    const a = await serveTools([tool], {
      middleware: [guard],
      authInfo: tokenOf('desk', { iss: 'https://idp-a.example', sub: 'alice' }),
    });
    const b = await serveTools([tool], {
      middleware: [guard],
      authInfo: tokenOf('desk', { iss: 'https://idp-b.example', sub: 'alice' }),
    });
    open.push(a, b);
    // Interleaved: each caller's streak is 2 after four calls; a shared streak would be 4.
    for (const [client, code] of [
      [a, 'a1'],
      [b, 'b1'],
      [a, 'a2'],
      [b, 'b2'],
    ] as const) {
      expect((await client.callTool('lookup', { code })).structuredContent).toEqual({
        ok: true,
        found: false,
      });
    }
    expect((await a.callTool('lookup', { code: 'a3' })).structuredContent).toMatchObject({
      note: expect.stringMatching(/^No progress: the last 3 calls/),
    });
    expect(runs.count).toBe(5);
  });

  it('keeps HTTP callers apart: anonymous (no session, no auth), two sessions and a token never share', async () => {
    const guard = createRepeatGuard();
    const tool = { name: 'my_account' } as ToolDefinition;
    const calls: string[] = [];
    const callAs = (request: Partial<ToolRequest>) =>
      guard(createTestContext({ tool, args: { section: 'billing' }, request }), async () => {
        const ctx = JSON.stringify([request?.sessionId ?? null, request?.authInfo?.clientId ?? null]);
        calls.push(ctx);
        return ok({ owner: ctx });
      });
    const http = { headers: {} };
    const who = [
      { ...http },
      { ...http, sessionId: 's-1' },
      { ...http, sessionId: 's-2' },
      { ...http, authInfo: tokenOf('portal', {}) },
      { ...http, sessionId: 's-1', authInfo: tokenOf('other', {}) },
    ];
    for (const request of who) {
      const result = await callAs(request);
      expect(result.structuredContent).not.toHaveProperty('note');
    }
    expect(new Set(calls).size).toBe(who.length);
    // Each caller's own repeat is still a repeat.
    for (const request of who) {
      expect((await callAs(request)).structuredContent).toMatchObject({ note: expect.any(String) });
    }
    expect(calls).toHaveLength(who.length);
  });
});

const REDIS_URL = process.env.TEST_REDIS_URL;

if (REDIS_URL === undefined) {
  reportMissingService(
    it,
    'repeat-guard red team on a shared Redis',
    'TEST_REDIS_URL',
    'redis://127.0.0.1:6379',
  );
} else {
  const url = REDIS_URL;
  describe('repeat-guard red team: callers never share cached answers (a fleet on one Redis)', () => {
    const prefix = `toolgate:repeat-redteam:${randomUUID()}:`;
    const redis = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      socketTimeout: 2000,
      lazyConnect: true,
    });
    beforeAll(async () => {
      await redis.connect();
    });
    afterAll(async () => {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    });

    for (const [name, a, b] of PAIRS) {
      it(`keeps apart across replicas: ${name}`, async () => {
        // A prefix per attack: the same identity in two attacks is one caller, rightly sharing entries.
        const own = `${prefix}${randomUUID()}:`;
        expectApart(await attackPair(a, b, () => createRedisRepeatStore(redis, { prefix: own })), a, b);
      });
    }

    it('writes fixed-size hashed keys whatever the arguments and claims hold (CRLF, globs, braces), and never the values', async () => {
      const own = `${prefix}inject:`;
      const runs = { count: 0 };
      const tool = ownDataTool(runs);
      const hostile = 'x\r\n*3\r\n$3\r\nDEL\r\n$1\r\n*\r\n{tag}[a-z]?*';
      const client = await serveTools([tool], {
        middleware: [createRepeatGuard({ store: createRedisRepeatStore(redis, { prefix: own }) })],
        authInfo: tokenOf('portal', { tenant: hostile }),
      });
      open.push(client);
      await client.callTool('my_account', { section: hostile });
      await client.callTool('my_account', { section: '*' });
      const keys = await redis.keys(`${own}*`);
      expect(keys).toHaveLength(2);
      for (const key of keys) expect(key).toMatch(new RegExp(`^${own}c:[A-Za-z0-9_-]{43}$`));
      // A glob sent as an argument is data: the `*` call is its own entry, not a match of every key.
      const repeat = await client.callTool('my_account', { section: '*' });
      expect(repeat.structuredContent).toMatchObject({ section: '*', note: expect.any(String) });
      expect(runs.count).toBe(2);
      expect(await redis.ping()).toBe('PONG');
    });

    it('lets nothing be read after the window: Redis expires the entry and the call runs again', async () => {
      const own = `${prefix}ttl:`;
      const runs = { count: 0 };
      const client = await serveTools([ownDataTool(runs)], {
        middleware: [
          createRepeatGuard({ windowMs: 300, store: createRedisRepeatStore(redis, { prefix: own }) }),
        ],
        authInfo: tokenOf('desk', { iss: ISS, sub: 'alice' }),
      });
      open.push(client);
      await client.callTool('my_account', { section: 'billing' });
      const [key] = await redis.keys(`${own}*`);
      const ttl = await redis.pttl(key!);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(300);
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(await redis.exists(key!)).toBe(0);
      const later = await client.callTool('my_account', { section: 'billing' });
      expect(later.structuredContent).not.toHaveProperty('note');
      expect(runs.count).toBe(2);
    });
  });
}
