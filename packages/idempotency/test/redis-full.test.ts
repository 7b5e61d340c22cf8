// A real Redis at its maxmemory (noeviction): a flood fills it, and idempotency on it refuses a new call
// rate_limited without running it, even under onStoreFailure 'open' (redis-store reports the OOM reply as
// core's StoreFullError). maxmemory is server-wide: the test starts a redis-server of its own, so the
// shared one (and every test using it) never runs full.
import { defineTool, isStoreFullError, ok } from '@toolgate/core';
import { expectFailure, serveTools, type TestClient } from '@toolgate/core/testing';
import { createRedisStore } from '@toolgate/redis-store';
import { fillRedis, type OwnRedisServer, startOwnRedis } from '@toolgate/redis-store/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createIdempotency } from '../src/index.js';
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
      });
      open.push(served);
      const result = await served.callTool('create_refund', { order_id: 'A-1', amount: 5 });
      const failure = expectFailure(result);
      expect(failure.error).toBe('rate_limited');
      expect(failure.message).toContain('did not run');
      expect(runs).toBe(0);
    });
  });
}
