// Red team (session 27): what one caller can make the store hold, and a lost claim's removal that must
// never outlive the claim. Real round trips through the SDK client; the Redis cases on a real Redis.
import { randomUUID } from 'node:crypto';
import {
  createMemoryStore,
  defineTool,
  type KeyValueStore,
  ok,
  type PolicyDecision,
  type ToolDefinition,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import { expectFailure, recordingLogger } from '@toolgate/core/testing';
import { createRedisClient, createRedisStore, redisReady } from '@toolgate/redis-store';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createIdempotency, IDEMPOTENCY_META, type IdempotencyMiddleware } from '../src/index.js';
import { serve, sleep } from './fixtures.js';
import { reportRedisMissing, TEST_REDIS_URL } from './needs-redis.js';

const closers: IdempotencyMiddleware[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((idempotency) => idempotency.close()));
});
const kept = (middleware: IdempotencyMiddleware) => {
  closers.push(middleware);
  return middleware;
};

/** A refund that echoes the model's message in its result, as tools often echo what they were asked. */
function notedRefundTool() {
  const runs = { count: 0 };
  const tool = defineTool({
    name: 'create_refund',
    description: 'Refund an amount on an order, with a message for the customer.',
    input: { order_id: z.string(), amount: z.number().positive(), message: z.string().max(1_000_000) },
    handler: async ({ order_id, amount, message }) => {
      runs.count += 1;
      return ok({ refund_id: `R-${runs.count}`, order_id, amount, message });
    },
  }) as ToolDefinition;
  return { tool, runs };
}

/** A memory store that lets the test read every value written (what the store holds). */
function inspectableStore(): { store: KeyValueStore; inner: KeyValueStore; keys: Set<string> } {
  const inner = createMemoryStore();
  const keys = new Set<string>();
  const store: KeyValueStore = {
    ...inner,
    async setIfAbsent(key, value, ttlMs, op) {
      keys.add(key);
      return inner.setIfAbsent(key, value, ttlMs, op);
    },
    async set(key, value, ttlMs, op) {
      keys.add(key);
      return inner.set(key, value, ttlMs, op);
    },
  };
  return { store, inner, keys };
}

function decisionLog(): { middleware: ToolMiddleware; calls: PolicyDecision[][] } {
  const calls: PolicyDecision[][] = [];
  return {
    calls,
    middleware: async (ctx, next) => {
      try {
        return await next();
      } finally {
        calls.push(ctx.decisions);
      }
    },
  };
}

const big = (i: number) => ({ order_id: `A-${i}`, amount: 25, message: 'n'.repeat(200_000) });

