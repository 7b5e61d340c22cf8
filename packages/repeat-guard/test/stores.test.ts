import { randomUUID } from 'node:crypto';
import { canonicalJson, ok, type ToolDefinition, type ToolResult } from '@toolgate/core';
import { createTestContext, type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMemoryRepeatStore, createRedisRepeatStore, createRepeatGuard } from '../src/index.js';
import { memoryEntriesOf } from '../src/memory-store.js';
import { closeAll, createFixture, serve, sleep } from './fixtures.js';

const searchOrders = { name: 'search_orders' } as ToolDefinition;
const searchContext = (args: Record<string, unknown>) => createTestContext({ tool: searchOrders, args });

describe('memory store: bounded', () => {
  it('holds at most maxEntries over 100,000 distinct calls, and the newest still repeat', async () => {
    const store = createMemoryRepeatStore({ maxEntries: 1000 });
    const guard = createRepeatGuard({ store, noProgress: 5 });
    let handled = 0;
    const handler = async (): Promise<ToolResult> => {
      handled += 1;
      return ok({ items: [{ id: `order-${handled}` }] });
    };
    let largest = 0;
    for (let i = 0; i < 100_000; i += 1) {
      await guard(searchContext({ status: 'open', page: i }), handler);
      if (i % 10_000 === 0) largest = Math.max(largest, store.size);
    }
    expect(handled).toBe(100_000);
    // The most recent calls are held: at least half the capacity, never more than all of it.
    expect(store.size).toBeGreaterThanOrEqual(500);
    expect(store.size).toBeLessThanOrEqual(1000);
    expect(largest).toBeLessThanOrEqual(1000);
    const repeat = searchContext({ status: 'open', page: 99_999 });
    await guard(repeat, handler);
    expect(handled).toBe(100_000);
    expect(repeat.decisions).toMatchObject([{ by: 'repeat-guard', action: 'short-circuit' }]);
    await guard(searchContext({ status: 'open', page: 0 }), handler); // evicted long ago: runs
    expect(handled).toBe(100_001);
  }, 120_000); // about 1 s on an idle machine; generous for a loaded shared CI box

  it('holds at most maxSize characters, evicting the least recently used', async () => {
    const store = createMemoryRepeatStore({ maxEntries: 10_000, maxSize: 20_000 });
    const guard = createRepeatGuard({ store });
    const handler = async (): Promise<ToolResult> => ok({ blob: 'z'.repeat(500) });
    for (let i = 0; i < 500; i += 1) await guard(searchContext({ page: i }), handler);
    expect(store.totalSize).toBeLessThanOrEqual(20_000);
    expect(store.size).toBeLessThan(40);
  });

  it('bounds the caller scopes it numbers by maxSize too: distinct long scopes from the client cannot pile up', async () => {
    // A scope built from what the client sends (a conversation id in _meta): each call a new 50,000
    // character one. Counted by number alone, 1,000 of them would be held (50 MB); by characters, the
    // store's maxSize bounds them.
    const store = createMemoryRepeatStore({ maxEntries: 1000, maxSize: 200_000 });
    const fixture = createFixture();
    const client = await serve(fixture.tools, [
      createRepeatGuard({ store, scope: (ctx) => String(ctx.request.meta?.conversation ?? '') }),
    ]);
    const conversation = (i: number): string => `${i}:${'c'.repeat(50_000)}`;
    for (let i = 0; i < 40; i += 1) {
      await client.callTool('get_order_status', { id: '1' }, { meta: { conversation: conversation(i) } });
    }
    expect(memoryEntriesOf(store)!.callerSize()).toBeLessThanOrEqual(200_000);
    // The newest caller scope is still held: its repeat is answered without running.
    await client.callTool('get_order_status', { id: '1' }, { meta: { conversation: conversation(39) } });
    expect(fixture.invocations.get_order_status).toBe(40);
    // The oldest were let go to stay within maxSize (by number alone all 40 would still be held).
    await client.callTool('get_order_status', { id: '1' }, { meta: { conversation: conversation(0) } });
    expect(fixture.invocations.get_order_status).toBe(41);
    // A scope longer than maxSize is never held, so it never repeats: its calls simply run.
    const huge = 'h'.repeat(250_000);
    await client.callTool('get_order_status', { id: '1' }, { meta: { conversation: huge } });
    await client.callTool('get_order_status', { id: '1' }, { meta: { conversation: huge } });
    expect(fixture.invocations.get_order_status).toBe(43);
    expect(memoryEntriesOf(store)!.callerSize()).toBeLessThanOrEqual(200_000);
  });

  it('measures a result by its JSON: a short text full of quotes over maxResultSize is not remembered', async () => {
    const store = createMemoryRepeatStore();
    let handled = 0;
    const guard = createRepeatGuard({ store, maxResultSize: 1000 });
    const handler = async (): Promise<ToolResult> => {
      handled += 1;
      return ok({ quotes: '"'.repeat(300) });
    };
    await guard(searchContext({ page: 1 }), handler);
    await guard(searchContext({ page: 1 }), handler);
    expect(handled).toBe(2);
    expect(store.size).toBe(0);
  });

  it("reads a guard's entry through its public get as the JSON a shared store holds, and honours one put there", async () => {
    const store = createMemoryRepeatStore();
    const guard = createRepeatGuard({ store });
    const first = searchContext({ page: 7 });
    await guard(first, async () => ok({ items: ['a'] }));
    // The first caller and tool of a store get number 0; the key is it and the canonical arguments.
    const key = canonicalJson([0, first.args]);
    // The memory store answers synchronously.
    const text = store.get(key) as string;
    expect(JSON.parse(text)).toMatchObject({
      v: 1,
      n: 1,
      s: 1,
      r: { content: [{ type: 'text' }] },
    });
    // The same JSON written through the public set (as a string) answers the repeat too.
    store.clear();
    store.set(key, text, 60_000);
    let handled = 0;
    const repeat = searchContext({ page: 7 });
    const answer = await guard(repeat, async () => {
      handled += 1;
      return ok({ items: ['b'] });
    });
    expect(handled).toBe(0);
    expect(answer.structuredContent).toMatchObject({ ok: true, items: ['a'] });
    expect(repeat.decisions).toMatchObject([{ by: 'repeat-guard', action: 'short-circuit' }]);
  });

  it('remembers and expires calls the same way 13 days and 25 days after the store was made', async () => {
    // Times are kept as small integers since the store was made, then (past 2^30 ms) as plain numbers.
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const store = createMemoryRepeatStore();
      const guard = createRepeatGuard({ store, windowMs: 1_000 });
      let handled = 0;
      const handler = async (): Promise<ToolResult> => {
        handled += 1;
        return ok({ items: [handled] });
      };
      for (const days of [13, 25]) {
        vi.setSystemTime(Date.now() + days * 86_400_000);
        await guard(searchContext({ page: days }), handler);
        vi.setSystemTime(Date.now() + 400);
        const repeat = await guard(searchContext({ page: days }), handler);
        expect(repeat.structuredContent).toMatchObject({
          items: [handled],
          note: expect.stringMatching(/moments ago/),
        });
        vi.setSystemTime(Date.now() + 1_000);
        await guard(searchContext({ page: days }), handler); // the window has passed: runs again
      }
      expect(handled).toBe(4);
    } finally {
      vi.useRealTimers();
    }
  });

  it('expires an entry after its time to live', async () => {
    const store = createMemoryRepeatStore();
    store.set('k', 'v', 30);
    expect(store.get('k')).toBe('v');
    await sleep(50);
    expect(store.get('k')).toBeUndefined();
  });
});

