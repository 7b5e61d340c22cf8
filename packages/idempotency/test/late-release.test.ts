// A release that reaches the store late. A failed call's release (or the removal of a claim whose reply
// was lost) is sent while the claim is its own, but lands after the claim expired and another replica
// claimed the key (a partition that heals, a store that answers after the caller stopped waiting). A
// plain DEL would then delete that claim and a third call would run the refund beside the second; with
// the store's deleteIfEquals the release deletes only the claim it was sent for.
import { randomUUID } from 'node:crypto';
import {
  createMemoryStore,
  defineTool,
  fail,
  type KeyValueStore,
  ok,
  type ToolDefinition,
  type ToolResult,
} from '@toolgate/core';
import { expectFailure, recordingLogger, startFaultProxy } from '@toolgate/core/testing';
import { createRedisClient, createRedisStore, redisReady } from '@toolgate/redis-store';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createIdempotency, IDEMPOTENCY_META } from '../src/index.js';
import { serve } from './fixtures.js';
import { reportRedisMissing, TEST_REDIS_URL } from './needs-redis.js';

const refund = { order_id: 'A-1', amount: 25 };
const replayedOf = (result: { _meta?: Record<string, unknown> }) =>
  (result._meta?.[IDEMPOTENCY_META] as { replayed?: boolean } | undefined)?.replayed === true;

/** A promise the test settles by hand. */
function signal(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((settle) => {
    resolve = settle;
  });
  return { promise, resolve };
}

/**
 * A refund whose first run fails when the test lets it and whose second succeeds when the test lets it
 * (`firstFails`; else the first run succeeds when let), any later run at once; counts how many ran at once.
 */
function gatedRefunds(firstFails = true) {
  const runs = { count: 0, running: 0, mostAtOnce: 0 };
  const gates = firstFails ? [signal(), signal()] : [signal()];
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
      if (run === 0 && firstFails) return fail('unavailable', 'The payment service did not answer.');
      return ok({ refund_id: `R-${run + 1}`, order_id, amount });
    },
  }) as ToolDefinition;
  return { tool, runs, gates, started };
}

/**
 * A replica's view of a shared store whose deletes (plain or compared) are held on the way until the
 * test delivers them, as a partition holds them; the replica stops waiting at its storeTimeoutMs.
 */
function heldDeletes(inner: KeyValueStore) {
  const held: (() => Promise<unknown>)[] = [];
  const hold = <T>(work: () => Promise<T>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      held.push(() => work().then(resolve, reject));
    });
  const store: KeyValueStore = {
    setIfAbsent: (key, value, ttlMs, op) => inner.setIfAbsent(key, value, ttlMs, op),
    set: (key, value, ttlMs, op) => inner.set(key, value, ttlMs, op),
    get: (key, op) => inner.get(key, op),
    delete: (key) => hold(() => inner.delete(key)),
    ...(inner.deleteIfEquals
      ? {
          deleteIfEquals: (key: string, expected: string) => hold(() => inner.deleteIfEquals!(key, expected)),
        }
      : {}),
  };
  return {
    store,
    held: () => held.length,
    /** Delivers every delete held so far; resolves once the store applied them. */
    deliver: () => Promise.allSettled(held.splice(0).map((run) => run())),
  };
}

/** A view that resolves `saw` when a read finds another call's running claim (the caller then waits). */
function watched(store: KeyValueStore, saw: () => void): KeyValueStore {
  return {
    ...store,
    async get(key, op) {
      const value = await store.get(key, op);
      if (value?.startsWith('{"s":"running"')) saw();
      return value;
    },
  };
}

