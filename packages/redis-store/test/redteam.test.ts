import { randomUUID } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisClient, createRedisStore, type RedisWritePipeline, redisReady } from '../src/index.js';
import { reportRedisMissing, TEST_REDIS_URL, throughFaultProxy } from './needs-redis.js';

const OFFLINE_QUEUE =
  'createRedisStore: create the ioredis client with enableOfflineQueue: false (createRedisClient does): a command issued while the connection is down is otherwise sent once it is back, after its caller gave up, and a claim or a release applied then acts for nobody or undoes what another replica did since';
const CLUSTER_RESEND =
  'createRedisStore: create the ioredis Cluster with retryDelayOnFailover: 0: a Cluster otherwise sends again a command whose connection closed before its reply, though Redis may have applied it';

describe('createRedisStore: clients that would send a command late', () => {
  it('refuses an ioredis client with an offline queue (ioredis default), by hand or through createRedisClient', () => {
    const byHand = new Redis({
      lazyConnect: true,
      autoResendUnfulfilledCommands: false,
      socketTimeout: 2000,
    });
    const overridden = createRedisClient('redis://127.0.0.1:1', {
      redis: { lazyConnect: true, enableOfflineQueue: true },
    });
    try {
      expect(() => createRedisStore(byHand, { prefix: 'test:' })).toThrow(new TypeError(OFFLINE_QUEUE));
      expect(() => createRedisStore(overridden, { prefix: 'test:' })).toThrow(new TypeError(OFFLINE_QUEUE));
    } finally {
      byHand.disconnect();
      overridden.disconnect();
    }
  });

  it('refuses an ioredis Cluster that queues offline or sends a command again after its connection closed', () => {
    const redisOptions = { autoResendUnfulfilledCommands: false, socketTimeout: 2000 };
    const nodes = [{ host: '127.0.0.1', port: 1 }];
    const queueing = new Cluster(nodes, { lazyConnect: true, redisOptions });
    const resending = new Cluster(nodes, { lazyConnect: true, enableOfflineQueue: false, redisOptions });
    const safe = new Cluster(nodes, {
      lazyConnect: true,
      enableOfflineQueue: false,
      retryDelayOnFailover: 0,
      redisOptions,
    });
    try {
      expect(() => createRedisStore(queueing as never, { prefix: 'test:' })).toThrow(
        new TypeError(OFFLINE_QUEUE),
      );
      expect(() => createRedisStore(resending as never, { prefix: 'test:' })).toThrow(
        new TypeError(CLUSTER_RESEND),
      );
      expect(createRedisStore(safe as never, { prefix: 'test:' }).prefix).toBe('test:');
    } finally {
      for (const cluster of [queueing, resending, safe]) cluster.disconnect();
    }
  });
});

