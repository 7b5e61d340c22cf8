// deleteIfEquals on Redis: one Lua script (GET, compare, DEL) run atomically by Redis, so a release that
// reaches Redis late (a partition that heals, a caller that stopped waiting) deletes the key only while
// it still holds the releasing call's own claim, never the claim another replica made since.
import { randomUUID } from 'node:crypto';
import { inspect } from 'node:util';
import { isStoreFullError, StoreCommandError } from '@toolgate/core';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisClient, createRedisStore, type RedisStoreClient, redisReady } from '../src/index.js';
import {
  fillRedis,
  type OwnRedisServer,
  type OwnReplicatedRedis,
  startOwnRedis,
  startOwnReplicatedRedis,
} from '../src/testing.js';
import { reportRedisMissing, TEST_REDIS_URL, throughFaultProxy } from './needs-redis.js';

/** What must never appear in an error: a piece of the value, and the key's own text. */
const SECRET = 'card 4111-1111-1111-1111 of Jane Roe';
const KEY_TEXT = 'page-7Qx2';
const KEY_DIGEST = expect.stringMatching(/^sha256:[\w-]{43}$/);

const rejection = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );

function expectNothingSent(error: unknown): void {
  for (const text of [JSON.stringify(error), inspect(error, { depth: Number.POSITIVE_INFINITY })]) {
    expect(text).not.toContain(SECRET.slice(0, 9));
    expect(text).not.toContain(KEY_TEXT);
  }
}

const fake = { set: async () => 'OK', get: async () => null, del: async () => 0 };

describe('createRedisStore: deleteIfEquals without a server', () => {
  it('is there only with a client that runs scripts (eval)', () => {
    expect(createRedisStore(fake, { prefix: 'test:' }).deleteIfEquals).toBeUndefined();
    expect(
      typeof createRedisStore({ ...fake, eval: async () => 0 }, { prefix: 'test:' }).deleteIfEquals,
    ).toBe('function');
  });

  it('refuses a key or an expected value it could not compare as given, before sending anything', () => {
    const sent: unknown[] = [];
    const store = createRedisStore(
      { ...fake, eval: async (...args) => sent.push(args) },
      { prefix: 'test:' },
    );
    expect(() => store.deleteIfEquals!('{c}:\uD800', 'v')).toThrow(
      new TypeError(
        'RedisStore: a key may not hold a lone UTF-16 surrogate (Redis would store U+FFFD: two keys would be one)',
      ),
    );
    expect(() => store.deleteIfEquals!('{c}:k', 'token\uDBFF')).toThrow(
      new TypeError(
        'RedisStore: a value may not hold a lone UTF-16 surrogate (Redis would store U+FFFD: it would read back changed)',
      ),
    );
    expect(() => store.deleteIfEquals!(42 as never, 'v')).toThrow(TypeError);
    expect(() => store.deleteIfEquals!('{c}:k', null as never)).toThrow(TypeError);
    expect(sent).toEqual([]);
  });

  it('a script left unanswered at the deadline resets its connection, as every write does', async () => {
    const resets: string[] = [];
    const stream = { destroyed: false, resetAndDestroy: () => resets.push('reset'), destroy: () => {} };
    const store = createRedisStore(
      { ...fake, eval: () => new Promise<never>(() => {}), stream },
      { prefix: 'test:', timeoutMs: 30 },
    );
    await expect(store.deleteIfEquals!('k', 'v')).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(resets).toEqual(['reset']);
  });

  it('with minReplicas: sent with WAIT in one pipeline; a delete too few replicas hold rejects, one that deleted nothing answers false', async () => {
    const answering = (reply: number, acknowledged: number) => {
      const queued: unknown[][] = [];
      const client: RedisStoreClient = {
        ...fake,
        pipeline() {
          const pipeline = {
            set: () => pipeline,
            del: () => pipeline,
            eval: (...args: unknown[]) => {
              queued.push(['eval', ...args.slice(1)]);
              return pipeline;
            },
            wait: (...args: unknown[]) => {
              queued.push(['wait', ...args]);
              return pipeline;
            },
            exec: async (): Promise<[Error | null, unknown][]> => [
              [null, reply],
              [null, acknowledged],
            ],
          };
          return pipeline;
        },
        eval: async () => {
          throw new Error('sent through the pipeline, never alone');
        },
      };
      return {
        store: createRedisStore(client, { prefix: 'test:', minReplicas: 2, replicaTimeoutMs: 40 }),
        queued,
      };
    };
    const held = answering(1, 2);
    expect(await held.store.deleteIfEquals!(`{c}:${KEY_TEXT}`, SECRET)).toBe(true);
    expect(held.queued).toEqual([
      ['eval', 1, `test:{c}:${KEY_TEXT}`, SECRET],
      ['wait', 2, 40],
    ]);
    const error = await rejection(answering(1, 1).store.deleteIfEquals!(`{c}:${KEY_TEXT}`, SECRET));
    expect(error).toBeInstanceOf(StoreCommandError);
    expect(error).toMatchObject({
      name: 'NotReplicatedError',
      code: 'NOT_REPLICATED',
      message:
        'RedisStore: only 1 of 2 replicas acknowledged the write within 40 ms (WAIT); the key is deleted on the primary',
      command: { name: 'eval', keyDigest: KEY_DIGEST, valueLength: SECRET.length },
    });
    expectNothingSent(error);
    expect(await answering(0, 0).store.deleteIfEquals!(`{c}:${KEY_TEXT}`, SECRET)).toBe(false);
  });
});

