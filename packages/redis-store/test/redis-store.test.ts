import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:net';
import type { LogEntry } from '@toolgate/core/testing';
import { recordingLogger } from '@toolgate/core/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisClient, createRedisStore, redisReady } from '../src/index.js';
import { reportRedisMissing, TEST_REDIS_URL, throughFaultProxy } from './needs-redis.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('createRedisStore: options', () => {
  const fake = { set: async () => 'OK', get: async () => null, del: async () => 0 };
  it('requires a prefix: two servers sharing a Redis under a default one would share their state', () => {
    const missing =
      "createRedisStore: prefix is required: name this server's state (e.g. { prefix: 'orders-prod:' }), the same on all its replicas and another on every other server sharing the Redis; under one prefix, two servers share their state and one replays the other's results";
    expect(() => createRedisStore(fake, undefined as never)).toThrow(new TypeError(missing));
    expect(() => createRedisStore(fake, {} as never)).toThrow(new TypeError(missing));
    expect(() => createRedisStore(fake, { timeoutMs: 100 } as never)).toThrow(new TypeError(missing));
    for (const prefix of ['', 42, null]) {
      expect(() => createRedisStore(fake, { prefix } as never)).toThrow(
        new TypeError("createRedisStore: prefix must be a non-empty string (e.g. 'orders-prod:')"),
      );
    }
    expect(createRedisStore(fake, { prefix: 'orders-prod:' }).prefix).toBe('orders-prod:');
  });
  it('refuses a prefix with a brace (it would become every key hash tag)', () => {
    expect(() => createRedisStore(fake, { prefix: 'app:{x}:' })).toThrow(
      'createRedisStore: prefix may not contain { or } (keys carry their own hash tag)',
    );
  });
  it('refuses a ttl that is not a positive integer', async () => {
    const store = createRedisStore(fake, { prefix: 'test:' });
    expect(() => store.set('k', 'v', 0.5)).toThrow(
      'RedisStore: ttlMs must be a whole number of milliseconds from 1 to 2^53 - 1, got 0.5',
    );
  });
  it('rejects with TimeoutError when the client never answers, after timeoutMs', async () => {
    const store = createRedisStore(
      { ...fake, get: () => new Promise(() => {}) },
      { prefix: 'test:', timeoutMs: 30 },
    );
    await expect(store.get('k')).rejects.toMatchObject({ name: 'TimeoutError' });
  });
  it('refuses an ioredis client that sends again, after a reconnect, the commands whose replies were lost', () => {
    const message =
      'createRedisStore: create the ioredis client with autoResendUnfulfilledCommands: false (createRedisClient does): a write whose reply a dropped connection lost may have been applied, and sent again after the reconnect it can undo what other replicas did since';
    const resending = new Redis({ lazyConnect: true });
    expect(() => createRedisStore(resending, { prefix: 'test:' })).toThrow(message);
    expect(() =>
      createRedisStore(
        { ...fake, options: { redisOptions: { autoResendUnfulfilledCommands: true } } },
        { prefix: 'test:' },
      ),
    ).toThrow(message);
    // The shared client, a client set up by hand the same way, and a Cluster's node options are taken.
    const shared = createRedisClient('redis://127.0.0.1:1', { redis: { lazyConnect: true } });
    const byHand = new Redis({
      lazyConnect: true,
      autoResendUnfulfilledCommands: false,
      enableOfflineQueue: false,
      socketTimeout: 2000,
    });
    expect(createRedisStore(shared, { prefix: 'test:' }).prefix).toBe('test:');
    expect(createRedisStore(byHand, { prefix: 'test:' }).prefix).toBe('test:');
    expect(
      createRedisStore(
        {
          ...fake,
          options: {
            enableOfflineQueue: false,
            retryDelayOnFailover: 0,
            redisOptions: { autoResendUnfulfilledCommands: false, socketTimeout: 2000 },
          },
        },
        { prefix: 'test:' },
      ).prefix,
    ).toBe('test:');
    for (const client of [resending, shared, byHand]) client.disconnect();
  });
  it('refuses an ioredis client that would keep a connection gone silent for good (no socketTimeout)', () => {
    const message =
      'createRedisStore: create the ioredis client with socketTimeout (e.g. 2000 ms, as createRedisClient does): without it a connection that goes silent without a reset is never closed, every operation waits timeoutMs for the life of the process, and every command sent stays queued in the client';
    // A client set up by hand without it, as ioredis shows its options.
    const noTimeout = new Redis({
      lazyConnect: true,
      autoResendUnfulfilledCommands: false,
      enableOfflineQueue: false,
    });
    try {
      expect(() => createRedisStore(noTimeout, { prefix: 'test:' })).toThrow(new TypeError(message));
    } finally {
      noTimeout.disconnect();
    }
    // Not a time limit: 0, and past 2^31 - 1 ms, Node fires the timer after 1 ms (every wait cuts the
    // connection); NaN and a string are not numbers of milliseconds.
    for (const socketTimeout of [undefined, 0, -1, Number.NaN, Number.POSITIVE_INFINITY, '2000']) {
      const options = {
        autoResendUnfulfilledCommands: false,
        enableOfflineQueue: false,
        socketTimeout,
      } as never;
      expect(() => createRedisStore({ ...fake, options }, { prefix: 'test:' })).toThrow(message);
      const cluster = {
        enableOfflineQueue: false,
        retryDelayOnFailover: 0,
        redisOptions: { autoResendUnfulfilledCommands: false, socketTimeout },
      } as never;
      expect(() => createRedisStore({ ...fake, options: cluster }, { prefix: 'test:' })).toThrow(message);
    }
    // A structural client that shows no options is taken as it is (it may not be ioredis at all).
    expect(createRedisStore(fake, { prefix: 'test:' }).prefix).toBe('test:');
    expect(
      createRedisStore(
        {
          ...fake,
          options: { autoResendUnfulfilledCommands: false, enableOfflineQueue: false, socketTimeout: 1 },
        },
        { prefix: 'test:' },
      ).prefix,
    ).toBe('test:');
  });
  it("follows the caller's signal", async () => {
    const store = createRedisStore(
      { ...fake, get: () => new Promise(() => {}) },
      { prefix: 'test:', timeoutMs: 10_000 },
    );
    const controller = new AbortController();
    const pending = store.get('k', { signal: controller.signal });
    controller.abort(new Error('call cancelled'));
    await expect(pending).rejects.toThrow('call cancelled');
  });
});