describe('idempotency: a release that lands after another replica claimed the key (shared memory store)', () => {
  it("a failed call's release, delivered late, leaves the second call's claim: a third call waits for it and replays, never runs beside it", async () => {
    const { tool, runs, gates, started } = gatedRefunds();
    const shared = createMemoryStore();
    const one = heldDeletes(shared);
    const sawClaim = signal();
    const replica = (store: KeyValueStore, claimTtlMs: number) =>
      createIdempotency({
        store,
        storeTimeoutMs: 50,
        pollIntervalMs: 10,
        tools: { create_refund: { claimTtlMs } },
      });
    // Replica one's claims last 300 ms; the others' a minute.
    const first = await serve([tool], { middleware: [replica(one.store, 300)], logger: recordingLogger([]) });
    const second = await serve([tool], {
      middleware: [replica(shared, 60_000)],
      logger: recordingLogger([]),
    });
    const third = await serve([tool], {
      middleware: [replica(watched(shared, sawClaim.resolve), 60_000)],
      logger: recordingLogger([]),
    });

    // Run 1 fails at once; its release is sent while the claim is its own, and held on the way.
    const failed = first.callTool('create_refund', refund, { timeoutMs: 5000 });
    await started[0]!.promise;
    gates[0]!.resolve();
    expect(expectFailure(await failed).error).toBe('unavailable');
    expect(one.held()).toBe(1);

    // The claim expires; the retry on replica two claims the key and runs the refund (run 2).
    const retry = second.callTool('create_refund', refund, { timeoutMs: 5000 });
    await started[1]!.promise;
    // Now the release arrives.
    await one.deliver();

    const again = third.callTool('create_refund', refund, { timeoutMs: 5000 });
    await Promise.race([sawClaim.promise, started[2]!.promise]);
    gates[1]!.resolve();
    const answered = await retry;
    expect(answered.structuredContent).toEqual({ ok: true, refund_id: 'R-2', ...refund });
    const replayed = await again;
    expect(replayed.structuredContent).toEqual(answered.structuredContent);
    expect(replayedOf(replayed)).toBe(true);
    expect(runs).toEqual({ count: 2, running: 0, mostAtOnce: 1 });
  });

  it('the removal of a claim whose reply was lost, delivered late, leaves the claim another replica made since', async () => {
    const { tool, runs, gates, started } = gatedRefunds(false);
    const shared = createMemoryStore();
    const one = heldDeletes(shared);
    // Replica one's claim lands with its reply lost, and its next read fails: the call is refused and
    // the claim's removal is left to a timer, whose deletes are held on the way.
    let lost = false;
    let readsFailing = 0;
    const losing: KeyValueStore = {
      ...one.store,
      async setIfAbsent(key, value, ttlMs, op) {
        const written = await one.store.setIfAbsent(key, value, ttlMs, op);
        if (lost) return written;
        lost = true;
        readsFailing = 1;
        throw new Error('Connection is closed.');
      },
      async get(key, op) {
        if (readsFailing > 0) {
          readsFailing -= 1;
          throw new Error("Stream isn't writeable and enableOfflineQueue options is false");
        }
        return one.store.get(key, op);
      },
    };
    const sawClaim = signal();
    const replica = (store: KeyValueStore, claimTtlMs: number) =>
      createIdempotency({
        store,
        storeTimeoutMs: 50,
        pollIntervalMs: 10,
        tools: { create_refund: { claimTtlMs } },
      });
    const first = await serve([tool], { middleware: [replica(losing, 1000)], logger: recordingLogger([]) });
    const second = await serve([tool], {
      middleware: [replica(shared, 60_000)],
      logger: recordingLogger([]),
    });
    const third = await serve([tool], {
      middleware: [replica(watched(shared, sawClaim.resolve), 60_000)],
      logger: recordingLogger([]),
    });

    const refused = await first.callTool('create_refund', refund, { timeoutMs: 5000 });
    expect(expectFailure(refused).error).toBe('unavailable');
    expect(runs.count).toBe(0);
    // The retry on replica two waits for the stray claim to expire, then claims the key and runs.
    const retry = second.callTool('create_refund', refund, { timeoutMs: 5000 });
    await started[0]!.promise;
    // The removal was sent (at least once) while the claim was replica one's; now it arrives.
    expect(one.held()).toBeGreaterThan(0);
    await one.deliver();

    const again = third.callTool('create_refund', refund, { timeoutMs: 5000 });
    await Promise.race([sawClaim.promise, started[1]!.promise]);
    gates[0]!.resolve();
    const answered = await retry;
    expect(answered.structuredContent).toEqual({ ok: true, refund_id: 'R-1', ...refund });
    const replayed = await again;
    expect(replayed.structuredContent).toEqual(answered.structuredContent);
    expect(replayedOf(replayed)).toBe(true);
    expect(runs).toEqual({ count: 1, running: 0, mostAtOnce: 1 });
  });

  it('a store without deleteIfEquals still gets a plain delete while the claim is surely the call’s', async () => {
    const { tool, runs, gates, started } = gatedRefunds();
    // A store of another kind: the four required operations only.
    const { deleteIfEquals: _compareAndDelete, ...plain } = createMemoryStore();
    const deletes: string[] = [];
    const store: KeyValueStore = {
      ...plain,
      delete: (key, op) => {
        deletes.push(key);
        return plain.delete(key, op);
      },
    };
    const client = await serve([tool], {
      middleware: [createIdempotency({ store, pollIntervalMs: 10, tools: { create_refund: {} } })],
      logger: recordingLogger([]),
    });
    const failed = client.callTool('create_refund', refund, { timeoutMs: 5000 });
    await started[0]!.promise;
    gates[0]!.resolve();
    expect(expectFailure(await failed).error).toBe('unavailable');
    expect(deletes).toHaveLength(1);
    // Released: the retry runs at once instead of waiting out claimTtlMs.
    const retry = client.callTool('create_refund', refund, { timeoutMs: 5000 });
    await started[1]!.promise;
    gates[1]!.resolve();
    expect((await retry).structuredContent).toEqual({ ok: true, refund_id: 'R-2', ...refund });
    expect(runs.count).toBe(2);
  });
});

