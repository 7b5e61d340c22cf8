import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { isStoreFullError, StoreFullError } from '@toolgate/core';
import { recordingLogger } from '@toolgate/core/testing';
import { type Redis, ReplyError } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisClient, createRedisStore, redisReady } from '../src/index.js';
import { reportRedisMissing, TEST_REDIS_URL } from './needs-redis.js';

const OOM = "OOM command not allowed when used memory > 'maxmemory'.";

describe('createRedisStore: a Redis out of memory is a full store', () => {
  const fake = { set: async () => 'OK', get: async () => null, del: async () => 0 };

  it("an OOM reply to a write rejects with core's StoreFullError (the reply as its cause)", async () => {
    const reply = new ReplyError(OOM);
    const store = createRedisStore({
      ...fake,
      set: async () => {
        throw reply;
      },
    });
    for (const write of [() => store.set('{c}:k', 'v', 1000), () => store.setIfAbsent('{c}:k', 'v', 1000)]) {
      const error = await write().then(
        () => undefined,
        (rejected: unknown) => rejected,
      );
      expect(error).toBeInstanceOf(StoreFullError);
      expect(isStoreFullError(error)).toBe(true);
      expect(error).toMatchObject({ reason: 'store', limit: undefined, cause: reply });
      expect((error as Error).message).toBe(
        'RedisStore: a write was refused: Redis is at its maxmemory (policy noeviction)',
      );
    }
  });

  it('any other error stays what it was', async () => {
    const other = new ReplyError('WRONGTYPE Operation against a key holding the wrong kind of value');
    const store = createRedisStore({
      ...fake,
      set: async () => {
        throw other;
      },
    });
    await expect(store.set('k', 'v', 1000)).rejects.toBe(other);
  });
});

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
    afterAll(async () => {
      client?.disconnect();
      server?.kill('SIGKILL');
    });

    it('a flood fills it: new writes reject with StoreFullError, reads and deletes still work', async () => {
      const store = createRedisStore(client, { prefix: 'full:' });
      await store.set('{victim}:result', 'kept', 60_000);
      const value = 'x'.repeat(16_384);
      let refused: unknown;
      for (let i = 0; i < 10_000 && refused === undefined; i += 1) {
        await store.setIfAbsent(`{flooder}:${i}`, value, 60_000).catch((error: unknown) => {
          refused = error;
        });
      }
      expect(isStoreFullError(refused)).toBe(true);
      expect(refused).toMatchObject({ name: 'StoreFullError', reason: 'store' });
      // The victim's entry is still there (noeviction), and reads and deletes are not refused.
      expect(await store.get('{victim}:result')).toBe('kept');
      await expect(store.set('{victim}:other', 'v', 60_000)).rejects.toSatisfy(isStoreFullError);
      expect(await store.delete('{flooder}:0')).toBe(true);
    }, 60_000);
  });
}
