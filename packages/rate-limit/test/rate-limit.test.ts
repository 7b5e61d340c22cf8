import { ERROR_META_KEY, errorOf } from '@toolgate/core';
import { expectFailure, parseResultText } from '@toolgate/core/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRateLimit, RATE_LIMIT_META_KEY } from '../src/index.js';
import { closeAll, decisionRecorder, runs, serve, token } from './fixtures.js';

beforeEach(() => runs.clear());
afterEach(closeAll);

const alice = token('portal', { customerId: 41 });
const bob = token('portal', { customerId: 42 });

describe('rate-limit over a real client', () => {
  it('lets exactly N calls through, refuses call N+1 with retryAfterMs, the limit in words, _meta and a decision', async () => {
    const recorder = decisionRecorder();
    const limiter = createRateLimit({
      limits: [{ name: 'per-caller-tool', per: 'caller-tool', points: 10, duration: '1m' }],
    });
    const client = await serve([recorder.middleware, limiter], { authInfo: alice });
    for (let i = 0; i < 10; i += 1) {
      expect(parseResultText(await client.callTool('search_orders', { q: `n${i}` }))).toEqual({
        ok: true,
        tool: 'search_orders',
      });
    }
    const refused = await client.callTool('search_orders', { q: 'n10' });
    const envelope = expectFailure(refused);
    expect(envelope).toMatchObject({
      ok: false,
      error: 'rate_limited',
      message: 'Rate limit reached: 10 calls per minute for your account on search_orders.',
      retryable: true,
    });
    expect(envelope.hint).toContain(
      'Do not work around the limit: no parallel calls, no retries with different arguments',
    );
    expect(envelope.retryAfterMs).toBeGreaterThan(55_000);
    expect(envelope.retryAfterMs).toBeLessThanOrEqual(60_000);
    expect(refused._meta?.[RATE_LIMIT_META_KEY]).toEqual({
      limit: 10,
      remaining: 0,
      resetMs: envelope.retryAfterMs,
      name: 'per-caller-tool',
    });
    expect(refused._meta?.[ERROR_META_KEY]).toMatchObject({ error: 'rate_limited' });
    expect(runs.get('search_orders')).toBe(10);
    expect(recorder.calls[9]).toEqual([]);
    expect(recorder.calls[10]).toEqual([
      {
        by: 'rate-limit',
        action: 'limit',
        reason: 'rate_limited',
        detail: {
          name: 'per-caller-tool',
          per: 'caller-tool',
          limit: 10,
          windowSeconds: 60,
          resetMs: envelope.retryAfterMs,
        },
      },
    ]);
    // caller-tool: another tool of the same caller has its own count
    expect(parseResultText(await client.callTool('get_order_status'))).toEqual({
      ok: true,
      tool: 'get_order_status',
    });
  });

  it('lets exactly 10 of 100 parallel calls through a limit of 10', async () => {
    const limiter = createRateLimit({ limits: [{ per: 'caller', points: 10, duration: 60 }] });
    const client = await serve([limiter], { authInfo: alice });
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => client.callTool('search_orders', { q: `p${i}` })),
    );
    expect(results.filter((result) => result.isError !== true)).toHaveLength(10);
    expect(results.filter((result) => errorOf(result)?.error === 'rate_limited')).toHaveLength(90);
    expect(runs.get('search_orders')).toBe(10);
  });

  it('keeps two callers apart: same client id, different claims', async () => {
    const limiter = createRateLimit({ limits: [{ per: 'caller', points: 2, duration: '1h' }] });
    const first = await serve([limiter], { authInfo: alice });
    const second = await serve([limiter], { authInfo: bob });
    await first.callTool('search_orders');
    await first.callTool('get_order_status');
    const third = expectFailure(await first.callTool('search_orders'));
    expect(third.error).toBe('rate_limited');
    expect(third.message).toBe('Rate limit reached: 2 calls per hour for your account across all tools.');
    expect((await second.callTool('search_orders')).isError).toBeUndefined();
    expect((await second.callTool('search_orders')).isError).toBeUndefined();
    expect(expectFailure(await second.callTool('search_orders')).error).toBe('rate_limited');
    expect(runs.get('search_orders')).toBe(3);
  });

  it('answers with the most restrictive limit and names it; shared limits span callers', async () => {
    const limiter = createRateLimit({
      limits: [
        { name: 'per-caller', per: 'caller', points: 5, duration: '1m' },
        { name: 'orders-tool', per: 'tool', points: 3, duration: '1h' },
      ],
    });
    const first = await serve([limiter], { authInfo: alice });
    const second = await serve([limiter], { authInfo: bob });
    await first.callTool('search_orders');
    await first.callTool('search_orders');
    await second.callTool('search_orders');
    const refused = await second.callTool('search_orders');
    expect(expectFailure(refused).message).toBe(
      'Rate limit reached: 3 calls per hour on search_orders for all callers together.',
    );
    expect(refused._meta?.[RATE_LIMIT_META_KEY]).toMatchObject({
      name: 'orders-tool',
      limit: 3,
      remaining: 0,
    });
    expect(expectFailure(refused).retryAfterMs).toBeGreaterThan(3_500_000);
    expect(runs.get('search_orders')).toBe(3);
    // a tool limit is per tool: the other tool still runs
    expect((await second.callTool('get_order_status')).isError).toBeUndefined();
  });

  it('a caller refused by its own limit spends nothing of the shared global budget', async () => {
    const limiter = createRateLimit({
      limits: [
        { per: 'caller', points: 1, duration: 60 },
        { per: 'global', points: 3, duration: 60 },
      ],
    });
    const abuser = await serve([limiter], { authInfo: alice });
    const other = await serve([limiter], { authInfo: bob });
    await abuser.callTool('search_orders');
    for (let i = 0; i < 20; i += 1)
      expect(expectFailureCode(await abuser.callTool('search_orders'))).toBe('rate_limited');
    expect((await other.callTool('search_orders')).isError).toBeUndefined();
    const global = await serve([limiter], { authInfo: token('portal', { customerId: 43 }) });
    expect((await global.callTool('search_orders')).isError).toBeUndefined();
    const last = expectFailure(
      await serve([limiter], { authInfo: token('portal', { customerId: 44 }) }).then((c) =>
        c.callTool('search_orders'),
      ),
    );
    expect(last.message).toBe(
      'Rate limit reached: 3 calls per minute on this server for all callers together.',
    );
  });

  it('applies per-tool limits, lets a tool opt out, and shares a counter when a tool repeats a global limit', async () => {
    const shared = { name: 'per-caller', per: 'caller', points: 3, duration: '1m' } as const;
    const limiter = createRateLimit({
      limits: [shared],
      tools: {
        search_orders: {
          limits: [shared, { name: 'search-burst', per: 'caller-tool', points: 1, duration: '10s' }],
        },
        get_order_status: false,
      },
    });
    const client = await serve([limiter], { authInfo: alice });
    expect((await client.callTool('search_orders')).isError).toBeUndefined();
    const burst = expectFailure(await client.callTool('search_orders'));
    expect(burst.message).toBe(
      'Rate limit reached: 1 call per 10 seconds for your account on search_orders.',
    );
    expect(burst.retryAfterMs).toBeGreaterThan(8_000);
    expect(burst.retryAfterMs).toBeLessThanOrEqual(10_000);
    for (let i = 0; i < 5; i += 1)
      expect((await client.callTool('get_order_status')).isError).toBeUndefined();
    expect(runs.get('get_order_status')).toBe(5);
  });

  it('counts unknown tools and refused arguments against the per-caller limit, and only that one', async () => {
    const recorder = decisionRecorder();
    const limiter = createRateLimit({
      limits: [
        { name: 'per-caller', per: 'caller', points: 3, duration: '1m' },
        // one call of everyone's: the valid call below runs only if the refused ones spent none of it
        { name: 'everyone', per: 'global', points: 1, duration: '1m' },
      ],
    });
    const client = await serve([recorder.middleware, limiter], { authInfo: alice });
    await expect(client.callTool('no_such_tool')).rejects.toThrow(/-32602/);
    expect(expectFailure(await client.callTool('search_orders', { q: 'x'.repeat(50) })).error).toBe(
      'invalid_argument',
    );
    expect((await client.callTool('search_orders')).isError).toBeUndefined();
    const fourth = await client.callTool('search_orders');
    expect(expectFailure(fourth).error).toBe('rate_limited');
    expect(fourth._meta?.[RATE_LIMIT_META_KEY]).toMatchObject({ name: 'per-caller', limit: 3 });
    expect(runs.get('search_orders')).toBe(1);
    // An unknown tool is still answered as the spec asks (-32602); the chain (and audit) saw the limit.
    await expect(client.callTool('no_such_tool')).rejects.toThrow(/-32602/);
    expect(recorder.calls[4]).toMatchObject([
      { by: 'rate-limit', action: 'limit', detail: { name: 'per-caller' } },
    ]);
  });

  it('lets refused calls through uncounted with countRefusedCalls: false', async () => {
    const limiter = createRateLimit({
      limits: [{ per: 'caller', points: 1, duration: 60 }],
      countRefusedCalls: false,
    });
    const client = await serve([limiter], { authInfo: alice });
    for (let i = 0; i < 3; i += 1) {
      expect(expectFailure(await client.callTool('search_orders', { q: 'x'.repeat(50) })).error).toBe(
        'invalid_argument',
      );
    }
    expect((await client.callTool('search_orders')).isError).toBeUndefined();
  });
});

