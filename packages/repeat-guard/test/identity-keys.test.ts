import { randomUUID } from 'node:crypto';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { defineTool, ok, type ToolDefinition, ToolError } from '@toolgate/core';
import {
  createTestContext,
  expectFailure,
  reportMissingService,
  serveTools,
  type TestClient,
} from '@toolgate/core/testing';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import {
  createMemoryRepeatStore,
  createRedisRepeatStore,
  createRepeatGuard,
  type RepeatStore,
} from '../src/index.js';

// Held-out tests saw customer 43 answered with customer 42's orders: two tokens of one client that
// differ only in the bound customer id. These prove the cache key is core's callKey (identity +
// bindings + tool + arguments) through real tools/call round trips.

const open: TestClient[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((client) => client.close()));
});

function portalToken(customerId: number): AuthInfo {
  return { token: `token-${customerId}`, clientId: 'portal', scopes: ['orders:read'], extra: { customerId } };
}

/** A customer-scoped tool: its result depends only on the bound customer id, never on the model. */
function myOrdersTool(invocations: Map<number, number>): ToolDefinition {
  return defineTool({
    name: 'list_my_orders',
    description: 'The calling customer’s orders.',
    input: { status: z.enum(['open', 'shipped']) },
    output: { customerId: z.number(), items: z.array(z.string()) },
    bind: (request) => {
      const customerId = request.authInfo?.extra?.customerId;
      if (typeof customerId !== 'number') throw new ToolError('permission_denied', 'No customer bound.');
      return { customerId };
    },
    handler: async ({ status }, ctx) => {
      const customerId = ctx.bindings.customerId as number;
      invocations.set(customerId, (invocations.get(customerId) ?? 0) + 1);
      return ok({ customerId, items: [`${customerId}-${status}-1`, `${customerId}-${status}-2`] });
    },
  }) as ToolDefinition;
}

async function twoCustomers(options: { identify?: 'client-only'; store?: RepeatStore } = {}) {
  const invocations = new Map<number, number>();
  const tools = [myOrdersTool(invocations)];
  // ONE middleware instance shared by two servers, as one replica serves many connections.
  const guard = createRepeatGuard(options.store === undefined ? {} : { store: options.store });
  const identify =
    options.identify === 'client-only'
      ? () => ({ id: 'client:portal', kind: 'client' as const, clientId: 'portal' })
      : undefined;
  const serve = async (customerId: number) => {
    const client = await serveTools(tools, {
      middleware: [guard],
      authInfo: portalToken(customerId),
      ...(identify ? { identify } : {}),
    });
    open.push(client);
    return client;
  };
  return { invocations, c42: await serve(42), c43: await serve(43) };
}

const expected = (customerId: number) => ({
  ok: true,
  customerId,
  items: [`${customerId}-open-1`, `${customerId}-open-2`],
});

