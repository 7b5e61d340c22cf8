// Fault injection: a call cut off while its side effect still runs, a claim whose acknowledgement is
// lost, and a stored entry that is no longer readable. In each, a retry must never run the side effect
// beside (or after) the first run, and must never wait out claimTtlMs for a call that is not running.
import { randomUUID } from 'node:crypto';
import {
  createMemoryStore,
  defineTool,
  fail,
  type KeyValueStore,
  ok,
  type PolicyDecision,
  type ToolDefinition,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import {
  answerTimeoutAfter,
  expectFailure,
  type FaultProxy,
  type LogEntry,
  recordingLogger,
  startFaultProxy,
} from '@toolgate/core/testing';
import { createRedisClient, createRedisStore, redisReady } from '@toolgate/redis-store';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import * as z from 'zod';
import { createIdempotency, IDEMPOTENCY_META } from '../src/index.js';
import { refundTool, serve } from './fixtures.js';
import { reportRedisMissing, TEST_REDIS_URL } from './needs-redis.js';

const refund = { order_id: 'A-1', amount: 25 };
const replayedOf = (result: { _meta?: Record<string, unknown> }) =>
  (result._meta?.[IDEMPOTENCY_META] as { replayed?: boolean } | undefined)?.replayed === true;

/** A refund whose payment call ignores cancellation and finishes only when the test opens the gate. */
function gatedRefundTool(late: 'ok' | 'fail' | 'throw' = 'ok') {
  const runs = { count: 0, running: 0, mostAtOnce: 0 };
  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  let started!: () => void;
  const firstStarted = new Promise<void>((resolve) => {
    started = resolve;
  });
  const tool = defineTool({
    name: 'create_refund',
    description: 'Refund an amount on an order.',
    input: { order_id: z.string(), amount: z.number().positive() },
    handler: async ({ order_id, amount }): Promise<ToolResult> => {
      runs.count += 1;
      runs.running += 1;
      runs.mostAtOnce = Math.max(runs.mostAtOnce, runs.running);
      const run = runs.count;
      started();
      await gate; // the payment provider does not know the MCP call was cancelled
      runs.running -= 1;
      if (run === 1 && late === 'throw') throw new Error('payment provider reset the connection');
      if (run === 1 && late === 'fail') return fail('unavailable', 'The payment service did not answer.');
      return ok({ refund_id: `R-${run}`, order_id, amount });
    },
  }) as ToolDefinition;
  return { tool, runs, open, firstStarted };
}

/** Resolves each time the chain (as audit sees it) has answered a call. */
function chainAnswers(): { middleware: ToolMiddleware; next: () => Promise<PolicyDecision[]> } {
  const waiting: ((decisions: PolicyDecision[]) => void)[] = [];
  const done: PolicyDecision[][] = [];
  return {
    middleware: async (ctx, next) => {
      try {
        return await next();
      } finally {
        const resolve = waiting.shift();
        if (resolve) resolve(ctx.decisions);
        else done.push(ctx.decisions);
      }
    },
    next: () => {
      const ready = done.shift();
      return ready ? Promise.resolve(ready) : new Promise((resolve) => waiting.push(resolve));
    },
  };
}

describe('idempotency: a call cut off while its side effect still runs', () => {
  it('a cancelled call that core abandons keeps its claim: a retry never runs the refund beside the first', async () => {
    const { tool, runs, open, firstStarted } = gatedRefundTool();
    const answers = chainAnswers();
    const client = await serve([tool], {
      middleware: [
        answers.middleware,
        createIdempotency({ pollIntervalMs: 10, tools: { create_refund: { claimTtlMs: 60_000 } } }),
      ],
      abandonAfterMs: 10,
      logger: recordingLogger([]),
    });
    const controller = new AbortController();
    const first = client.callTool('create_refund', refund, { signal: controller.signal });
    await firstStarted;
    controller.abort(new Error('the user pressed stop'));
    await expect(first).rejects.toThrow();
    // Core answered the cancelled call `timeout` without its handler, which still runs.
    await answers.next();
    expect(runs.running).toBe(1);

    // The model retries the refund while the first one is still with the payment provider.
    const retry = client.callTool('create_refund', refund, { timeoutMs: 1500 });
    await expect(retry).rejects.toThrow(/timed out/i);
    expect(runs.count).toBe(1);
    open();
    await answers.next();
    expect(runs.mostAtOnce).toBe(1);
  });

  it('a timeout outcome keeps the claim on a store shared by two replicas: the other replica does not run it again', async () => {
    const { tool, runs, open, firstStarted } = gatedRefundTool();
    const store = createMemoryStore();
    const answers = chainAnswers();
    const replica = () =>
      createIdempotency({ store, pollIntervalMs: 10, tools: { create_refund: { claimTtlMs: 60_000 } } });
    const one = await serve([tool], {
      middleware: [answers.middleware, replica()],
      abandonAfterMs: 10,
      logger: recordingLogger([]),
    });
    const two = await serve([tool], { middleware: [replica()], logger: recordingLogger([]) });
    const controller = new AbortController();
    const first = one.callTool('create_refund', refund, { signal: controller.signal });
    await firstStarted;
    controller.abort(new Error('connection dropped'));
    await expect(first).rejects.toThrow();
    await answers.next();

    const elsewhere = two.callTool('create_refund', refund, { timeoutMs: 1500 });
    await expect(elsewhere).rejects.toThrow(/timed out/i);
    expect(runs.count).toBe(1);
    open();
    expect(runs.mostAtOnce).toBe(1);
  });
});

describe('idempotency: what a timed-out call did after all (core hands over the late outcome)', () => {
  const lateKept = (logs: LogEntry[]) =>
    logs.some((entry) =>
      entry.message?.startsWith('idempotency: a timed-out call finished after its answer'),
    );

  /** A refund cancelled from the client, core answering it `timeout` while its handler still runs. */
  async function abandoned(late: 'ok' | 'fail' | 'throw', inner: ToolMiddleware[] = []) {
    const gated = gatedRefundTool(late);
    const logs: LogEntry[] = [];
    const answers = chainAnswers();
    const client = await serve([gated.tool], {
      middleware: [
        answers.middleware,
        createIdempotency({ pollIntervalMs: 10, tools: { create_refund: { claimTtlMs: 60_000 } } }),
        ...inner,
      ],
      abandonAfterMs: 10,
      logger: recordingLogger(logs),
    });
    const controller = new AbortController();
    const first = client.callTool('create_refund', refund, { signal: controller.signal });
    await gated.firstStarted;
    controller.abort(new Error('the user pressed stop'));
    await expect(first).rejects.toThrow();
    const decisions = await answers.next();
    expect(decisions.some((d) => d.by === 'idempotency' && d.action === 'held')).toBe(true);
    return { ...gated, logs, client };
  }

  it('a late success replaces the held claim: the retry is answered the first run’s refund without running it again', async () => {
    const { runs, open, logs, client } = await abandoned('ok');
    open();
    await vi.waitFor(() => expect(lateKept(logs)).toBe(true));
    const retry = await client.callTool('create_refund', refund, { timeoutMs: 2000 });
    expect(retry.isError).not.toBe(true);
    expect(replayedOf(retry)).toBe(true);
    expect(JSON.stringify(retry.structuredContent)).toContain('R-1');
    expect(runs.count).toBe(1);
  });

  it('a late throw releases the claim: the retry runs the refund (once) instead of waiting out claimTtlMs', async () => {
    const { runs, open, logs, client } = await abandoned('throw');
    open();
    await vi.waitFor(() => expect(lateKept(logs)).toBe(true));
    const retry = await client.callTool('create_refund', refund, { timeoutMs: 2000 });
    expect(retry.isError).not.toBe(true);
    expect(replayedOf(retry)).toBe(false);
    expect(JSON.stringify(retry.structuredContent)).toContain('R-2');
    expect(runs.count).toBe(2);
    expect(runs.mostAtOnce).toBe(1);
  });

  it('a late failure result releases the claim the same way', async () => {
    const { runs, open, logs, client } = await abandoned('fail');
    open();
    await vi.waitFor(() => expect(lateKept(logs)).toBe(true));
    const retry = await client.callTool('create_refund', refund, { timeoutMs: 2000 });
    expect(JSON.stringify(retry.structuredContent)).toContain('R-2');
    expect(runs.count).toBe(2);
  });

  it('a deadline further in (a breaker’s) answered timeout: the handler’s late success is kept all the same', async () => {
    const gated = gatedRefundTool('ok');
    const logs: LogEntry[] = [];
    const client = await serve([gated.tool], {
      middleware: [
        createIdempotency({ pollIntervalMs: 10, tools: { create_refund: { claimTtlMs: 60_000 } } }),
        answerTimeoutAfter(20),
      ],
      logger: recordingLogger(logs),
    });
    const first = await client.callTool('create_refund', refund, { timeoutMs: 5000 });
    expect(expectFailure(first).error).toBe('timeout');
    gated.open();
    await vi.waitFor(() => expect(lateKept(logs)).toBe(true));
    const retry = await client.callTool('create_refund', refund, { timeoutMs: 2000 });
    expect(replayedOf(retry)).toBe(true);
    expect(JSON.stringify(retry.structuredContent)).toContain('R-1');
    expect(gated.runs.count).toBe(1);
  });
});

describe('idempotency: a call that outlived its claim', () => {
  it('its failure does not delete the claim another replica made since: a third call waits for that run instead of running beside it', async () => {
    // Run 1 fails after its claim expired, run 2 (another replica's) is still with the payment provider.
    const runs = { count: 0, running: 0, mostAtOnce: 0 };
    const gates = [deferred(), deferred()];
    const started = [deferred(), deferred()];
    const tool = defineTool({
      name: 'create_refund',
      description: 'Refund an amount on an order.',
      input: { order_id: z.string(), amount: z.number().positive() },
      handler: async ({ order_id, amount }): Promise<ToolResult> => {
        runs.count += 1;
        const run = runs.count;
        runs.running += 1;
        runs.mostAtOnce = Math.max(runs.mostAtOnce, runs.running);
        started[run - 1]?.resolve();
        await gates[run - 1]?.promise;
        runs.running -= 1;
        if (run === 1) return fail('unavailable', 'The payment service did not answer.');
        return ok({ refund_id: `R-${run}`, order_id, amount });
      },
    }) as ToolDefinition;
    const { store, keys, claims } = claimWatchingStore();
    // Replica one's claims last 300 ms (shorter than run 1 takes); replicas two and three's a minute.
    const logs: LogEntry[] = [];
    const one = await serve([tool], {
      middleware: [
        createIdempotency({ store, pollIntervalMs: 10, tools: { create_refund: { claimTtlMs: 300 } } }),
      ],
      logger: recordingLogger(logs),
    });
    const two = await serve([tool], {
      middleware: [
        createIdempotency({ store, pollIntervalMs: 10, tools: { create_refund: { claimTtlMs: 60_000 } } }),
      ],
      logger: recordingLogger([]),
    });
    const three = await serve([tool], {
      middleware: [
        createIdempotency({ store, pollIntervalMs: 10, tools: { create_refund: { claimTtlMs: 60_000 } } }),
      ],
      logger: recordingLogger([]),
    });

    const first = one.callTool('create_refund', refund, { timeoutMs: 10_000 });
    await started[0]!.promise;
    while ((await store.get(keys[0]!)) !== undefined) await new Promise((r) => setTimeout(r, 20));
    // The claim expired while run 1 still runs: replica two claims the key and runs the call again
    // (claimTtlMs shorter than the run, the documented limit).
    const second = two.callTool('create_refund', refund, { timeoutMs: 10_000 });
    await started[1]!.promise;
    gates[0]!.resolve();
    expect(expectFailure(await first)).toMatchObject({ error: 'unavailable' });

    // Run 1's release came after its claim had expired: the key holds run 2's claim, which stays.
    const third = three.callTool('create_refund', refund, { timeoutMs: 10_000 });
    while (claims.length < 3) await new Promise((r) => setTimeout(r, 5));
    expect(claims).toEqual([true, true, false]);
    gates[1]!.resolve();
    const answered = await second;
    expect(answered.structuredContent).toEqual({ ok: true, refund_id: 'R-2', ...refund });
    const replayed = await third;
    expect(replayed.structuredContent).toEqual(answered.structuredContent);
    expect(replayedOf(replayed)).toBe(true);
    expect(runs.count).toBe(2);
    expect(logs).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        message: expect.stringMatching(/ran past its claim/),
      }),
    );
  });
});

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