describe('createRedisStore: a write left unanswered at the deadline', () => {
  const never = () => new Promise<never>(() => {});
  const connection = () => {
    const resets: string[] = [];
    return {
      resets,
      stream: {
        destroyed: false,
        resetAndDestroy: () => resets.push('reset'),
        destroy: () => resets.push('destroy'),
      },
    };
  };

  it('resets the connection it went out on; a read, or a write its caller cancelled, does not', async () => {
    const { resets, stream } = connection();
    const store = createRedisStore(
      { set: never, get: never, del: never, stream },
      { prefix: 'test:', timeoutMs: 30 },
    );
    await expect(store.get('k')).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(resets).toEqual([]);
    const controller = new AbortController();
    const cancelled = store.delete('k', { signal: controller.signal });
    controller.abort(new Error('call cancelled'));
    await expect(cancelled).rejects.toThrow('call cancelled');
    expect(resets).toEqual([]);
    await expect(store.delete('k')).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(resets).toEqual(['reset']);
    await expect(store.setIfAbsent('k', 'v', 1000)).rejects.toMatchObject({ name: 'TimeoutError' });
    await expect(store.set('k', 'v', 1000)).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(resets).toEqual(['reset', 'reset', 'reset']);
  });

  it("resets it when the client's own commandTimeout ends a write first, pipelined or not; not for a read or another error", async () => {
    const { resets, stream } = connection();
    // ioredis' own rejection of a command left unanswered at the client's commandTimeout.
    const timedOut = async () => Promise.reject(new Error('Command timed out'));
    const refused = async () =>
      Promise.reject(Object.assign(new Error('READONLY replica'), { code: 'READONLY' }));
    const plain = createRedisStore(
      { set: timedOut, get: timedOut, del: refused, eval: timedOut, stream },
      { prefix: 'test:', timeoutMs: 5000 },
    );
    await expect(plain.get('k')).rejects.toThrow('Command timed out');
    await expect(plain.delete('k')).rejects.toThrow('READONLY replica');
    expect(resets).toEqual([]);
    await expect(plain.set('k', 'v', 1000)).rejects.toThrow('Command timed out');
    await expect(plain.setIfAbsent('k', 'v', 1000)).rejects.toThrow('Command timed out');
    await expect(plain.deleteIfEquals!('k', 'v')).rejects.toThrow('Command timed out');
    expect(resets).toEqual(['reset', 'reset', 'reset']);
    // With minReplicas a pipeline answers each command's error in its results.
    const pipeline: RedisWritePipeline = {
      set: () => pipeline,
      del: () => pipeline,
      eval: () => pipeline,
      wait: () => pipeline,
      exec: async (): Promise<[Error | null, unknown][]> => [
        [new Error('Command timed out'), null],
        [new Error('Command timed out'), null],
      ],
    };
    const replicated = createRedisStore(
      { set: never, get: never, del: never, eval: timedOut, pipeline: () => pipeline, stream },
      { prefix: 'test:', timeoutMs: 5000, minReplicas: 1 },
    );
    await expect(replicated.set('k', 'v', 1000)).rejects.toThrow('Command timed out');
    expect(resets).toEqual(['reset', 'reset', 'reset', 'reset']);
  });

  it('closes a connection that cannot be reset (TLS), and leaves alone one already gone', async () => {
    const { resets, stream } = connection();
    const tls = {
      ...stream,
      resetAndDestroy: () => {
        throw new TypeError('not a TCP handle');
      },
    };
    const store = createRedisStore(
      { set: never, get: never, del: never, stream: tls },
      { prefix: 'test:', timeoutMs: 30 },
    );
    await expect(store.delete('k')).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(resets).toEqual(['destroy']);
    const gone = createRedisStore(
      { set: never, get: never, del: never, stream: { ...stream, destroyed: true } },
      { prefix: 'test:', timeoutMs: 30 },
    );
    await expect(gone.delete('k')).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(resets).toEqual(['destroy']);
  });
});

describe('createRedisStore: keys, values and ttls it cannot keep as given', () => {
  const fake = { set: async () => 'OK', get: async () => null, del: async () => 0 };
  const store = createRedisStore(fake, { prefix: 'test:' });

  it('refuses a key or a value that is not a string', () => {
    for (const key of [42, null, undefined, { toString: () => 'k' }]) {
      expect(() => store.get(key as never)).toThrow(
        new TypeError(`RedisStore: a key must be a string, got ${typeof key}`),
      );
      expect(() => store.delete(key as never)).toThrow(TypeError);
      expect(() => store.set(key as never, 'v', 1000)).toThrow(TypeError);
    }
    for (const value of [42, null, undefined, { a: 1 }, Buffer.from('v')]) {
      const refused = new TypeError(`RedisStore: a value must be a string, got ${typeof value}`);
      expect(() => store.set('k', value as never, 1000)).toThrow(refused);
      expect(() => store.setIfAbsent('k', value as never, 1000)).toThrow(refused);
    }
  });

  it('refuses a ttl Redis would refuse or read differently, before sending anything', () => {
    for (const ttl of [0, -1, 0.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, 1e21, '1000']) {
      expect(() => store.set('k', 'v', ttl as never)).toThrow(
        new RangeError(
          `RedisStore: ttlMs must be a whole number of milliseconds from 1 to 2^53 - 1, got ${ttl}`,
        ),
      );
      expect(() => store.setIfAbsent('k', 'v', ttl as never)).toThrow(RangeError);
    }
  });
});

