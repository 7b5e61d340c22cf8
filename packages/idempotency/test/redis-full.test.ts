// A real Redis at its maxmemory (noeviction): a flood fills it, and idempotency on it refuses a new call
// rate_limited without running it, even under onStoreFailure 'open' (redis-store reports the OOM reply as
// core's StoreFullError), while a repeat of a call already stored is answered from what its key holds
// (Redis refuses even a SET NX of a key that exists with OOM). maxmemory is server-wide: the test starts
// a redis-server of its own, so the shared one (and every test using it) never runs full.
import {
  defineTool,
  isStoreFullError,
  type KeyValueStore,
  ok,
  type ToolDefinition,
  type ToolResult,
} from '@toolgate/core';
import { expectFailure, recordingLogger, serveTools, type TestClient } from '@toolgate/core/testing';
import { createRedisStore } from '@toolgate/redis-store';
import { fillRedis, type OwnRedisServer, startOwnRedis } from '@toolgate/redis-store/testing';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import * as z from 'zod';
import { createIdempotency, IDEMPOTENCY_META, type IdempotencyMiddleware } from '../src/index.js';
import { refundTool, serve } from './fixtures.js';
import { reportRedisMissing, TEST_REDIS_URL } from './needs-redis.js';

if (TEST_REDIS_URL === undefined) {
  reportRedisMissing('the Redis-out-of-memory test (it starts a redis-server of its own)');
} else {
  // maxmemory is server-wide: a Redis of its own, so the shared one (and the tests using it) never
  // runs full.
  describe('a real Redis at its maxmemory (noeviction)', () => {
    let own: OwnRedisServer;
    beforeAll(async () => {
      own = await startOwnRedis({ maxmemory: '3mb' });
    }, 20_000);
    const open: TestClient[] = [];
    afterAll(async () => {
      await Promise.all(open.map((served) => served.close()));
      await own?.close();
    });

    it('a flood fills it: new writes reject with StoreFullError, reads and deletes still work', async () => {
      const store = createRedisStore(own.client, { prefix: 'full:' });
      await store.set('{victim}:result', 'kept', 60_000);
      const refused = await fillRedis(own.client);
      expect(isStoreFullError(refused)).toBe(true);
      expect(refused).toMatchObject({ name: 'StoreFullError', reason: 'store' });
      // The victim's entry is still there (noeviction), and reads and deletes are not refused.
      expect(await store.get('{victim}:result')).toBe('kept');
      await expect(store.set('{victim}:other', 'v', 60_000)).rejects.toSatisfy(isStoreFullError);
      expect(await store.delete('{victim}:result')).toBe(true);
    }, 60_000);

    it('idempotency on the full Redis refuses a new call rate_limited, even under onStoreFailure open', async () => {
      // The same server (held past its maxmemory by the test above, or filled here when run alone).
      expect(isStoreFullError(await fillRedis(own.client))).toBe(true);
      let runs = 0;
      const refund = defineTool({
        name: 'create_refund',
        description: 'Refunds an order.',
        input: { order_id: z.string(), amount: z.number() },
        handler: async ({ order_id, amount }) => {
          runs += 1;
          return ok({ refund_id: `R-${runs}`, order_id, amount });
        },
      });
      const served = await serveTools([refund], {
        middleware: [
          createIdempotency({
            store: createRedisStore(own.client, { prefix: 'full:' }),
            onStoreFailure: 'open',
            tools: { create_refund: {} },
          }),
        ],
        logger: recordingLogger([]),
      });
      open.push(served);
      const result = await served.callTool('create_refund', { order_id: 'A-1', amount: 5 });
      const failure = expectFailure(result);
      expect(failure.error).toBe('rate_limited');
      expect(failure.message).toContain('did not run');
      expect(runs).toBe(0);
    });
  });

  describe('a repeat on a Redis at its maxmemory (noeviction) is answered from what its key holds', () => {
    let own: OwnRedisServer;
    const middlewares: IdempotencyMiddleware[] = [];
    beforeAll(async () => {
      own = await startOwnRedis({ maxmemory: '3mb' });
    }, 20_000);
    beforeEach(async () => {
      // Room again: the previous test left this server full.
      await own.client.flushall();
      await own.client.config('SET', 'maxmemory', '3mb');
    });
    afterEach(async () => {
      await Promise.all(middlewares.splice(0).map((idempotency) => idempotency.close()));
    });
    afterAll(async () => {
      await own?.close();
    });

    /** A replica: its own middleware (and in-flight map) on the full server, under `prefix`. */
    const replica = (tool: ToolDefinition, options: { claimTtlMs?: number; store?: KeyValueStore } = {}) => {
      const idempotency = createIdempotency({
        store: options.store ?? createRedisStore(own.client, { prefix: 'repeat:' }),
        pollIntervalMs: 10,
        tools: { create_refund: { claimTtlMs: options.claimTtlMs ?? 60_000 } },
      });
      middlewares.push(idempotency);
      return serve([tool], { middleware: [idempotency], logger: recordingLogger([]) });
    };
    const refund = { order_id: 'A-1', amount: 25 };

    it('a finished call: a repeat on either replica replays its result instead of rate_limited', async () => {
      const { tool, runs } = refundTool();
      const [one, two] = [await replica(tool), await replica(tool)];
      const first = await one.callTool('create_refund', refund);
      expect(first.structuredContent).toEqual({ ok: true, refund_id: 'R-1', order_id: 'A-1', amount: 25 });
      expect(isStoreFullError(await fillRedis(own.client))).toBe(true);
      // Full indeed: a new call needs a new key and is refused without running.
      const other = await one.callTool('create_refund', { order_id: 'B-2', amount: 5 });
      expect(expectFailure(other)).toMatchObject({ error: 'rate_limited', retryable: true });
      for (const client of [one, two]) {
        const repeat = await client.callTool('create_refund', refund);
        expect(repeat.isError).toBeUndefined();
        expect(repeat.structuredContent).toEqual(first.structuredContent);
        expect(repeat._meta?.[IDEMPOTENCY_META]).toEqual({ replayed: true, key: expect.any(String) });
      }
      expect(runs.count).toBe(1);
    }, 30_000);

    it("a call that ran but whose result was not kept: a repeat is told it already ran ('ran' marker)", async () => {
      let runs = 0;
      const tool = defineTool({
        name: 'create_refund',
        description: 'Refund an amount on an order.',
        input: { order_id: z.string(), amount: z.number().positive() },
        handler: async ({ order_id }): Promise<ToolResult> => {
          runs += 1;
          // A BigInt: not JSON, so the middleware keeps a 'ran' marker instead of the result.
          return {
            content: [{ type: 'text', text: `Refunded ${order_id}.` }],
            structuredContent: { ok: true, ledger_entry: 9007199254740993n },
          };
        },
      }) as ToolDefinition;
      const [one, two] = [await replica(tool), await replica(tool)];
      await one.callTool('create_refund', refund);
      const [key] = await own.client.keys('repeat:*');
      expect(JSON.parse((await own.client.get(key!)) as string)).toMatchObject({ s: 'ran', o: 'ok' });
      expect(isStoreFullError(await fillRedis(own.client))).toBe(true);
      const repeat = await two.callTool('create_refund', refund);
      expect(expectFailure(repeat)).toMatchObject({
        error: 'repeated_call',
        retryable: false,
        message: expect.stringMatching(
          /^This call already ran at .+ and succeeded; its result could not be kept/,
        ),
      });
      expect(repeat._meta?.[IDEMPOTENCY_META]).toMatchObject({
        replayed: true,
        resultKept: false,
        outcome: 'ok',
      });
      expect(runs).toBe(1);
    }, 30_000);

    it("another replica's call still running: a repeat waits as for a running call, then unavailable (never run, never rate_limited)", async () => {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let started!: () => void;
      const running = new Promise<void>((resolve) => {
        started = resolve;
      });
      let runs = 0;
      const tool = defineTool({
        name: 'create_refund',
        description: 'Refund an amount on an order.',
        input: { order_id: z.string(), amount: z.number().positive() },
        handler: async ({ order_id, amount }) => {
          runs += 1;
          started();
          await gate;
          return ok({ refund_id: `R-${runs}`, order_id, amount });
        },
      }) as ToolDefinition;
      const one = await replica(tool);
      const two = await replica(tool, { claimTtlMs: 300 });
      const first = one.callTool('create_refund', refund);
      await running;
      expect(isStoreFullError(await fillRedis(own.client))).toBe(true);
      const repeat = await two.callTool('create_refund', refund);
      expect(expectFailure(repeat)).toEqual({
        ok: false,
        error: 'unavailable',
        message: 'An identical call is still running; this one did not run again.',
        hint: 'Wait, then retry once with the same arguments to get its result.',
        retryable: true,
        retryAfterMs: 1000,
      });
      release();
      expect((await first).structuredContent).toMatchObject({ ok: true, refund_id: 'R-1' });
      expect(runs).toBe(1);
    }, 30_000);

    it('a repeat polling a running claim on the full Redis replays the result once there is room and it is stored', async () => {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let started!: () => void;
      const running = new Promise<void>((resolve) => {
        started = resolve;
      });
      let runs = 0;
      const tool = defineTool({
        name: 'create_refund',
        description: 'Refund an amount on an order.',
        input: { order_id: z.string(), amount: z.number().positive() },
        handler: async ({ order_id, amount }) => {
          runs += 1;
          started();
          await gate;
          return ok({ refund_id: `R-${runs}`, order_id, amount });
        },
      }) as ToolDefinition;
      const redisStore = createRedisStore(own.client, { prefix: 'repeat:' });
      let reads = 0;
      const counted: KeyValueStore = {
        ...redisStore,
        get: (key, op) => {
          reads += 1;
          return redisStore.get(key, op);
        },
      };
      const one = await replica(tool);
      const two = await replica(tool, { store: counted });
      const first = one.callTool('create_refund', refund);
      await running;
      expect(isStoreFullError(await fillRedis(own.client))).toBe(true);
      const repeat = two.callTool('create_refund', refund, { timeoutMs: 20_000 });
      // The repeat found the claim and is polling it (each poll refused OOM, then read).
      await vi.waitFor(() => expect(reads).toBeGreaterThanOrEqual(2), { timeout: 10_000, interval: 10 });
      await own.client.config('SET', 'maxmemory', '0');
      release();
      const done = await first;
      expect(done.structuredContent).toEqual({ ok: true, refund_id: 'R-1', order_id: 'A-1', amount: 25 });
      const replayed = await repeat;
      expect(replayed.structuredContent).toEqual(done.structuredContent);
      expect(replayed._meta?.[IDEMPOTENCY_META]).toEqual({ replayed: true, key: expect.any(String) });
      expect(runs).toBe(1);
    }, 30_000);

    it('an explicit key reused with other arguments is still refused invalid_argument on the full Redis', async () => {
      const { tool, runs } = refundTool();
      const one = await replica(tool);
      const meta = { 'toolgate/idempotency-key': 'refund-7f3a' };
      await one.callTool('create_refund', refund, { meta });
      expect(isStoreFullError(await fillRedis(own.client))).toBe(true);
      const reused = await one.callTool('create_refund', { order_id: 'A-1', amount: 99 }, { meta });
      expect(expectFailure(reused)).toMatchObject({
        error: 'invalid_argument',
        message: 'This idempotency key was used with other arguments.',
      });
      expect(runs.count).toBe(1);
    }, 30_000);
  });
}