describe('createRepeatGuard: keys from caller identity and bindings', () => {
  it('never answers customer 43 with customer 42’s result: 100 identical sequential calls each, interleaved', async () => {
    const { invocations, c42, c43 } = await twoCustomers();
    for (let i = 0; i < 100; i += 1) {
      const [a, b] = [
        await c42.callTool('list_my_orders', { status: 'open' }),
        await c43.callTool('list_my_orders', { status: 'open' }),
      ];
      expect(a.structuredContent).toMatchObject(expected(42));
      expect(b.structuredContent).toMatchObject(expected(43));
    }
    // The guard still works per customer: each ran once, the 99 repeats were answered from cache.
    expect(Object.fromEntries(invocations)).toEqual({ 42: 1, 43: 1 });
  });

  it('never crosses customers under 200 concurrent identical calls on one shared guard', async () => {
    const { invocations, c42, c43 } = await twoCustomers();
    const calls = Array.from({ length: 100 }, () => [
      c42.callTool('list_my_orders', { status: 'open' }).then((r) => ({ who: 42, r })),
      c43.callTool('list_my_orders', { status: 'open' }).then((r) => ({ who: 43, r })),
    ]).flat();
    const results = await Promise.all(calls);
    expect(results).toHaveLength(200);
    for (const { who, r } of results) expect(r.structuredContent).toMatchObject(expected(who));
    expect(Object.fromEntries(invocations)).toEqual({ 42: 1, 43: 1 });
  });

  it('keeps customers apart by their bindings even when the identity rule cannot tell them apart', async () => {
    // A server that identifies callers by client id alone: the bound customer id still splits the key.
    const { invocations, c42, c43 } = await twoCustomers({ identify: 'client-only' });
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        (i % 2 === 0 ? c42 : c43)
          .callTool('list_my_orders', { status: 'open' })
          .then((r) => ({ who: i % 2 === 0 ? 42 : 43, r })),
      ),
    );
    for (const { who, r } of results) expect(r.structuredContent).toMatchObject(expected(who));
    for (let i = 0; i < 50; i += 1) {
      expect((await c43.callTool('list_my_orders', { status: 'open' })).structuredContent).toMatchObject(
        expected(43),
      );
      expect((await c42.callTool('list_my_orders', { status: 'open' })).structuredContent).toMatchObject(
        expected(42),
      );
    }
    expect(Object.fromEntries(invocations)).toEqual({ 42: 1, 43: 1 });
  });

  it('keeps customers apart across two guards that share one memory store, and lets each guard answer the other’s repeat', async () => {
    // Keys are interned per store, not per guard: guard B must find guard A's entry for customer 42,
    // and never hand it to customer 43, whom guard B would otherwise number first.
    const invocations = new Map<number, number>();
    const tools = [myOrdersTool(invocations)];
    const store = createMemoryRepeatStore();
    const serveWith = async (customerId: number) => {
      const client = await serveTools(tools, {
        middleware: [createRepeatGuard({ store })],
        authInfo: portalToken(customerId),
      });
      open.push(client);
      return client;
    };
    const a42 = await serveWith(42);
    const b43 = await serveWith(43);
    const b42 = await serveWith(42);
    expect((await a42.callTool('list_my_orders', { status: 'open' })).structuredContent).toEqual(
      expected(42),
    );
    expect((await b43.callTool('list_my_orders', { status: 'open' })).structuredContent).toEqual(
      expected(43),
    );
    const repeat = await b42.callTool('list_my_orders', { status: 'open' });
    expect(repeat.structuredContent).toMatchObject({
      ...expected(42),
      note: expect.stringMatching(/^Repeated call/),
    });
    expect(Object.fromEntries(invocations)).toEqual({ 42: 1, 43: 1 });
  });

  it('two guards on one memory store run the same call at once: the later result replaces the earlier, one entry, and a repeat gets it', async () => {
    // Guard A reads the key absent and runs; guard B (its own flights) runs the same call meanwhile
    // and remembers it first. A's write, made after the store changed, must replace B's entry.
    const store = createMemoryRepeatStore();
    const a = createRepeatGuard({ store });
    const b = createRepeatGuard({ store });
    const tool = { name: 'list_my_orders' } as ToolDefinition;
    const context = () =>
      createTestContext({
        tool,
        args: { status: 'open' },
        request: { authInfo: portalToken(42) },
        bindings: { customerId: 42 },
      });
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const first = a(context(), async () => {
      await held;
      return ok({ from: 'a' });
    });
    expect((await b(context(), async () => ok({ from: 'b' }))).structuredContent).toEqual({
      ok: true,
      from: 'b',
    });
    release();
    expect((await first).structuredContent).toEqual({ ok: true, from: 'a' });
    expect([store.size, store.totalSize > 0]).toEqual([1, true]);
    const repeat = await b(context(), async () => ok({ from: 'never' }));
    expect(repeat.structuredContent).toMatchObject({
      from: 'a',
      note: expect.stringMatching(/^Repeated call/),
    });
  });

  it('never hands one caller another’s entry after thousands of callers have rolled the caller numbers over', async () => {
    // maxEntries 8: numbers are held for about 8 callers, so 2,000 callers retire them hundreds of
    // times; every caller still gets only its own result, and a forgotten number only means the call
    // runs again.
    const store = createMemoryRepeatStore({ maxEntries: 8 });
    const guard = createRepeatGuard({ store });
    const tool = { name: 'list_my_orders' } as ToolDefinition;
    let runs = 0;
    const callAs = (customerId: number) =>
      guard(
        createTestContext({
          tool,
          args: { status: 'open' },
          request: { authInfo: portalToken(customerId) },
          bindings: { customerId },
        }),
        async () => {
          runs += 1;
          return ok({ customerId });
        },
      );
    for (let round = 0; round < 2; round += 1) {
      for (let customerId = 1; customerId <= 2000; customerId += 1) {
        expect((await callAs(customerId)).structuredContent).toMatchObject({ ok: true, customerId });
      }
    }
    // Each customer's second call came 1,999 other callers later: long forgotten, so it ran again.
    expect(runs).toBe(4000);
    // A caller seen just now is still remembered.
    expect((await callAs(2000)).structuredContent).toMatchObject({ ok: true, customerId: 2000 });
    expect(runs).toBe(4000);
    expect(store.size).toBeLessThanOrEqual(8);
  });

  it('passes a refused bind through: a token without a customer gets permission_denied, never a cached answer', async () => {
    const invocations = new Map<number, number>();
    const guard = createRepeatGuard();
    const tools = [myOrdersTool(invocations)];
    const bound = await serveTools(tools, { middleware: [guard], authInfo: portalToken(42) });
    const unbound = await serveTools(tools, {
      middleware: [guard],
      authInfo: { token: 't', clientId: 'portal', scopes: ['orders:read'], extra: {} },
    });
    open.push(bound, unbound);
    await bound.callTool('list_my_orders', { status: 'open' });
    for (let i = 0; i < 3; i += 1) {
      expect(expectFailure(await unbound.callTool('list_my_orders', { status: 'open' }))).toMatchObject({
        error: 'permission_denied',
        message: 'No customer bound.',
      });
    }
    expect(Object.fromEntries(invocations)).toEqual({ 42: 1 });
  });
});