/** A memory store that notes each key a claim was written under, and whether each claim was won. */
function claimWatchingStore(): { store: KeyValueStore; keys: string[]; claims: boolean[] } {
  const inner = createMemoryStore();
  const keys: string[] = [];
  const claims: boolean[] = [];
  return {
    store: {
      ...inner,
      async setIfAbsent(key, value, ttlMs, op) {
        if (!keys.includes(key)) keys.push(key);
        const won = await inner.setIfAbsent(key, value, ttlMs, op);
        claims.push(won);
        return won;
      },
    },
    keys,
    claims,
  };
}

/**
 * A memory store whose claim writes land but whose answer is lost `lose` times (a cut connection), and
 * whose next `readsFailing` reads fail (the connection is still being made again).
 */
function ackLosingStore(lose: number, readsFailing = 0): { store: KeyValueStore; lost: () => number } {
  const inner = createMemoryStore();
  let lost = 0;
  let failing = 0;
  return {
    store: {
      ...inner,
      async setIfAbsent(key, value, ttlMs, op) {
        const written = await inner.setIfAbsent(key, value, ttlMs, op);
        if (lost < lose) {
          lost += 1;
          failing = readsFailing;
          throw new Error('Connection is closed.');
        }
        return written;
      },
      async get(key, op) {
        if (failing > 0) {
          failing -= 1;
          throw new Error("Stream isn't writeable and enableOfflineQueue options is false");
        }
        return inner.get(key, op);
      },
    },
    lost: () => lost,
  };
}