describe('idempotency red team: a model cannot fill the store with large results', () => {
  it('a result longer than maxResultSize is answered as it ran, only a small marker is kept, and a retry is told it ran', async () => {
    const { tool, runs } = notedRefundTool();
    const { store, inner, keys } = inspectableStore();
    const decisions = decisionLog();
    const log = recordingLogger([]);
    const client = await serve([tool], {
      middleware: [decisions.middleware, kept(createIdempotency({ store, tools: { create_refund: {} } }))],
      logger: log,
    });
    // 20 distinct calls, each echoing 200,000 characters: uncapped, the store held 4 million characters.
    for (let i = 0; i < 20; i += 1) {
      const result = await client.callTool('create_refund', big(i));
      expect(result.structuredContent).toMatchObject({ ok: true, refund_id: `R-${i + 1}` });
      expect((result.structuredContent as { message: string }).message).toHaveLength(200_000);
    }
    expect(decisions.calls[0]).toEqual([
      { by: 'idempotency', action: 'claimed', detail: { key: expect.any(String), explicit: false } },
      {
        by: 'idempotency',
        action: 'result-not-kept',
        reason: 'too large',
        detail: { key: expect.any(String), marker: 'written' },
      },
    ]);
    let held = 0;
    for (const key of keys) held += ((await inner.get(key)) ?? '').length;
    expect(keys.size).toBe(20);
    expect(held).toBeLessThan(20 * 200);
    // The retry never runs the refund again: it is told the call ran.
    const retry = await client.callTool('create_refund', big(0), { timeoutMs: 2000 });
    expect(expectFailure(retry)).toMatchObject({ error: 'repeated_call', retryable: false });
    expect(retry._meta?.[IDEMPOTENCY_META]).toMatchObject({
      replayed: true,
      resultKept: false,
      outcome: 'ok',
    });
    expect(runs.count).toBe(20);
  });

  it('a small result is still kept and replayed; a tool may raise maxResultSize for its own results', async () => {
    const { tool, runs } = notedRefundTool();
    const small = { order_id: 'A-1', amount: 25, message: 'thanks' };
    const client = await serve([tool], {
      middleware: [kept(createIdempotency({ tools: { create_refund: {} } }))],
      logger: recordingLogger([]),
    });
    await client.callTool('create_refund', small);
    const again = await client.callTool('create_refund', small);
    expect(again.structuredContent).toMatchObject({ refund_id: 'R-1', message: 'thanks' });
    expect(runs.count).toBe(1);

    const raised = notedRefundTool();
    const roomy = await serve([raised.tool], {
      middleware: [kept(createIdempotency({ tools: { create_refund: { maxResultSize: 1_000_000 } } }))],
      logger: recordingLogger([]),
    });
    await roomy.callTool('create_refund', big(1));
    const replay = await roomy.callTool('create_refund', big(1));
    expect(replay.structuredContent).toMatchObject({ refund_id: 'R-1' });
    expect((replay.structuredContent as { message: string }).message).toHaveLength(200_000);
    expect(raised.runs.count).toBe(1);
    expect(() => createIdempotency({ tools: { create_refund: { maxResultSize: 0 } } })).toThrow(
      /maxResultSize must be a positive integer/,
    );
  });
});

/**
 * Replica A's view of the shared store: its first claim lands but the answer never comes back (a lost
 * reply), reads hang once and then fail until `backAt`; after it, a read sees the key at once and
 * answers `slowMs` later (a busy Redis: still within storeTimeoutMs). Deletes land as sent.
 */
function lostReplyView(inner: KeyValueStore, backAt: () => number, slowMs: number): KeyValueStore {
  let claims = 0;
  let hung = false;
  // A store without deleteIfEquals (a third-party one): the removal reads the claim, then deletes it,
  // so only its time guard keeps it from deleting a claim made since.
  const { deleteIfEquals: _compareAndDelete, ...plain } = inner;
  return {
    ...plain,
    async setIfAbsent(key, value, ttlMs, op) {
      claims += 1;
      const written = await inner.setIfAbsent(key, value, ttlMs, op);
      if (claims === 1) return new Promise<boolean>(() => {});
      return written;
    },
    async get(key, op) {
      if (Date.now() < backAt()) {
        if (!hung) {
          hung = true;
          return new Promise<string | undefined>(() => {});
        }
        throw new Error('Connection is closed.');
      }
      const value = await inner.get(key, op);
      await sleep(slowMs);
      return value;
    },
  };
}