if (TEST_REDIS_URL === undefined) {
  reportRedisMissing('the idempotency test of a release reaching Redis late');
} else {
  const url = TEST_REDIS_URL;
  describe('idempotency: a release that reaches Redis late, after another replica claimed the key', () => {
    const prefix = `toolgate-late-release:${randomUUID()}:`;
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

    it('the release waits inside a partition past its claim; once it heals, the second call’s claim stays and a third call replays it', async () => {
      const target = new URL(url);
      const proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port || 6379) });
      try {
        target.port = String(proxy.port);
        // Replica one reaches Redis through the proxy, with a store time limit longer than its policy's
        // (storeTimeoutMs, 200 ms): the policy stops waiting for its release, which stays on the
        // connection (nothing resets it) and reaches Redis once the partition heals.
        const viaProxy = createRedisClient(target.toString(), {
          logger: recordingLogger([]),
          commandTimeoutMs: 10_000,
          socketTimeoutMs: 10_000,
        });
        const direct = createRedisClient(url, { logger: recordingLogger([]) });
        clients.push(viaProxy, direct);
        await Promise.all([redisReady(viaProxy), redisReady(direct)]);
        const own = `${prefix}release:`;
        // Every release replica one sends, to await its arrival once the partition heals.
        const releases: Promise<unknown>[] = [];
        const redisOne = createRedisStore(viaProxy, { prefix: own, timeoutMs: 10_000 });
        const noted = (sent: Promise<boolean>): Promise<boolean> => {
          releases.push(sent.catch(() => undefined));
          return sent;
        };
        const storeOne: KeyValueStore = {
          ...redisOne,
          delete: (key, op) => noted(redisOne.delete(key, op)),
          ...(redisOne.deleteIfEquals
            ? {
                deleteIfEquals: (key: string, expected: string) =>
                  noted(redisOne.deleteIfEquals!(key, expected)),
              }
            : {}),
        };
        const { tool, runs, gates, started } = gatedRefunds();
        const sawClaim = signal();
        const replica = (store: KeyValueStore, claimTtlMs: number) =>
          createIdempotency({ store, pollIntervalMs: 10, tools: { create_refund: { claimTtlMs } } });
        const one = await serve([tool], {
          middleware: [replica(storeOne, 1000)],
          logger: recordingLogger([]),
        });
        const two = await serve([tool], {
          middleware: [replica(createRedisStore(direct, { prefix: own }), 60_000)],
          logger: recordingLogger([]),
        });
        const three = await serve([tool], {
          middleware: [replica(watched(createRedisStore(direct, { prefix: own }), sawClaim.resolve), 60_000)],
          logger: recordingLogger([]),
        });

        // Run 1 claims (through the proxy), then the partition starts; run 1 fails and its release is
        // sent into it. The policy gives up on it after storeTimeoutMs and answers the call.
        const failed = one.callTool('create_refund', refund, { timeoutMs: 5000 });
        await started[0]!.promise;
        proxy.blackhole();
        gates[0]!.resolve();
        expect(expectFailure(await failed).error).toBe('unavailable');
        expect(releases).toHaveLength(1);

        // Run 1's claim expires in Redis; the retry on replica two claims the key and runs (run 2).
        const retry = two.callTool('create_refund', refund, { timeoutMs: 5000 });
        await started[1]!.promise;
        // The partition heals: the release reaches Redis now, and is answered.
        proxy.heal();
        await Promise.all(releases);

        const again = three.callTool('create_refund', refund, { timeoutMs: 5000 });
        await Promise.race([sawClaim.promise, started[2]!.promise]);
        gates[1]!.resolve();
        const answered = await retry;
        expect(answered.structuredContent).toEqual({ ok: true, refund_id: 'R-2', ...refund });
        const replayed = await again;
        expect(replayed.structuredContent).toEqual(answered.structuredContent);
        expect(replayedOf(replayed)).toBe(true);
        expect(runs).toEqual({ count: 2, running: 0, mostAtOnce: 1 });
      } finally {
        await proxy.close();
      }
    });
  });
}