describe('idempotency: a claim written but its acknowledgement lost', () => {
  it('the call finds its own claim and runs once; a retry replays instead of waiting out claimTtlMs', async () => {
    const { tool, runs } = refundTool({ delayMs: 1 });
    const { store, lost } = ackLosingStore(1);
    const client = await serve([tool], {
      middleware: [createIdempotency({ store, pollIntervalMs: 10, tools: { create_refund: {} } })],
      logger: recordingLogger([]),
    });
    const first = await client.callTool('create_refund', refund, { timeoutMs: 2000 });
    expect(lost()).toBe(1);
    expect(first.structuredContent).toEqual({ ok: true, refund_id: 'R-1', ...refund });
    const retry = await client.callTool('create_refund', refund, { timeoutMs: 2000 });
    expect(retry.structuredContent).toEqual(first.structuredContent);
    expect(replayedOf(retry)).toBe(true);
    expect(runs.count).toBe(1);
  });

  it('the store unreadable right after: the call is refused unavailable, its stray claim is removed once the store answers, and a retry runs', async () => {
    const { tool, runs } = refundTool({ delayMs: 1 });
    const { store, lost } = ackLosingStore(1, 1);
    const client = await serve([tool], {
      middleware: [
        createIdempotency({
          store,
          pollIntervalMs: 10,
          tools: { create_refund: { claimTtlMs: 60_000 } },
        }),
      ],
      logger: recordingLogger([]),
    });
    const first = await client.callTool('create_refund', refund, { timeoutMs: 2000 });
    expect(lost()).toBe(1);
    expect(expectFailure(first)).toMatchObject({ error: 'unavailable', retryable: true });
    expect(runs.count).toBe(0);
    // Without the removal the retry would wait for the stray claim's 60 s and time out here.
    const retry = await client.callTool('create_refund', refund, { timeoutMs: 2000 });
    expect(retry.structuredContent).toEqual({ ok: true, refund_id: 'R-1', ...refund });
    expect(runs.count).toBe(1);
  });
});

