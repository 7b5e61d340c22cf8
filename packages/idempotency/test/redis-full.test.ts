// A real Redis at its maxmemory (noeviction): a flood fills it, and idempotency on it refuses a new call
// rate_limited without running it, even under onStoreFailure 'open' (redis-store reports the OOM reply as
// core's StoreFullError). maxmemory is server-wide: the test starts a redis-server of its own, so the
// shared one (and every test using it) never runs full.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { defineTool, isStoreFullError, ok } from '@toolgate/core';
import { expectFailure, recordingLogger, serveTools, type TestClient } from '@toolgate/core/testing';
import { createRedisClient, createRedisStore, redisReady } from '@toolgate/redis-store';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createIdempotency } from '../src/index.js';
import { reportRedisMissing, TEST_REDIS_URL } from './needs-redis.js';

let flooded = 0;

/**
 * Writes 16 KB values under new keys until Redis refuses one; the refusal. At that moment Redis is past
 * its maxmemory only by what it holds for the refused command itself (its query buffer, ~16 KB), which it
 * frees afterwards, so a small write a moment later may fit again: see `holdFull`.
 */
async function flood(store: ReturnType<typeof createRedisStore>): Promise<unknown> {
  const value = 'x'.repeat(16_384);
  for (let i = 0; i < 10_000; i += 1) {
    flooded += 1;
    try {
      await store.setIfAbsent(`{flooder}:${flooded}`, value, 60_000);
    } catch (error) {
      return error;
    }
  }
  return undefined;
}

/**
 * Keeps the flooded Redis past its maxmemory by a wide margin: lowers maxmemory to half of what it now
 * uses, as an operator lowering the limit under a full dataset would. Every write is then refused however
 * Redis's own buffers grow and shrink between commands (the refusal right after a flood is not stable:
 * failed in CI when a later claim of a few hundred bytes fit under the limit again).
 */
async function holdFull(client: Redis): Promise<void> {
  const used = Number(/used_memory:(\d+)/.exec(await client.info('memory'))?.[1]);
  expect(used).toBeGreaterThan(2_000_000);
  await client.config('SET', 'maxmemory', String(Math.floor(used / 2)));
}

/** A free loopback port (the OS picks it; the probe closes before redis-server binds it). */
async function freePort(): Promise<number> {
  const probe = createServer();
  probe.listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as { port: number };
  probe.close();
  await once(probe, 'close');
  return port;
}

if (TEST_REDIS_URL === undefined) {
  reportRedisMissing('the Redis-out-of-memory test (it starts a redis-server of its own)');
} else {
  // maxmemory is server-wide: a Redis of its own, so the shared one (and the tests using it) never
  // runs full.
  describe('a real Redis at its maxmemory (noeviction)', () => {
    let server: ChildProcess;
    let client: Redis;
    beforeAll(async () => {
      const port = await freePort();
      server = spawn(
        'redis-server',
        [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--save',
          '',
          '--appendonly',
          'no',
          '--maxmemory',
          '3mb',
          '--maxmemory-policy',
          'noeviction',
        ],
        { stdio: 'ignore' },
      );
      server.once('error', (error) => {
        throw new Error(`this test starts redis-server from PATH and could not: ${error.message}`);
      });
      client = createRedisClient(`redis://127.0.0.1:${port}`, { logger: recordingLogger([]) });
      const deadline = Date.now() + 10_000;
      for (;;) {
        try {
          await redisReady(client, 500);
          break;
        } catch (error) {
          if (Date.now() > deadline) throw error;
          client.disconnect();
          client = createRedisClient(`redis://127.0.0.1:${port}`, { logger: recordingLogger([]) });
        }
      }
    }, 20_000);
    const open: TestClient[] = [];
    afterAll(async () => {
      await Promise.all(open.map((served) => served.close()));
      client?.disconnect();
      server?.kill('SIGKILL');
    });

    it('a flood fills it: new writes reject with StoreFullError, reads and deletes still work', async () => {
      const store = createRedisStore(client, { prefix: 'full:' });
      await store.set('{victim}:result', 'kept', 60_000);
      const refused = await flood(store);
      expect(isStoreFullError(refused)).toBe(true);
      expect(refused).toMatchObject({ name: 'StoreFullError', reason: 'store' });
      await holdFull(client);
      // The victim's entry is still there (noeviction), and reads and deletes are not refused.
      expect(await store.get('{victim}:result')).toBe('kept');
      await expect(store.set('{victim}:other', 'v', 60_000)).rejects.toSatisfy(isStoreFullError);
      expect(await store.delete('{flooder}:1')).toBe(true);
    }, 60_000);

    it('idempotency on the full Redis refuses a new call rate_limited, even under onStoreFailure open', async () => {
      // The same server (held past its maxmemory by the test above, or filled here when run alone).
      expect(isStoreFullError(await flood(createRedisStore(client, { prefix: 'full:' })))).toBe(true);
      await holdFull(client);
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
            store: createRedisStore(client, { prefix: 'full:' }),
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