const REDIS_URL = process.env.TEST_REDIS_URL;

if (REDIS_URL === undefined) {
  reportMissingService(
    it,
    'repeat-guard identity keys on a shared Redis',
    'TEST_REDIS_URL',
    'redis://127.0.0.1:6379',
  );
} else {
  const url = REDIS_URL;
  describe('createRepeatGuard: identity keys on a shared Redis (hashed keys)', () => {
    const prefix = `toolgate:repeat-guard-identity:${randomUUID()}:`;
    const redis = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      socketTimeout: 2000,
      lazyConnect: true,
    });

    afterAll(async () => {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    });

    it('never crosses customers behind one identity under concurrent identical calls, one key each', async () => {
      await redis.connect();
      const { invocations, c42, c43 } = await twoCustomers({
        identify: 'client-only',
        store: createRedisRepeatStore(redis, { prefix }),
      });
      const results = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          (i % 2 === 0 ? c42 : c43)
            .callTool('list_my_orders', { status: 'open' })
            .then((r) => ({ who: i % 2 === 0 ? 42 : 43, r })),
        ),
      );
      for (const { who, r } of results) expect(r.structuredContent).toMatchObject(expected(who));
      expect(Object.fromEntries(invocations)).toEqual({ 42: 1, 43: 1 });
      const keys = await redis.keys(`${prefix}*`);
      expect(keys).toHaveLength(2);
      for (const key of keys) expect(key).toMatch(new RegExp(`^${prefix}c:[A-Za-z0-9_-]{43}$`));
    });
  });
}