/** A memory store that remembers the keys written, so a test can damage what is stored under them. */
function inspectableStore(): { store: KeyValueStore; keys: string[] } {
  const inner = createMemoryStore();
  const keys: string[] = [];
  return {
    store: {
      ...inner,
      async set(key, value, ttlMs, op) {
        if (!keys.includes(key)) keys.push(key);
        return inner.set(key, value, ttlMs, op);
      },
    },
    keys,
  };
}

describe('idempotency: a stored entry that is no longer valid', () => {
  const damaged = [
    ['truncated JSON', (text: string) => text.slice(0, text.length - 7)],
    ['a result that is not a tool result', (text: string) => text.replace(/"r":\{.*\}\}$/, '"r":"oops"}')],
    ['an unknown state', (text: string) => text.replace('"s":"done"', '"s":"paused"')],
  ] as const;
  for (const [name, damage] of damaged) {
    it(`${name}: a retry is answered at once, fail closed, runs nothing, and the log says so`, async () => {
      const { tool, runs } = refundTool({ delayMs: 1 });
      const { store, keys } = inspectableStore();
      const log: LogEntry[] = [];
      const client = await serve([tool], {
        middleware: [createIdempotency({ store, pollIntervalMs: 10, tools: { create_refund: {} } })],
        logger: recordingLogger(log),
      });
      await client.callTool('create_refund', refund);
      expect(keys).toHaveLength(1);
      const text = (await store.get(keys[0]!)) as string;
      const bad = damage(text);
      expect(bad).not.toBe(text);
      await store.set(keys[0]!, bad, 60_000);

      const retry = await client.callTool('create_refund', refund, { timeoutMs: 2000 });
      expect(expectFailure(retry)).toMatchObject({ error: 'unavailable', retryable: true });
      expect(runs.count).toBe(1);
      expect(log.map((entry) => entry.message)).toContain(
        'idempotency: the store failed (get); calls are refused unavailable',
      );
    });
  }
});