describe('Redis store: the client', () => {
  const commands = { get: async () => null, set: async () => 'OK', del: async () => 0 };
  const message =
    "createRedisRepeatStore: create the ioredis client with socketTimeout (e.g. 2000 ms, as @toolgate/redis-store's createRedisClient does): without it a connection that goes silent without a reset is never closed, every call waits storeTimeoutMs and finds the store failed (onStoreFailure) for the life of the process, and every command sent stays queued in the client";

  it('requires a prefix: two servers sharing a Redis under a default one would answer each other’s calls', () => {
    const missing =
      "createRedisRepeatStore: prefix is required: name this server's entries (e.g. { prefix: 'orders-prod:repeat:' }), the same on all its replicas and another on every other server sharing the Redis; under one prefix, one server's cached results answer the other's calls";
    expect(() => createRedisRepeatStore(commands, undefined as never)).toThrow(new TypeError(missing));
    expect(() => createRedisRepeatStore(commands, {} as never)).toThrow(new TypeError(missing));
    for (const prefix of ['', 7, null]) {
      expect(() => createRedisRepeatStore(commands, { prefix } as never)).toThrow(
        new TypeError(
          "createRedisRepeatStore: prefix must be a non-empty string (e.g. 'orders-prod:repeat:')",
        ),
      );
    }
    expect(createRedisRepeatStore(commands, { prefix: 'orders-prod:repeat:' }).prefix).toBe(
      'orders-prod:repeat:',
    );
  });

  it('refuses an ioredis client that would keep a connection gone silent for good (no socketTimeout)', () => {
    // The client this README showed before: no socketTimeout.
    const before = new Redis({
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
    });
    const now = new Redis({
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      socketTimeout: 2000,
    });
    try {
      expect(() => createRedisRepeatStore(before, { prefix: 'test:repeat:' })).toThrow(
        new TypeError(message),
      );
      expect(createRedisRepeatStore(now, { prefix: 'test:repeat:' }).prefix).toBe('test:repeat:');
    } finally {
      before.disconnect();
      now.disconnect();
    }
    // Not a time limit: 0, and past 2^31 - 1 ms, Node fires the timer after 1 ms (every wait cuts the
    // connection); NaN and a string are not numbers of milliseconds.
    for (const socketTimeout of [undefined, 0, -1, Number.NaN, Number.POSITIVE_INFINITY, '2000']) {
      expect(() =>
        createRedisRepeatStore(
          { ...commands, options: { socketTimeout } as never },
          { prefix: 'test:repeat:' },
        ),
      ).toThrow(message);
      // A Cluster carries each node's options under redisOptions.
      const cluster = { redisOptions: { socketTimeout } } as never;
      expect(() =>
        createRedisRepeatStore({ ...commands, options: cluster }, { prefix: 'test:repeat:' }),
      ).toThrow(message);
    }
    const cluster = { options: { redisOptions: { socketTimeout: 2000 } } };
    expect(createRedisRepeatStore({ ...commands, ...cluster }, { prefix: 'test:repeat:' }).prefix).toBe(
      'test:repeat:',
    );
    // A client that shows no options is taken as it is (it may not be ioredis at all).
    expect(createRedisRepeatStore(commands, { prefix: 'test:repeat:' }).prefix).toBe('test:repeat:');
  });
});

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `toolgate:repeat-guard-test:${randomUUID()}:`;