describe('idempotency red team: a lost claim is never removed after it could have expired', () => {
  it("the removal of a claim whose reply was lost stops in time: it never deletes another replica's claim made since, so no third call runs beside it", async () => {
    const runs = { count: 0, running: 0, mostAtOnce: 0 };
    const tool = defineTool({
      name: 'create_refund',
      description: 'Refund an amount on an order.',
      input: { order_id: z.string(), amount: z.number().positive() },
      handler: async ({ order_id, amount }): Promise<ToolResult> => {
        runs.count += 1;
        runs.running += 1;
        runs.mostAtOnce = Math.max(runs.mostAtOnce, runs.running);
        await sleep(700); // the payment provider
        runs.running -= 1;
        return ok({ refund_id: `R-${runs.count}`, order_id, amount });
      },
    }) as ToolDefinition;
    const inner = createMemoryStore();
    const storeTimeoutMs = 200;
    const claimTtlMs = 1500;
    let t0 = 0;
    // Replica A: claim written, reply lost at t0 + 200, the read hangs to t0 + 400; the claim's removal
    // is then tried after 16, 32, 64, ... ms while the store fails, until t0 + 1000. A try at about
    // t0 + 1408 would read its own claim (it expires at t0 + 1500) and delete it at about t0 + 1540,
    // after B claimed the key: a removal must stop 2 × storeTimeoutMs before the claim can expire.
    const a = kept(
      createIdempotency({
        store: lostReplyView(inner, () => t0 + 1000, 130),
        storeTimeoutMs,
        pollIntervalMs: 16,
        tools: { create_refund: { claimTtlMs } },
      }),
    );
    const healthy = (pollIntervalMs: number) =>
      kept(
        createIdempotency({
          store: inner,
          storeTimeoutMs,
          pollIntervalMs,
          tools: { create_refund: { claimTtlMs } },
        }),
      );
    const logger = recordingLogger([]);
    const replicaA = await serve([tool], { middleware: [a], logger });
    const replicaB = await serve([tool], { middleware: [healthy(2)], logger });
    const replicaC = await serve([tool], { middleware: [healthy(5)], logger });
    const refund = { order_id: 'A-1', amount: 25 };

    t0 = Date.now();
    const first = replicaA.callTool('create_refund', refund, { timeoutMs: 5000 });
    await sleep(300);
    // B finds A's stray claim, waits for it to expire (t0 + 1500), then claims and runs.
    const second = replicaB.callTool('create_refund', refund, { timeoutMs: 5000 });
    expect(expectFailure(await first)).toMatchObject({ error: 'unavailable', retryable: true });
    await sleep(Math.max(0, t0 + 1700 - Date.now()));
    expect(runs.running).toBe(1);
    // C, while B's refund still runs: it must wait for B's result, never run beside it.
    const third = await replicaC.callTool('create_refund', refund, { timeoutMs: 5000 });
    const b = await second;
    expect(b.structuredContent).toMatchObject({ ok: true, refund_id: 'R-1' });
    expect(third.structuredContent).toEqual(b.structuredContent);
    expect(third._meta?.[IDEMPOTENCY_META]).toMatchObject({ replayed: true });
    expect(runs.mostAtOnce).toBe(1);
    expect(runs.count).toBe(1);
  }, 15_000);
});

if (TEST_REDIS_URL === undefined) {
  reportRedisMissing('the idempotency tests of result size on a shared Redis');
} else {
  const url = TEST_REDIS_URL;
  describe('idempotency red team: large results on replicas sharing Redis', () => {
    const prefix = `toolgate-bounds:${randomUUID()}:`;
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

    it('Redis holds a small marker, not the 200,000-character result, and the other replica is told the call ran', async () => {
      const { tool, runs } = notedRefundTool();
      const replicas = await Promise.all(
        [createRedisClient(url), createRedisClient(url)].map(async (redis) => {
          clients.push(redis);
          await redisReady(redis);
          return serve([tool], {
            middleware: [
              kept(
                createIdempotency({
                  store: createRedisStore(redis, { prefix }),
                  pollIntervalMs: 10,
                  tools: { create_refund: { claimTtlMs: 60_000 } },
                }),
              ),
            ],
            logger: recordingLogger([]),
          });
        }),
      );
      const first = await replicas[0]!.callTool('create_refund', big(7));
      expect(first.structuredContent).toMatchObject({ ok: true, refund_id: 'R-1' });
      const [key] = await admin.keys(`${prefix}*`);
      expect(await admin.strlen(key!)).toBeLessThan(200);
      expect(JSON.parse((await admin.get(key!)) as string)).toMatchObject({ s: 'ran', o: 'ok' });
      expect(await admin.pttl(key!)).toBeGreaterThan(60_000); // windowMs, not the claim's 60 s
      const retry = await replicas[1]!.callTool('create_refund', big(7), { timeoutMs: 2000 });
      expect(expectFailure(retry)).toMatchObject({ error: 'repeated_call', retryable: false });
      expect(runs.count).toBe(1);
    });
  });
}