describe('createRedisClient: Redis is not there', () => {
  let server: Server | undefined;
  afterAll(() => server?.close());

  it('a closed port fails each operation at once and logs one line per incident', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as AddressInfo;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const entries: LogEntry[] = [];
    const client = createRedisClient(`redis://127.0.0.1:${port}`, { logger: recordingLogger(entries) });
    const store = createRedisStore(client, { prefix: 'test:' });
    try {
      for (let i = 0; i < 5; i += 1) {
        await expect(store.setIfAbsent('k', 'v', 1000)).rejects.toThrow(
          /enableOfflineQueue|Connection is closed|ECONNREFUSED/,
        );
        await sleep(60); // let ioredis retry the connection a few times
      }
      expect(entries.filter((entry) => entry.message?.startsWith('redis: connection error'))).toHaveLength(1);
      expect(entries[0]).toMatchObject({ level: 'warn', fields: { err: { code: 'ECONNREFUSED' } } });
    } finally {
      client.disconnect();
    }
  });

  it('a server that accepts and never answers: operations end within the time limit, no hang', async () => {
    server = createServer(() => {}); // holds every connection open in silence
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const client = createRedisClient(`redis://127.0.0.1:${port}`, { logger: recordingLogger([]) });
    const store = createRedisStore(client, { prefix: 'test:', timeoutMs: 100 });
    try {
      await expect(store.get('k')).rejects.toThrow();
      await expect(store.set('k', 'v', 1000)).rejects.toThrow();
    } finally {
      client.disconnect();
    }
  });
});