describe('Redis store (real Redis)', () => {
  let redis: Redis | undefined;
  let unreachable: string | undefined;

  beforeAll(async () => {
    const client = new Redis(REDIS_URL, {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 2000,
      socketTimeout: 2000,
      retryStrategy: () => null,
    });
    try {
      await client.connect();
      await client.ping();
      redis = client;
    } catch (error) {
      client.disconnect();
      unreachable = `Redis unreachable at ${REDIS_URL}: ${(error as Error).message}`;
      // In CI a missing Redis is a broken pipeline, never a silent pass.
      if (process.env.CI === 'true') throw new Error(`${unreachable} (CI=true requires it)`);
      process.stderr.write(`repeat-guard: ${unreachable}; the Redis store tests are skipped\n`);
    }
  });

  afterAll(async () => {
    await closeAll();
    if (!redis) return;
    const keys = await redis.keys(`${PREFIX}*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  });

  // Outside CI an absent Redis skips these tests with the reason shown in the report.
  function connected(skip: (note: string) => void): Redis {
    if (!redis) skip(unreachable ?? 'Redis unreachable');
    return redis!;
  }

  it('stores with a PX time to live under its prefix, reads back, and deletes', async ({ skip }) => {
    const client = connected(skip);
    const store = createRedisRepeatStore(client, { prefix: PREFIX });
    expect(store.prefix).toBe(PREFIX);
    await store.set('k1', 'value-1', 5000);
    expect(await store.get('k1')).toBe('value-1');
    expect(await client.get(`${PREFIX}k1`)).toBe('value-1');
    const ttl = await client.pttl(`${PREFIX}k1`);
    expect(ttl).toBeGreaterThan(4000);
    expect(ttl).toBeLessThanOrEqual(5000);
    await store.delete('k1');
    expect(await store.get('k1')).toBeUndefined();
    await store.set('k2', 'value-2', 0.4); // a fraction of a millisecond still expires, never persists
    await sleep(20);
    expect(await store.get('k2')).toBeUndefined();
  });

  it('lets two replicas share repeats: the second replica answers the identical call without running it', async ({
    skip,
  }) => {
    const client = connected(skip);
    const fixture = createFixture();
    const store = createRedisRepeatStore(client, { prefix: PREFIX });
    const replicaA = await serve(fixture.tools, [createRepeatGuard({ store })], {
      sessionId: 'shared-session',
    });
    const replicaB = await serve(fixture.tools, [createRepeatGuard({ store })], {
      sessionId: 'shared-session',
    });
    const first = await replicaA.callTool('get_order_status', { id: 'redis-1' });
    const second = await replicaB.callTool('get_order_status', { id: 'redis-1' });
    expect(fixture.invocations.get_order_status).toBe(1);
    expect(first.structuredContent).toEqual({ ok: true, id: 'redis-1', status: 'shipped' });
    expect(second.structuredContent).toMatchObject({ ok: true, id: 'redis-1', status: 'shipped' });
    expect((second.structuredContent as { note: string }).note).toMatch(/^Repeated call: /);
    const keys = await client.keys(`${PREFIX}c:*`);
    expect(keys).toHaveLength(1);
    expect(await client.pttl(keys[0]!)).toBeLessThanOrEqual(60_000);
  });

  it('two servers on one Redis, each with its own prefix, never answer each other’s calls', async ({
    skip,
  }) => {
    const client = connected(skip);
    const staging = createFixture();
    const prod = createFixture();
    const servers = await Promise.all(
      [
        [staging, `${PREFIX}staging:`],
        [prod, `${PREFIX}prod:`],
      ].map(([fixture, prefix]) =>
        serve(
          (fixture as ReturnType<typeof createFixture>).tools,
          [createRepeatGuard({ store: createRedisRepeatStore(client, { prefix: prefix as string }) })],
          { sessionId: 'shared-session' },
        ),
      ),
    );
    await servers[0]!.callTool('get_order_status', { id: 'redis-2' });
    const fromProd = await servers[1]!.callTool('get_order_status', { id: 'redis-2' });
    // Prod ran its own call: no note saying it repeats staging's.
    expect(fromProd.structuredContent).toEqual({ ok: true, id: 'redis-2', status: 'shipped' });
    expect(staging.invocations.get_order_status).toBe(1);
    expect(prod.invocations.get_order_status).toBe(1);
    expect(await client.keys(`${PREFIX}staging:c:*`)).toHaveLength(1);
    expect(await client.keys(`${PREFIX}prod:c:*`)).toHaveLength(1);
    // What the prefix keeps apart: a server under staging's prefix is answered staging's result.
    const underStagings = createFixture();
    const sharing = await serve(
      underStagings.tools,
      [createRepeatGuard({ store: createRedisRepeatStore(client, { prefix: `${PREFIX}staging:` }) })],
      { sessionId: 'shared-session' },
    );
    const shared = await sharing.callTool('get_order_status', { id: 'redis-2' });
    expect((shared.structuredContent as { note: string }).note).toMatch(/^Repeated call: /);
    expect(underStagings.invocations.get_order_status ?? 0).toBe(0);
  });

  it('runs the call when the entry under its key in Redis was damaged or forged, never answering from it', async ({
    skip,
  }) => {
    const client = connected(skip);
    const fixture = createFixture();
    const prefix = `${PREFIX}damaged:`;
    const replica = await serve(fixture.tools, [
      createRepeatGuard({ store: createRedisRepeatStore(client, { prefix }) }),
    ]);
    await replica.callTool('get_order_status', { id: 'redis-3' });
    const [key] = await client.keys(`${prefix}c:*`);
    const stored = JSON.parse((await client.get(key!))!) as Record<string, unknown>;
    // The guard's own format with its counts and times intact, the result damaged (a partial write, a
    // buggy writer, someone with write access to Redis).
    const results: [unknown, boolean][] = [
      [{ content: [null] }, false],
      [{ content: [{ type: 'text', text: 'null' }] }, true],
      [{ content: [{ type: 'text', text: '["forged"]' }] }, true],
      [{ content: [], structuredContent: 'forged' }, false],
      [{ content: [], isError: true, _meta: null }, false],
    ];
    for (const [r, mirrored] of results) {
      const { s: _mirror, ...rest } = stored;
      await client.set(key!, JSON.stringify({ ...rest, r, ...(mirrored && { s: 1 }) }), 'PX', 60_000);
      const result = await replica.callTool('get_order_status', { id: 'redis-3' });
      expect(result.structuredContent).toEqual({ ok: true, id: 'redis-3', status: 'shipped' });
    }
    expect(fixture.invocations.get_order_status).toBe(1 + results.length);
  });

  it('a command Redis refuses reaches the log without the stored result or the key: name, code, message and a summary', async ({
    skip,
  }) => {
    const admin = connected(skip);
    // A user of this test's own that may not SET (NOPERM), as an ACL or a rename would leave it.
    const user = `toolgate-repeat-${randomUUID()}`;
    await admin.call('ACL', 'SETUSER', user, 'on', 'nopass', '~*', '&*', '+@all', '-set');
    const denied = new Redis(REDIS_URL, {
      username: user,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      socketTimeout: 2000,
      retryStrategy: () => null,
    });
    try {
      await denied.connect();
      const fixture = createFixture();
      const entries: LogEntry[] = [];
      const prefix = `${PREFIX}refused:`;
      const replica = await serve(
        fixture.tools,
        [createRepeatGuard({ store: createRedisRepeatStore(denied, { prefix }) })],
        { logger: recordingLogger(entries) },
      );
      const id = 'jane.doe@example.com customer 4711';
      const result = await replica.callTool('get_order_status', { id });
      // The call ran; the write the guard could not make is a store failure, logged once.
      expect(result.structuredContent).toEqual({ ok: true, id, status: 'shipped' });
      const warning = entries.find((entry) => entry.message?.startsWith('repeat-guard: the store failed'));
      expect(warning?.fields).toMatchObject({
        operation: 'set',
        err: {
          name: 'ReplyError',
          message: expect.stringMatching(/^NOPERM /),
          command: {
            name: 'set',
            keyDigest: expect.stringMatching(/^sha256:[\w-]{43}$/),
            valueLength: expect.any(Number),
            options: ['PX', 60_000],
          },
        },
      });
      const logged = JSON.stringify(entries, (_key, value) =>
        value instanceof Error ? { ...value, message: value.message, name: value.name } : value,
      );
      expect(logged).not.toContain('jane.doe');
      expect(logged).not.toContain(prefix);
      expect(logged).not.toContain('"args"');
    } finally {
      denied.disconnect();
      await admin.call('ACL', 'DELUSER', user);
    }
  });

  it('runs the identical call again after the window, when Redis has expired the entry', async ({ skip }) => {
    const client = connected(skip);
    const fixture = createFixture();
    const store = createRedisRepeatStore(client, { prefix: `${PREFIX}window:` });
    const replica = await serve(fixture.tools, [createRepeatGuard({ store, windowMs: 80 })]);
    await replica.callTool('get_order_status', { id: 'redis-2' });
    await replica.callTool('get_order_status', { id: 'redis-2' });
    expect(fixture.invocations.get_order_status).toBe(1);
    await sleep(120);
    expect(await client.keys(`${PREFIX}window:*`)).toEqual([]);
    await replica.callTool('get_order_status', { id: 'redis-2' });
    expect(fixture.invocations.get_order_status).toBe(2);
  });
});
