// Idempotency on a Redis whose writes a replica must acknowledge (redis-store's `minReplicas`), on a primary
// and a replica of the test's own: a claim the replica did not acknowledge is not this call's to run under
// (a failover would lose it, and a retry on the new primary would run the write again).
import { defineTool, ok, StoreCommandError, type ToolDefinition } from '@toolgate/core';
import { expectFailure, type LogEntry, recordingLogger, serveTools } from '@toolgate/core/testing';
import { createRedisClient, createRedisStore, redisReady } from '@toolgate/redis-store';
import { type OwnReplicatedRedis, startOwnReplicatedRedis } from '@toolgate/redis-store/testing';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createIdempotency } from '../src/index.js';
import { reportRedisMissing, TEST_REDIS_URL } from './needs-redis.js';

function refundTool() {
  const runs = { count: 0 };
  const tool = defineTool({
    name: 'create_refund',
    description: 'Refund an amount on an order.',
    input: { order_id: z.string(), amount: z.number().positive() },
    handler: async ({ order_id, amount }) => {
      runs.count += 1;
      return ok({ refund_id: `R-${runs.count}`, order_id, amount });
    },
  }) as ToolDefinition;
  return { tool, runs };
}

const REFUSED = {
  ok: false,
  error: 'unavailable',
  message: 'The server cannot make sure this call runs only once right now, so it did not run it.',
  hint: 'Nothing was done. Retry once in a few seconds; if it fails again, tell the user the service is unavailable.',
  retryable: true,
  retryAfterMs: 2000,
};

if (TEST_REDIS_URL === undefined) {
  reportRedisMissing('the idempotency tests on a Redis primary whose replica must acknowledge writes');
} else {
  describe('idempotency on a store whose writes a replica must acknowledge (minReplicas)', () => {
    let own: OwnReplicatedRedis;
    /** The client the stores under test use (`own.primary.client` inspects, on a connection of its own). */
    let client: Redis;
    beforeAll(async () => {
      own = await startOwnReplicatedRedis();
      client = createRedisClient(own.primary.url, { logger: recordingLogger([]) });
      await redisReady(client);
    }, 30_000);
    afterAll(async () => {
      client?.disconnect();
      await own?.close();
    });

    it('a claim the replica did not acknowledge answers unavailable, the handler does not run, and the retry runs it once', async () => {
      const prefix = 'idem-replicas-1:';
      const { tool, runs } = refundTool();
      const logs: LogEntry[] = [];
      // One replica must acknowledge each write within 100 ms (Redis ends a WAIT on its timer, up to
      // 100 ms late), inside a time limit far above it so a loaded machine cannot turn it into a timeout.
      const store = createRedisStore(client, {
        prefix,
        minReplicas: 1,
        replicaTimeoutMs: 100,
        timeoutMs: 1000,
      });
      const idempotency = createIdempotency({ store, storeTimeoutMs: 1000, tools: { create_refund: {} } });
      const server = await serveTools([tool], { middleware: [idempotency], logger: recordingLogger(logs) });
      const refund = { order_id: 'A-1', amount: 25 };
      try {
        const refused = await own.whileReplicaStalls(() => server.callTool('create_refund', refund));
        expect(runs.count).toBe(0);
        expect(expectFailure(refused)).toEqual(REFUSED);
        expect(JSON.stringify(refused)).not.toMatch(/WAIT|replica|127\.0\.0\.1|sha256/);
        // The log has the store's own words; the claim is gone from the primary.
        expect(logs).toContainEqual(
          expect.objectContaining({
            level: 'warn',
            message: 'idempotency: the store failed (setIfAbsent); calls are refused unavailable',
            fields: expect.objectContaining({
              err: expect.objectContaining({ name: 'NotReplicatedError', code: 'NOT_REPLICATED' }),
            }),
          }),
        );
        expect(await own.primary.client.keys(`${prefix}*`)).toEqual([]);
        // The replica back: the retry claims, runs once, and its result is on the replica too.
        const retried = await server.callTool('create_refund', refund);
        expect(retried.structuredContent).toEqual({
          ok: true,
          refund_id: 'R-1',
          order_id: 'A-1',
          amount: 25,
        });
        expect(runs.count).toBe(1);
        const [key] = await own.replica.client.keys(`${prefix}*`);
        expect(JSON.parse((await own.replica.client.get(key!))!)).toMatchObject({ s: 'done' });
        const replayed = await server.callTool('create_refund', refund);
        expect(replayed._meta).toMatchObject({ 'toolgate/idempotency': { replayed: true } });
        expect(runs.count).toBe(1);
      } finally {
        await server.close();
        await idempotency.close();
      }
    });

    it('a claim that reached the primary alone is never run under, even when the store could not take it back', async () => {
      const prefix = 'idem-replicas-2:';
      const { tool, runs } = refundTool();
      // A store whose claim landed on the primary but that no replica acknowledged, and whose withdrawal
      // failed too: the claim, with this call's token, stays readable on the primary.
      const inner = createRedisStore(client, { prefix });
      const store = Object.assign(Object.create(inner) as typeof inner, {
        async setIfAbsent(key: string, value: string, ttlMs: number) {
          await inner.setIfAbsent(key, value, ttlMs);
          throw new StoreCommandError(
            {
              name: 'NotReplicatedError',
              code: 'NOT_REPLICATED',
              message: '0 of 1 replicas acknowledged the write within 100 ms',
            },
            { name: 'set', key, value, options: ['PX', ttlMs, 'NX'] },
          );
        },
      });
      const idempotency = createIdempotency({ store, storeTimeoutMs: 1000, tools: { create_refund: {} } });
      const server = await serveTools([tool], { middleware: [idempotency], logger: recordingLogger([]) });
      try {
        const refused = await server.callTool('create_refund', { order_id: 'A-2', amount: 5 });
        expect(expectFailure(refused)).toEqual(REFUSED);
        expect(runs.count).toBe(0);
      } finally {
        await server.close();
        await idempotency.close();
      }
    });
  });
}