/** A promise the test settles by hand. */
function signal(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((settle) => {
    resolve = settle;
  });
  return { promise, resolve };
}

if (TEST_REDIS_URL === undefined) {
  reportRedisMissing('the idempotency fault tests on a real Redis (lost replies, damaged entries)');
} else {
  const url = TEST_REDIS_URL;
  describe('idempotency faults on a real Redis', () => {
    const prefix = `toolgate-faults:${randomUUID()}:`;
    let admin!: Redis;
    const clients: Redis[] = [];
    beforeAll(async () => {
      admin = createRedisClient(url, { logger: recordingLogger([]) });
      await redisReady(admin);
    });
    afterAll(async () => {
      const keys = await admin.keys(`${prefix}*`);
      if (keys.length > 0) await admin.del(...keys);
      await admin.quit();
      for (const client of clients) client.disconnect();
    });

    it('replies lost while the claim is written: the call runs at most once and a retry after the outage replays or runs, never waits out claimTtlMs', async () => {
      const target = new URL(url);
      const proxy: FaultProxy = await startFaultProxy({
        host: target.hostname,
        port: Number(target.port || 6379),
      });
      try {
        target.port = String(proxy.port);
        const redis = createRedisClient(target.toString(), { logger: recordingLogger([]) });
        clients.push(redis);
        await redisReady(redis);
        const { tool, runs } = refundTool({ delayMs: 1 });
        const own = `${prefix}ack:`;
        const client = await serve([tool], {
          middleware: [
            createIdempotency({
              store: createRedisStore(redis, { prefix: own }),
              pollIntervalMs: 10,
              tools: { create_refund: {} },
            }),
          ],
          logger: recordingLogger([]),
        });
        const losing = proxy.loseReplies(150);
        const first = await client.callTool('create_refund', refund, { timeoutMs: 3000 });
        await losing;
        // The claim landed in Redis whatever the call was told.
        expect(await admin.keys(`${own}*`)).toHaveLength(1);
        await redisReady(redis, 3000);
        const retry = await client.callTool('create_refund', refund, { timeoutMs: 3000 });
        expect(retry.structuredContent).toMatchObject({ ok: true, refund_id: 'R-1' });
        expect(runs.count).toBe(1);
        if (first.isError !== true) expect(replayedOf(retry)).toBe(true);
      } finally {
        await proxy.close();
      }
    });

    it('a damaged entry in Redis is answered unavailable at once, nothing runs', async () => {
      const { tool, runs } = refundTool({ delayMs: 1 });
      const own = `${prefix}damaged:`;
      const client = await serve([tool], {
        middleware: [
          createIdempotency({
            store: createRedisStore(admin, { prefix: own }),
            pollIntervalMs: 10,
            tools: { create_refund: {} },
          }),
        ],
        logger: recordingLogger([]),
      });
      await client.callTool('create_refund', refund);
      const [key] = await admin.keys(`${own}*`);
      await admin.set(key!, '{"s":"done","a":', 'PX', 60_000);
      const retry = await client.callTool('create_refund', refund, { timeoutMs: 2000 });
      expect(expectFailure(retry).error).toBe('unavailable');
      expect(runs.count).toBe(1);
    });

    it('a release (DEL) whose reply was lost with its connection is not sent again after the reconnect, where it would delete the claim of a retry running on another replica', async () => {
      const target = new URL(url);
      const proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port || 6379) });
      try {
        target.port = String(proxy.port);
        // Replica one reaches Redis through the proxy, replica two directly; each has the shared client.
        const viaProxy = createRedisClient(target.toString(), { logger: recordingLogger([]) });
        const direct = createRedisClient(url, { logger: recordingLogger([]) });
        clients.push(viaProxy, direct);
        await Promise.all([redisReady(viaProxy), redisReady(direct)]);

        // Run 1 fails once the test lets it; run 2 succeeds once the test lets it; any later run at once.
        const runs = { count: 0, running: 0, mostAtOnce: 0 };
        const gates = [signal(), signal()];
        const started = [signal(), signal(), signal()];
        const tool = defineTool({
          name: 'create_refund',
          description: 'Refund an amount on an order.',
          input: { order_id: z.string(), amount: z.number().positive() },
          handler: async ({ order_id, amount }): Promise<ToolResult> => {
            const run = runs.count;
            runs.count += 1;
            runs.running += 1;
            runs.mostAtOnce = Math.max(runs.mostAtOnce, runs.running);
            started[run]?.resolve();
            await gates[run]?.promise;
            runs.running -= 1;
            if (run === 0) return fail('unavailable', 'The payment service did not answer.');
            return ok({ refund_id: `R-${run + 1}`, order_id, amount });
          },
        }) as ToolDefinition;
        const own = `${prefix}release:`;
        // Resolves when replica one reads a running claim of another call (it then waits for it).
        const sawClaim = signal();
        const watched = (store: KeyValueStore): KeyValueStore => ({
          ...store,
          async get(key, op) {
            const value = await store.get(key, op);
            if (value?.startsWith('{"s":"running"')) sawClaim.resolve();
            return value;
          },
        });
        const replica = (store: KeyValueStore) =>
          createIdempotency({ store, pollIntervalMs: 10, tools: { create_refund: { claimTtlMs: 60_000 } } });
        const one = await serve([tool], {
          middleware: [replica(watched(createRedisStore(viaProxy, { prefix: own })))],
          logger: recordingLogger([]),
        });
        const two = await serve([tool], {
          middleware: [replica(createRedisStore(direct, { prefix: own }))],
          logger: recordingLogger([]),
        });

        // Run 1 fails; its release reaches Redis and deletes the claim, but its reply never comes back.
        // The connection then closes: the store resets it when the release's time limit passes, which
        // may come before or after the proxy's cut below, so the close is awaited from here.
        const closed = new Promise((resolve) => viaProxy.once('close', resolve));
        const first = one.callTool('create_refund', refund, { timeoutMs: 5000 });
        await started[0]!.promise;
        proxy.silenceAfter((chunk) => chunk.toString('latin1').startsWith('*2\r\n$3\r\ndel\r\n'));
        gates[0]!.resolve();
        expect(expectFailure(await first).error).toBe('unavailable');

        // The model retries on replica two, which claims the key and runs the refund (run 2).
        const retry = two.callTool('create_refund', refund, { timeoutMs: 5000 });
        await started[1]!.promise;

        // Replica one's connection drops (the store's own reset, or else the cut); its client connects
        // again (and sends what it sends then).
        proxy.cut();
        await closed;
        await redisReady(viaProxy, 3000);
        await viaProxy.ping();

        // Another retry on replica one while run 2 still runs: it waits for run 2, never runs beside it.
        const again = one.callTool('create_refund', refund, { timeoutMs: 5000 });
        await Promise.race([sawClaim.promise, started[2]!.promise]);
        gates[1]!.resolve();
        expect((await retry).structuredContent).toEqual({ ok: true, refund_id: 'R-2', ...refund });
        const answer = await again;
        expect(answer.structuredContent).toEqual({ ok: true, refund_id: 'R-2', ...refund });
        expect(replayedOf(answer)).toBe(true);
        expect(runs).toEqual({ count: 2, running: 0, mostAtOnce: 1 });
      } finally {
        await proxy.close();
      }
    });
  });
}