describe('configuration errors', () => {
  it.each([
    [
      { limits: [{ per: 'caller', points: 5, duration: 0.5 }] },
      /duration must be at least 1 second, got 0.5/,
    ],
    [
      { limits: [{ per: 'caller', points: 5, duration: '500ms' }] },
      /duration must be at least 1 second, got 500ms/,
    ],
    [
      { limits: [{ per: 'caller', points: 5, duration: 1.5 }] },
      /duration must be a whole number of seconds, got 1.5/,
    ],
    [
      { limits: [{ per: 'caller', points: 5, duration: '1 minute' }] },
      /duration must be seconds or text like/,
    ],
    [
      { limits: [{ per: 'caller', points: 0, duration: 60 }] },
      /limits\[0\]: points must be a positive integer, got 0/,
    ],
    [
      { limits: [{ per: 'caller', points: 2.5, duration: 60 }] },
      /points must be a positive integer, got 2.5/,
    ],
    [
      { limits: [{ per: 'user', points: 1, duration: 60 }] },
      /per must be one of caller, caller-tool, tool, global/,
    ],
    [{ limits: [{ name: 'a:b', per: 'caller', points: 1, duration: 60 }] }, /name must be 1-64 letters/],
    [{ limits: [] }, /give at least one limit/],
    [
      {
        limits: [{ name: 'x', per: 'caller', points: 1, duration: 60 }],
        tools: { t: { limits: [{ name: 'x', per: 'caller', points: 2, duration: 60 }] } },
      },
      /tools\.t: limits\[0\] reuses the name x for a different limit/,
    ],
    [
      { limits: [{ per: 'caller', points: 1, duration: 60 }], tools: { t: { points: 3 } } },
      /tools\.t has unknown option\(s\) points/,
    ],
    [
      { limits: [{ per: 'caller', points: 1, duration: 60 }], timeoutMs: 0 },
      /timeoutMs must be a finite number of at least 1/,
    ],
    [
      { limits: [{ per: 'caller', points: 1, duration: 60 }], onStoreError: 'maybe' },
      /onStoreError must be 'open' or 'closed'/,
    ],
    [
      { limits: [{ per: 'caller', points: 1, duration: 60 }], keyPrefix: 'a{b}' },
      /keyPrefix must be a string without braces/,
    ],
  ])('refuses %j', (options, message) => {
    expect(() => createRateLimit(options as never)).toThrow(message);
  });

  it('requires keyPrefix with Redis: two servers sharing it under a default prefix would spend one budget', () => {
    const limits = [{ per: 'caller', points: 1, duration: 60 }] as const;
    const redis = { options: { enableOfflineQueue: false, protocol: 2, socketTimeout: 2000 } };
    const missing = new TypeError(
      "createRateLimit: keyPrefix is required with store { redis }: name this server's counters (e.g. keyPrefix: 'orders-prod:rl'), the same on all its replicas and another on every other server sharing the Redis; under one prefix, two servers spend one budget",
    );
    expect(() => createRateLimit({ limits, store: { redis } })).toThrow(missing);
    expect(() => createRateLimit({ limits, keyPrefix: '', store: { redis } })).toThrow(missing);
    expect(() => createRateLimit({ limits, keyPrefix: 'orders-prod:rl', store: { redis } })).not.toThrow();
    // The memory store is this process's alone: its default prefix shares nothing.
    expect(() => createRateLimit({ limits })).not.toThrow();
  });

  it('refuses an ioredis client that would queue offline or speak RESP3', () => {
    const limits = [{ per: 'caller', points: 1, duration: 60 }] as const;
    expect(() =>
      createRateLimit({
        limits,
        keyPrefix: 'test:rl',
        store: { redis: { options: { enableOfflineQueue: true, protocol: 2 } } },
      }),
    ).toThrow('create the ioredis client with enableOfflineQueue: false');
    expect(() =>
      createRateLimit({
        limits,
        keyPrefix: 'test:rl',
        store: { redis: { options: { enableOfflineQueue: false, protocol: 3 } } },
      }),
    ).toThrow('create the ioredis client with protocol: 2');
  });

  it('refuses an ioredis client that would keep a silent connection for good (no socketTimeout)', () => {
    const limits = [{ per: 'caller', points: 1, duration: 60 }] as const;
    // ioredis' own options as new Redis(url, { enableOfflineQueue: false, protocol: 2 }) shows them.
    for (const socketTimeout of [undefined, 0, Number.POSITIVE_INFINITY, '2000']) {
      const options = { enableOfflineQueue: false, protocol: 2, socketTimeout };
      expect(() =>
        createRateLimit({ limits, keyPrefix: 'test:rl', store: { redis: { options } as never } }),
      ).toThrow('create the ioredis client with socketTimeout');
    }
    const single = { options: { enableOfflineQueue: false, protocol: 2, socketTimeout: 2000 } };
    expect(() => createRateLimit({ limits, keyPrefix: 'test:rl', store: { redis: single } })).not.toThrow();
    // A Cluster carries each node's options under redisOptions.
    const cluster = {
      options: { enableOfflineQueue: false, redisOptions: { protocol: 2, socketTimeout: 2000 } },
    };
    expect(() => createRateLimit({ limits, keyPrefix: 'test:rl', store: { redis: cluster } })).not.toThrow();
  });
});

function expectFailureCode(result: Parameters<typeof expectFailure>[0]): string {
  return expectFailure(result).error;
}