if (TEST_REDIS_URL === undefined) {
  reportRedisMissing('the red-team tests on real Redis');
} else {
  const url = TEST_REDIS_URL;
  describe('createRedisStore on real Redis: hostile keys and values', () => {
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

    it('two keys that differ only in a lone surrogate are refused, not merged into one Redis key', async () => {
      const store = createRedisStore(client, { prefix });
      // UTF-8 has no lone surrogates: both would be stored as U+FFFD, one caller's claim blocking the other's.
      const refused = new TypeError(
        'RedisStore: a key may not hold a lone UTF-16 surrogate (Redis would store U+FFFD: two keys would be one)',
      );
      expect(() => store.setIfAbsent('{caller-a}:\uD800', 'a', 60_000)).toThrow(refused);
      expect(() => store.get('{caller-b}:\uDC00')).toThrow(refused);
      expect(() => store.delete('{caller-b}:\uDFFF')).toThrow(refused);
      expect(await client.keys(`${prefix}*`)).toEqual([]);
      // A well-formed pair (an emoji) is one code point and is kept as it is.
      expect(await store.setIfAbsent('{caller-a}:\uD83D\uDE00', 'a', 60_000)).toBe(true);
      expect(await store.get('{caller-a}:\uD83D\uDE00')).toBe('a');
    });

    it('a value with a lone surrogate is refused rather than read back changed', async () => {
      const store = createRedisStore(client, { prefix });
      expect(() => store.set('{caller-a}:v', 'token\uDBFF', 60_000)).toThrow(
        new TypeError(
          'RedisStore: a value may not hold a lone UTF-16 surrogate (Redis would store U+FFFD: it would read back changed)',
        ),
      );
      expect(await client.exists(`${prefix}{caller-a}:v`)).toBe(0);
    });

    it('keys with braces, CRLF and RESP look-alikes stay distinct keys; large values round trip exactly', async () => {
      const store = createRedisStore(client, { prefix });
      const keys = [
        '{caller-a}:x',
        '{caller-a}:x\r\n*1\r\n$4\r\nPING\r\n',
        '}{caller-a}:x',
        '{}:x',
        `{caller-a}:${'k'.repeat(10_000)}`,
        `${prefix}{caller-a}:x`,
      ];
      for (const [i, key] of keys.entries()) expect(await store.setIfAbsent(key, `v${i}`, 60_000)).toBe(true);
      for (const [i, key] of keys.entries()) expect(await store.get(key)).toBe(`v${i}`);
      const large = `${'é\r\n\u0000'.repeat(250_000)}\uD83D\uDE00`;
      await store.set('{caller-a}:large', large, 60_000);
      expect(await store.get('{caller-a}:large')).toBe(large);
    });

    it('a DEL its caller gave up on inside a partition is not applied once the partition heals', async () => {
      const { proxy, viaProxy } = await throughFaultProxy(url);
      try {
        await redisReady(viaProxy);
        const store = createRedisStore(viaProxy, { prefix, timeoutMs: 200 });
        await store.set('{caller-a}:claim', 'mine', 60_000);
        // A partition: the release is sent, and waits on the way (as TCP retransmits it) past its deadline.
        proxy.blackhole();
        await expect(store.delete('{caller-a}:claim')).rejects.toMatchObject({ name: 'TimeoutError' });
        // Its caller gave up; another replica takes the key over meanwhile.
        await client.set(`${prefix}{caller-a}:claim`, 'theirs', 'PX', 60_000);
        // The partition heals before the silent connection is closed (socketTimeout, 2 s).
        proxy.heal();
        await redisReady(viaProxy, 3000);
        // Had the release waited on its connection, it would reach Redis now, before this read.
        expect(await store.get('{caller-a}:claim')).toBe('theirs');
        expect(await client.get(`${prefix}{caller-a}:claim`)).toBe('theirs');
      } finally {
        viaProxy.disconnect();
        await proxy.close();
      }
    });

    it('the largest ttl it takes is one Redis keeps', async () => {
      const store = createRedisStore(client, { prefix });
      await store.set('{caller-a}:long', 'v', Number.MAX_SAFE_INTEGER);
      expect(await client.pttl(`${prefix}{caller-a}:long`)).toBeGreaterThan(2 ** 52);
    });
  });
}