if (TEST_REDIS_URL === undefined) {
  reportRedisMissing('the real-Redis tests of deleteIfEquals');
} else {
  const url = TEST_REDIS_URL;
  describe('createRedisStore on real Redis: deleteIfEquals', () => {
    let client: Redis;
    const prefix = `toolgate-test:${randomUUID()}:`;
    beforeAll(async () => {
      client = createRedisClient(url);
      await redisReady(client);
    });
    afterAll(async () => {
      const keys = await client.keys(`${prefix}*`);
      if (keys.length > 0) await client.del(...keys);
      await client.quit();
    });

    it('deletes a key that holds exactly the value given; leaves another value with its expiry; false when absent or expired', async () => {
      const store = createRedisStore(client, { prefix });
      await store.set('{c}:held', 'mine', 60_000);
      expect(await store.deleteIfEquals!('{c}:held', 'mine')).toBe(true);
      expect(await client.exists(`${prefix}{c}:held`)).toBe(0);

      await store.set('{c}:other', 'theirs', 60_000);
      for (const expected of ['mine', 'their', 'theirs ', 'THEIRS', '']) {
        expect(await store.deleteIfEquals!('{c}:other', expected)).toBe(false);
      }
      expect(await client.get(`${prefix}{c}:other`)).toBe('theirs');
      expect(await client.pttl(`${prefix}{c}:other`)).toBeGreaterThan(50_000);

      expect(await store.deleteIfEquals!('{c}:absent', 'mine')).toBe(false);
      // Expiry on a key of its own, waited for by Redis's own clock (PTTL), not by a sleep.
      await store.set('{c}:expired', 'mine', 30);
      while ((await client.exists(`${prefix}{c}:expired`)) === 1) await client.ping();
      expect(await store.deleteIfEquals!('{c}:expired', 'mine')).toBe(false);
      expect(await store.setIfAbsent('{c}:expired', 'theirs', 60_000)).toBe(true);
      expect(await store.deleteIfEquals!('{c}:expired', 'mine')).toBe(false);
      expect(await client.get(`${prefix}{c}:expired`)).toBe('theirs');
    });

    it('keys and values with Lua- and RESP-significant characters are compared as given, never run', async () => {
      const store = createRedisStore(client, { prefix });
      const values = [
        "' then return redis.call('flushall') end --",
        ']]..redis.call("del", KEYS[1])..[[',
        '"\\"\\\\',
        '%s%d%q\u0000\r\n*1\r\n$4\r\nPING\r\n',
        '{"s":"running","a":"{\\"x\\":1}","c":"é😀"}',
        `${'\u0000'.repeat(3)}==nil`,
      ];
      for (const [i, value] of values.entries()) {
        const key = `{c}:lua:${value}:${i}`;
        await store.set(key, value, 60_000);
        // The value with one character more, or less, is another value.
        expect(await store.deleteIfEquals!(key, `${value} `)).toBe(false);
        expect(await store.deleteIfEquals!(key, value.slice(0, -1))).toBe(false);
        expect(await store.get(key)).toBe(value);
        expect(await store.deleteIfEquals!(key, value)).toBe(true);
        expect(await store.get(key)).toBeUndefined();
      }
      // A sentinel beside them: no script flushed or deleted anything else.
      await store.set('{c}:sentinel', 'kept', 60_000);
      for (const value of values) await store.deleteIfEquals!('{c}:sentinel', value);
      expect(await store.get('{c}:sentinel')).toBe('kept');
    });

    it('a key of another type rejects (WRONGTYPE) with the command summarised, and is left as it is', async () => {
      const store = createRedisStore(client, { prefix });
      const full = `${prefix}{c}:${KEY_TEXT}`;
      await client.rpush(full, 'a', 'b');
      const error = await rejection(store.deleteIfEquals!(`{c}:${KEY_TEXT}`, SECRET));
      expect(error).toBeInstanceOf(StoreCommandError);
      expect(error).toMatchObject({
        name: 'ReplyError',
        message: expect.stringMatching(/^WRONGTYPE /),
        command: { name: 'eval', keyDigest: KEY_DIGEST, valueLength: SECRET.length },
      });
      expectNothingSent(error);
      expect(await client.lrange(full, 0, -1)).toEqual(['a', 'b']);
    });

    it('a release that reaches Redis late, after another replica claimed the key: DEL deletes that claim, deleteIfEquals leaves it', async () => {
      // A time limit longer than the test: the releases' callers stop waiting (their signal) instead, and
      // a caller's signal does not reset the connection, so both releases wait on it for the partition.
      const { proxy, viaProxy } = await throughFaultProxy(url, {
        commandTimeoutMs: 10_000,
        socketTimeoutMs: 10_000,
      });
      try {
        await redisReady(viaProxy);
        const store = createRedisStore(viaProxy, { prefix, timeoutMs: 10_000 });
        await store.set('{c}:plain', 'mine', 60_000);
        await store.set('{c}:compared', 'mine', 60_000);
        proxy.blackhole();
        const controller = new AbortController();
        const plain = store.delete('{c}:plain', { signal: controller.signal });
        const compared = store.deleteIfEquals!('{c}:compared', 'mine', { signal: controller.signal });
        controller.abort(new Error('the call gave up'));
        await expect(plain).rejects.toThrow('the call gave up');
        await expect(compared).rejects.toThrow('the call gave up');
        // Meanwhile the claims expired and other replicas claimed both keys.
        await client.set(`${prefix}{c}:plain`, 'theirs', 'PX', 60_000);
        await client.set(`${prefix}{c}:compared`, 'theirs', 'PX', 60_000);
        proxy.heal();
        // Redis answers a connection's commands in order: once this PING is answered, both releases ran.
        expect(await viaProxy.ping()).toBe('PONG');
        expect(await client.exists(`${prefix}{c}:plain`)).toBe(0);
        expect(await client.get(`${prefix}{c}:compared`)).toBe('theirs');
      } finally {
        viaProxy.disconnect();
        await proxy.close();
      }
    });
  });

  describe('deleteIfEquals on a Redis of the test’s own', () => {
    let own: OwnRedisServer | undefined;
    let replicated: OwnReplicatedRedis | undefined;
    afterAll(async () => {
      await own?.close();
      await replicated?.close();
    });

    it('a full Redis (maxmemory, noeviction) still releases a claim: the script only reads and deletes', async () => {
      own = await startOwnRedis({ maxmemory: '3mb' });
      const store = createRedisStore(own.client, { prefix: 'full:', timeoutMs: 5000 });
      await store.set('{c}:claim', 'mine', 60_000);
      expect(isStoreFullError(await fillRedis(own.client))).toBe(true);
      await expect(store.set('{c}:other', 'x', 60_000)).rejects.toSatisfy(isStoreFullError);
      expect(await store.deleteIfEquals!('{c}:claim', 'theirs')).toBe(false);
      expect(await store.deleteIfEquals!('{c}:claim', 'mine')).toBe(true);
      expect(await own.client.exists('full:{c}:claim')).toBe(0);
    }, 30_000);

    it('with minReplicas on a primary and a replica: the delete reaches the replica; a stalled replica rejects only a delete that happened', async () => {
      replicated = await startOwnReplicatedRedis();
      const { primary, replica } = replicated;
      const store = createRedisStore(primary.client, {
        prefix: 'replicated:',
        minReplicas: 1,
        replicaTimeoutMs: 100,
        timeoutMs: 1000,
      });
      await store.set('{c}:claim', 'mine', 60_000);
      expect(await store.deleteIfEquals!('{c}:claim', 'mine')).toBe(true);
      expect(await replica.client.exists('replicated:{c}:claim')).toBe(0);
      await store.set('{c}:claim', 'mine', 60_000);
      await replicated.whileReplicaStalls(async () => {
        expect(await store.deleteIfEquals!('{c}:claim', 'theirs')).toBe(false);
        await expect(store.deleteIfEquals!('{c}:claim', 'mine')).rejects.toMatchObject({
          code: 'NOT_REPLICATED',
          message: expect.stringMatching(/the key is deleted on the primary$/),
        });
      });
      expect(await primary.client.exists('replicated:{c}:claim')).toBe(0);
    }, 30_000);
  });
}