if (TEST_REDIS_URL === undefined) {
  reportRedisMissing('the real-Redis store tests');
} else {
  const url = TEST_REDIS_URL;
  describe('createRedisStore on real Redis', () => {
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

    it('setIfAbsent is SET NX PX: the first wins, the value is kept, it expires', async () => {
      const store = createRedisStore(client, { prefix });
      expect(await store.setIfAbsent('{caller-a}:claim', 'first', 60_000)).toBe(true);
      expect(await store.setIfAbsent('{caller-a}:claim', 'second', 60_000)).toBe(false);
      expect(await store.get('{caller-a}:claim')).toBe('first');
      expect(await client.get(`${prefix}{caller-a}:claim`)).toBe('first');
      const ttl = await client.pttl(`${prefix}{caller-a}:claim`);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(60_000);
      // Expiry on a key of its own: a short TTL on the key above could run out between the commands of a
      // loaded machine.
      expect(await store.setIfAbsent('{caller-a}:short', 'first', 50)).toBe(true);
      await sleep(120);
      expect(await store.get('{caller-a}:short')).toBeUndefined();
      expect(await store.setIfAbsent('{caller-a}:short', 'third', 1000)).toBe(true);
    });

    it('of 20 concurrent claims on one key exactly one wins', async () => {
      const store = createRedisStore(client, { prefix });
      const wins = await Promise.all(
        Array.from({ length: 20 }, (_, i) => store.setIfAbsent('race', `r${i}`, 5000)),
      );
      expect(wins.filter(Boolean)).toHaveLength(1);
    });

    it('set replaces, get reads, delete says whether it removed something', async () => {
      const store = createRedisStore(client, { prefix });
      await store.set('k', 'one', 5000);
      await store.set('k', 'two', 5000);
      expect(await store.get('k')).toBe('two');
      expect(await store.delete('k')).toBe(true);
      expect(await store.delete('k')).toBe(false);
      expect(await store.get('k')).toBeUndefined();
    });

    it('an aborted signal refuses before sending anything', async () => {
      const store = createRedisStore(client, { prefix });
      await expect(
        store.set('never', 'v', 5000, { signal: AbortSignal.abort(new Error('gone')) }),
      ).rejects.toThrow('gone');
      expect(await client.exists(`${prefix}never`)).toBe(0);
    });

    it('the shared client speaks RESP2, has no offline queue and never sends a command twice', () => {
      expect(client.options).toMatchObject({
        protocol: 2,
        enableOfflineQueue: false,
        autoResendUnfulfilledCommands: false,
        maxRetriesPerRequest: 0,
        socketTimeout: 2000,
      });
    });

    it('a connection that goes silent without a reset is closed and made again: commands succeed after it', async () => {
      const { proxy, viaProxy } = await throughFaultProxy(url, { socketTimeoutMs: 300 });
      try {
        await redisReady(viaProxy);
        const store = createRedisStore(viaProxy, { prefix, timeoutMs: 200 });
        await store.set('{caller-a}:silent', 'kept', 60_000);
        const connectionsBefore = proxy.connections;
        // A NAT that forgot the flow: the open connection carries nothing either way, and nothing resets it.
        proxy.silenceLive();
        const closed = new Promise((resolve) => viaProxy.once('close', resolve));
        await expect(store.get('{caller-a}:silent')).rejects.toMatchObject({ name: 'TimeoutError' });
        // Without socketTimeout ioredis keeps the silent connection and this waits forever.
        await closed;
        await redisReady(viaProxy, 3000);
        expect(await store.get('{caller-a}:silent')).toBe('kept');
        expect(proxy.connections).toBeGreaterThan(connectionsBefore);
      } finally {
        viaProxy.disconnect();
        await proxy.close();
      }
    });

    it('a DEL whose reply a dropped connection lost fails, and is not sent again after the reconnect', async () => {
      const { proxy, viaProxy } = await throughFaultProxy(url);
      try {
        await redisReady(viaProxy);
        const store = createRedisStore(viaProxy, { prefix, timeoutMs: 200 });
        await store.set('{caller-a}:claim', 'mine', 60_000);
        // The DEL reaches Redis, which applies it; its reply is never delivered.
        proxy.silenceAfter((chunk) => chunk.toString('latin1').startsWith('*2\r\n$3\r\ndel\r\n'));
        // The store resets the connection of a write left unanswered at its deadline.
        const closed = new Promise((resolve) => viaProxy.once('close', resolve));
        await expect(store.delete('{caller-a}:claim')).rejects.toMatchObject({ name: 'TimeoutError' });
        await closed;
        expect(await client.exists(`${prefix}{caller-a}:claim`)).toBe(0);
        // Another replica claims the key meanwhile.
        await client.set(`${prefix}{caller-a}:claim`, 'theirs', 'PX', 60_000);
        // The client connects again and answers commands.
        await redisReady(viaProxy, 3000);
        expect(await store.get('{caller-a}:claim')).toBe('theirs');
        expect(await client.get(`${prefix}{caller-a}:claim`)).toBe('theirs');
      } finally {
        viaProxy.disconnect();
        await proxy.close();
      }
    });

    it("a write the client's own shorter commandTimeout ended is not applied when the partition heals", async () => {
      // The client gives up on a command at 100 ms, the store would wait 5 s: ioredis rejects the write
      // first, and the store's own deadline never sees it unanswered.
      const { proxy, viaProxy } = await throughFaultProxy(url, {
        commandTimeoutMs: 100,
        // Longer than the test: the only thing that may close the connection is the store's reset.
        socketTimeoutMs: 60_000,
      });
      try {
        await redisReady(viaProxy);
        const store = createRedisStore(viaProxy, { prefix, timeoutMs: 5000 });
        proxy.blackhole();
        const closed = new Promise((resolve) => viaProxy.once('close', resolve));
        await expect(store.setIfAbsent('{caller-a}:late', 'nobody', 60_000)).rejects.toMatchObject({
          message: 'Command timed out',
          command: { name: 'set' },
        });
        // The store resets the connection the write went out on (without that, nothing closes it).
        await closed;
        // The partition heals within the socketTimeout: what the kernel still held would now reach Redis.
        proxy.heal();
        await redisReady(viaProxy, 3000);
        // A command sent after the heal: on the kept connection it would follow the held SET NX.
        expect(await store.get('{caller-a}:late')).toBeUndefined();
        expect(await client.exists(`${prefix}{caller-a}:late`)).toBe(0);
      } finally {
        viaProxy.disconnect();
        await proxy.close();
      }
    });
  });
}

describe('redisReady', () => {
  it('rejects after its time limit when Redis never becomes ready', async () => {
    const client = createRedisClient('redis://127.0.0.1:1', { logger: recordingLogger([]) });
    try {
      await expect(redisReady(client, 100)).rejects.toThrow(/^redis: not ready within 100 ms \(status /);
    } finally {
      client.disconnect();
    }
  });
});
