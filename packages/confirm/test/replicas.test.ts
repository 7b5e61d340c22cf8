// Confirm on a Redis whose writes a replica must acknowledge (redis-store's `minReplicas`), on a primary and
// a replica of the test's own: a confirmation is neither issued nor used while the replica stalls, and one
// whose use reached only the primary stays used, so a failover cannot hand it out a second time.
import { defineTool, ok, type ToolDefinition } from '@toolgate/core';
import { expectFailure, recordingLogger, serveTools } from '@toolgate/core/testing';
import { createRedisClient, createRedisStore, redisReady } from '@toolgate/redis-store';
import { type OwnReplicatedRedis, startOwnReplicatedRedis } from '@toolgate/redis-store/testing';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { CONFIRM_META, confirmationArgument, createConfirm } from '../src/index.js';
import { SECRET } from './fixtures.js';
import { reportRedisMissing, TEST_REDIS_URL } from './needs-redis.js';

if (TEST_REDIS_URL === undefined) {
  reportRedisMissing('the confirmation tests on a Redis primary whose replica must acknowledge writes');
} else {
  describe('confirm on a store whose writes a replica must acknowledge (minReplicas)', () => {
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

    it('neither issued nor used while the replica stalls; a used one stays used on the primary, so the retry is refused and nothing runs', async () => {
      const prefix = 'confirm-replicas:';
      const runs = { count: 0 };
      const tool = defineTool({
        name: 'create_refund',
        description: 'Refund an amount on an order.',
        input: { order_id: z.string(), amount: z.number().positive(), confirmation: confirmationArgument },
        handler: async () => {
          runs.count += 1;
          return ok({ refund_id: `R-${runs.count}` });
        },
      }) as ToolDefinition;
      // One replica must acknowledge each write within 100 ms (Redis ends a WAIT on its timer, up to
      // 100 ms late), inside a time limit far above it so a loaded machine cannot turn it into a timeout.
      const store = createRedisStore(client, {
        prefix,
        minReplicas: 1,
        replicaTimeoutMs: 100,
        timeoutMs: 1000,
      });
      const confirm = createConfirm({
        secret: SECRET,
        audience: 'orders',
        store,
        storeTimeoutMs: 1000,
        tools: { create_refund: {} },
      });
      const server = await serveTools([tool], { middleware: [confirm], logger: recordingLogger([]) });
      const refund = { order_id: 'A-1', amount: 25 };
      const unavailable = (hint: string) => ({
        ok: false,
        error: 'unavailable',
        message: 'The server cannot check this confirmation right now; nothing was done.',
        hint,
        retryable: true,
        retryAfterMs: 2000,
      });
      try {
        // Issuing is a write: not acknowledged, no confirmation is handed out.
        const notIssued = await own.whileReplicaStalls(() => server.callTool('create_refund', refund));
        expect(expectFailure(notIssued)).toEqual(
          unavailable(
            'Retry once in a few seconds without a confirmation; if it fails again, tell the user the service is unavailable.',
          ),
        );
        expect(notIssued._meta?.[CONFIRM_META]).toBeUndefined();
        expect(JSON.stringify(notIssued)).not.toMatch(/WAIT|replica|127\.0\.0\.1|sha256/);
        // The replica up: issued, and held on the replica too (the refused one's SET stays on the
        // primary and reaches the replica: its token was never handed out, and it expires).
        const issued = await server.callTool('create_refund', refund);
        const { confirmation } = (issued._meta?.[CONFIRM_META] ?? {}) as { confirmation: string };
        const nonce = confirmation.split('.')[2];
        expect(await own.replica.client.keys(`${prefix}confirm:orders:issued:*:${nonce}`)).toHaveLength(1);
        expect(await own.replica.client.keys(`${prefix}confirm:orders:issued:*`)).toHaveLength(2);
        // Using it is a DEL: not acknowledged, the call does not run, and the hint says what a retry
        // refused as already used means here.
        const notUsed = await own.whileReplicaStalls(() =>
          server.callTool('create_refund', { ...refund, confirmation }),
        );
        expect(expectFailure(notUsed)).toEqual(
          unavailable(
            'Retry once in a few seconds with the same confirmation (if it is then refused as already used, nothing was done either: call without it to ask the user again); if it fails again, tell the user the service is unavailable.',
          ),
        );
        expect(runs.count).toBe(0);
        // The DEL stays applied on the primary (and reaches the replica): the confirmation is used up,
        // so the retry with it is refused, and a new one must be asked for. Never accepted twice.
        const retried = await server.callTool('create_refund', { ...refund, confirmation });
        expect(expectFailure(retried)).toMatchObject({
          error: 'permission_denied',
          message: 'This confirmation was already used.',
        });
        expect(runs.count).toBe(0);
        expect(await own.replica.client.keys(`${prefix}confirm:orders:issued:*:${nonce}`)).toEqual([]);
      } finally {
        await server.close();
        await confirm.close();
      }
    });
  });
}
