// Writes that replicas must acknowledge (`minReplicas`: each write followed by WAIT), on a primary and a
// replica of the test's own: what is sent, and what a stalled replica does to each write. What the model
// sees through idempotency and confirm is tested in those packages (test/replicas.test.ts).
import type { Socket } from 'node:net';
import { inspect } from 'node:util';
import { StoreCommandError } from '@toolgate/core';
import { recordingLogger } from '@toolgate/core/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createRedisClient, createRedisStore, type RedisStoreClient, redisReady } from '../src/index.js';
import { type OwnReplicatedRedis, startOwnReplicatedRedis } from '../src/testing.js';
import { reportRedisMissing, TEST_REDIS_URL } from './needs-redis.js';

/** What must never appear in an error: a piece of the value, and the key's own text. */
const SECRET = 'card 4111-1111-1111-1111 of Jane Roe';
const KEY_TEXT = 'page-7Qx2';
const KEY_DIGEST = expect.stringMatching(/^sha256:[\w-]{43}$/);
/**
 * The stores under test wait for one replica 100 ms, within a time limit far above it: Redis ends a WAIT
 * on its timer (up to 100 ms late at the default hz), and a loaded machine must not turn the store's own
 * answer into a TimeoutError.
 */
const WAITING = { minReplicas: 1, replicaTimeoutMs: 100, timeoutMs: 1000 };

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

describe('createRedisStore: minReplicas and replicaTimeoutMs', () => {
  const pipelined: RedisStoreClient = {
    ...fake,
    pipeline: () => {
      throw new Error('nothing is sent in these tests');
    },
    eval: async () => 0,
  };

  it('refuses values that are not whole numbers in range, naming createRedisStore', () => {
    const refusals: [object, ErrorConstructor, string][] = [
      [
        { minReplicas: 1.5 },
        RangeError,
        'createRedisStore: minReplicas must be a whole number from 0, got 1.5',
      ],
      [
        { minReplicas: -1 },
        RangeError,
        'createRedisStore: minReplicas must be a whole number from 0, got -1',
      ],
      [{ minReplicas: '1' }, TypeError, 'createRedisStore: minReplicas must be a number, got string'],
      [
        { minReplicas: 1, replicaTimeoutMs: 0 },
        RangeError,
        'createRedisStore: replicaTimeoutMs must be a whole number of milliseconds from 1 to below timeoutMs (200), got 0',
      ],
      [
        { minReplicas: 1, replicaTimeoutMs: 50.5 },
        RangeError,
        'createRedisStore: replicaTimeoutMs must be a whole number of milliseconds from 1 to below timeoutMs (200), got 50.5',
      ],
      [
        { minReplicas: 1, replicaTimeoutMs: 200 },
        RangeError,
        'createRedisStore: replicaTimeoutMs must be a whole number of milliseconds from 1 to below timeoutMs (200), got 200',
      ],
      [
        { minReplicas: 1, timeoutMs: 100, replicaTimeoutMs: 150 },
        RangeError,
        'createRedisStore: replicaTimeoutMs must be a whole number of milliseconds from 1 to below timeoutMs (100), got 150',
      ],
      [
        { replicaTimeoutMs: '50' },
        TypeError,
        'createRedisStore: replicaTimeoutMs must be a number, got string',
      ],
    ];
    for (const [options, kind, message] of refusals) {
      expect(() => createRedisStore(pipelined, { prefix: 'test:', ...options })).toThrow(kind);
      expect(() => createRedisStore(pipelined, { prefix: 'test:', ...options })).toThrow(message);
    }
    expect(
      createRedisStore(pipelined, { prefix: 'test:', minReplicas: 2, replicaTimeoutMs: 150 }).prefix,
    ).toBe('test:');
    expect(createRedisStore(pipelined, { prefix: 'test:', minReplicas: 0 }).prefix).toBe('test:');
  });

  it('needs pipeline() and eval() only when a write waits for replicas', () => {
    expect(() => createRedisStore(fake, { prefix: 'test:', minReplicas: 1 })).toThrow(
      new TypeError(
        'createRedisStore: minReplicas needs a client with pipeline() and eval() (an ioredis client, as createRedisClient makes)',
      ),
    );
    expect(createRedisStore(fake, { prefix: 'test:' }).prefix).toBe('test:');
  });

  it("refuses a replicaTimeoutMs the client's own commandTimeout would cut short", () => {
    const short = createRedisClient('redis://127.0.0.1:1', {
      commandTimeoutMs: 40,
      redis: { lazyConnect: true },
    });
    const shared = createRedisClient('redis://127.0.0.1:1', { redis: { lazyConnect: true } });
    try {
      expect(() => createRedisStore(short, { prefix: 'test:', minReplicas: 1 })).toThrow(
        new RangeError(
          "createRedisStore: replicaTimeoutMs (50) must be below the client's commandTimeout (40), or the client gives up on every WAIT",
        ),
      );
      expect(createRedisStore(short, { prefix: 'test:', minReplicas: 1, replicaTimeoutMs: 30 }).prefix).toBe(
        'test:',
      );
      expect(createRedisStore(shared, { prefix: 'test:', minReplicas: 1, timeoutMs: 400 }).prefix).toBe(
        'test:',
      );
    } finally {
      short.disconnect();
      shared.disconnect();
    }
  });

  it('by default a write waits for replicas a quarter of timeoutMs', async () => {
    const waits: number[][] = [];
    const client: RedisStoreClient = {
      ...fake,
      pipeline() {
        const pipeline = {
          set: () => pipeline,
          del: () => pipeline,
          eval: () => pipeline,
          wait(numreplicas: number, timeoutMs: number) {
            waits.push([numreplicas, timeoutMs]);
            return pipeline;
          },
          exec: async (): Promise<[Error | null, unknown][]> => [
            [null, 'OK'],
            [null, 3],
          ],
        };
        return pipeline;
      },
      eval: async () => 0,
    };
    await createRedisStore(client, { prefix: 'test:', minReplicas: 3 }).set('k', 'v', 1000);
    await createRedisStore(client, { prefix: 'test:', minReplicas: 2, timeoutMs: 500 }).set('k', 'v', 1000);
    expect(waits).toEqual([
      [3, 50],
      [2, 125],
    ]);
  });
});

describe('createRedisStore: a claim too few replicas acknowledged', () => {
  /** A client whose pipeline answers `reply` to the write and `acknowledged` to WAIT. */
  const answering = (reply: unknown, acknowledged: number, withdrawal: () => Promise<unknown>) => {
    const withdrawals: unknown[][] = [];
    const client: RedisStoreClient = {
      ...fake,
      pipeline() {
        const pipeline = {
          set: () => pipeline,
          del: () => pipeline,
          eval: () => pipeline,
          wait: () => pipeline,
          exec: async (): Promise<[Error | null, unknown][]> => [
            [null, reply],
            [null, acknowledged],
          ],
        };
        return pipeline;
      },
      eval: (...args: unknown[]) => {
        withdrawals.push(args);
        return withdrawal();
      },
    };
    return { client, withdrawals };
  };

  it('a withdrawal Redis refuses is named in the message (no key, no value); the claim stays until its ttl', async () => {
    const { client, withdrawals } = answering('OK', 1, () =>
      Promise.reject(
        Object.assign(new Error(`NOPERM no permission to run 'eval' on ${KEY_TEXT}`), { name: 'ReplyError' }),
      ),
    );
    const store = createRedisStore(client, { prefix: 'test:', minReplicas: 2, replicaTimeoutMs: 40 });
    const error = await rejection(store.setIfAbsent(`{c}:${KEY_TEXT}`, SECRET, 1000));
    expect(error).toMatchObject({
      name: 'NotReplicatedError',
      code: 'NOT_REPLICATED',
      message:
        'RedisStore: only 1 of 2 replicas acknowledged the write within 40 ms (WAIT); withdrawing the claim failed (ReplyError): it stays on the primary until its ttl',
    });
    expectNothingSent(error);
    expect(withdrawals).toHaveLength(1);
    expect(withdrawals[0]!.slice(1)).toEqual([1, `test:{c}:${KEY_TEXT}`, SECRET]);
  });

  it('a SET NX that did not claim is not withdrawn (the key is not its own), and still rejects', async () => {
    const { client, withdrawals } = answering(null, 0, async () => 1);
    const store = createRedisStore(client, { prefix: 'test:', minReplicas: 1 });
    await expect(store.setIfAbsent('{c}:k', 'v', 1000)).rejects.toMatchObject({
      code: 'NOT_REPLICATED',
      message:
        'RedisStore: only 0 of 1 replicas acknowledged the write within 50 ms (WAIT); the key was not claimed',
    });
    expect(withdrawals).toEqual([]);
  });
});

// Redis tests run where Redis does (TEST_REDIS_URL), as every other test starting a redis-server of its own.
if (TEST_REDIS_URL === undefined) {
  reportRedisMissing('the replica acknowledgement tests (they start a primary and a replica of their own)');
} else {
  describe('minReplicas on a primary and a replica of its own', () => {
    let own: OwnReplicatedRedis;
    /** The client the stores under test use (`own.primary.client` inspects, on a connection of its own). */
    let client: Redis;
    let prefix = '';
    let test = 0;
    beforeAll(async () => {
      own = await startOwnReplicatedRedis();
      client = createRedisClient(own.primary.url, { logger: recordingLogger([]) });
      await redisReady(client);
    }, 30_000);
    beforeEach(() => {
      test += 1;
      prefix = `replicas-${test}:`;
    });
    afterAll(async () => {
      client?.disconnect();
      await own?.close();
    });
    const whileReplicaStalls = <T>(work: () => Promise<T>): Promise<T> => own.whileReplicaStalls(work);

    /** The commands `client` sent while `work` ran, as MONITOR on the primary saw them. */
    const commandsOf = async (work: () => Promise<void>): Promise<string[][]> => {
      const addr = /(?:^| )addr=(\S+)/.exec(String(await client.client('INFO')))?.[1];
      // Its own client ready first: a command landing right behind MONITOR's reply (this client's ready
      // check, INFO) can reach ioredis before it has switched the connection to monitoring ("Command
      // queue state error", once in CI).
      const base = new Redis(own.primary.url);
      await base.ping();
      const monitor = await base.monitor();
      const seen: string[][] = [];
      let sawEnd: () => void = () => {};
      const ended = new Promise<void>((resolve) => {
        sawEnd = resolve;
      });
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (source !== addr) return;
        if (args[0] === 'echo' && args[1] === 'end-of-work') sawEnd();
        else seen.push(args);
      });
      try {
        await work();
        await client.echo('end-of-work');
        await ended;
        return seen;
      } finally {
        monitor.disconnect();
        base.disconnect();
      }
    };

    it('each write goes out with WAIT right behind it, in the same round trip, and succeeds once the replica holds it', async () => {
      const store = createRedisStore(client, { prefix, ...WAITING });
      const commands = await commandsOf(async () => {
        expect(await store.setIfAbsent('{c}:claim', 'first', 60_000)).toBe(true);
        // WAIT answered: the replica holds the write the moment the store says it is done.
        expect(await own.replica.client.get(`${prefix}{c}:claim`)).toBe('first');
        expect(await store.setIfAbsent('{c}:claim', 'second', 60_000)).toBe(false);
        await store.set('{c}:k', 'v', 60_000);
        expect(await own.replica.client.get(`${prefix}{c}:k`)).toBe('v');
        expect(await store.get('{c}:k')).toBe('v');
        expect(await store.delete('{c}:k')).toBe(true);
        expect(await own.replica.client.exists(`${prefix}{c}:k`)).toBe(0);
        expect(await store.delete('{c}:k')).toBe(false);
      });
      expect(commands).toEqual([
        ['set', `${prefix}{c}:claim`, 'first', 'PX', '60000', 'NX'],
        ['wait', '1', '100'],
        ['set', `${prefix}{c}:claim`, 'second', 'PX', '60000', 'NX'],
        ['wait', '1', '100'],
        ['set', `${prefix}{c}:k`, 'v', 'PX', '60000'],
        ['wait', '1', '100'],
        ['get', `${prefix}{c}:k`],
        ['del', `${prefix}{c}:k`],
        ['wait', '1', '100'],
        ['del', `${prefix}{c}:k`],
        ['wait', '1', '100'],
      ]);
      // Pipelined: the WAIT leaves before the write's reply arrives (no second round trip).
      const stream = (client as unknown as { stream: Socket }).stream;
      const events: string[] = [];
      const write = stream.write;
      const onData = (): number => events.push('reply');
      stream.write = function (this: Socket, chunk: unknown, ...rest: unknown[]) {
        events.push(`sent ${String(chunk)}`);
        return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
      } as typeof stream.write;
      stream.prependListener('data', onData);
      try {
        expect(await store.setIfAbsent('{c}:pipelined', 'v', 60_000)).toBe(true);
      } finally {
        stream.write = write;
        stream.off('data', onData);
      }
      const beforeReply = events.slice(0, events.indexOf('reply')).join('');
      expect(beforeReply).toContain('$3\r\nset\r\n');
      expect(beforeReply).toContain('$4\r\nwait\r\n$1\r\n1\r\n$3\r\n100\r\n');
    });

    it('without minReplicas no WAIT is sent', async () => {
      const store = createRedisStore(client, { prefix });
      const commands = await commandsOf(async () => {
        expect(await store.setIfAbsent('{c}:claim', 'first', 60_000)).toBe(true);
        await store.set('{c}:k', 'v', 60_000);
        expect(await store.get('{c}:k')).toBe('v');
        expect(await store.delete('{c}:k')).toBe(true);
      });
      expect(commands).toEqual([
        ['set', `${prefix}{c}:claim`, 'first', 'PX', '60000', 'NX'],
        ['set', `${prefix}{c}:k`, 'v', 'PX', '60000'],
        ['get', `${prefix}{c}:k`],
        ['del', `${prefix}{c}:k`],
      ]);
      // A replica down changes nothing without the option: the write succeeds on the primary alone.
      await whileReplicaStalls(async () => {
        await store.set('{c}:alone', 'v', 60_000);
      });
    });

    it('a stalled replica: each write rejects within its limit, naming no key or value; a claim is withdrawn, a set or delete stays on the primary', async () => {
      const store = createRedisStore(client, { prefix, ...WAITING });
      await store.set(`{c}:${KEY_TEXT}:gone`, 'held', 60_000);
      const value = `${SECRET}; ${SECRET}`;
      const [claim, set, removed] = await whileReplicaStalls(async () => [
        await rejection(store.setIfAbsent(`{c}:${KEY_TEXT}`, value, 60_000)),
        await rejection(store.set(`{c}:${KEY_TEXT}:set`, value, 60_000)),
        await rejection(store.delete(`{c}:${KEY_TEXT}:gone`)),
      ]);
      const said = 'RedisStore: only 0 of 1 replicas acknowledged the write within 100 ms (WAIT)';
      // Not a TimeoutError: WAIT answered within the store's own limit and the store said why.
      expect(claim).toBeInstanceOf(StoreCommandError);
      expect(claim).toMatchObject({
        name: 'NotReplicatedError',
        code: 'NOT_REPLICATED',
        message: `${said}; the claim was withdrawn from the primary`,
        command: {
          name: 'set',
          keyDigest: KEY_DIGEST,
          valueLength: value.length,
          options: ['PX', 60_000, 'NX'],
        },
      });
      expect(set).toMatchObject({
        name: 'NotReplicatedError',
        code: 'NOT_REPLICATED',
        message: `${said}; the value stays on the primary`,
        command: { name: 'set', keyDigest: KEY_DIGEST, valueLength: value.length, options: ['PX', 60_000] },
      });
      expect(removed).toMatchObject({
        name: 'NotReplicatedError',
        code: 'NOT_REPLICATED',
        message: `${said}; the key is deleted on the primary`,
        command: { name: 'del', keyDigest: KEY_DIGEST },
      });
      for (const error of [claim, set, removed]) expectNothingSent(error);
      expect(await own.primary.client.exists(`${prefix}{c}:${KEY_TEXT}`)).toBe(0);
      expect(await own.primary.client.get(`${prefix}{c}:${KEY_TEXT}:set`)).toBe(value);
      expect(await own.primary.client.exists(`${prefix}{c}:${KEY_TEXT}:gone`)).toBe(0);
      // The replica back: writes succeed again, and it catches up with the primary (the withdrawn claim
      // included).
      expect(await store.setIfAbsent(`{c}:${KEY_TEXT}`, 'again', 60_000)).toBe(true);
      expect(await own.replica.client.get(`${prefix}{c}:${KEY_TEXT}`)).toBe('again');
      expect(await own.replica.client.get(`${prefix}{c}:${KEY_TEXT}:set`)).toBe(value);
      expect(await own.replica.client.exists(`${prefix}{c}:${KEY_TEXT}:gone`)).toBe(0);
    });

    it('a caller that stops waiting for a claim and reads the key at once never sees the claim about to be withdrawn', async () => {
      const store = createRedisStore(client, { prefix, ...WAITING });
      const read = await whileReplicaStalls(async () => {
        const controller = new AbortController();
        const claim = store.setIfAbsent('{c}:claim', 'mine', 60_000, { signal: controller.signal });
        controller.abort(new Error('call cancelled'));
        await expect(claim).rejects.toThrow('call cancelled');
        // Sent at once, this GET would reach Redis behind the WAIT and before the withdrawal.
        return store.get('{c}:claim');
      });
      expect(read).toBeUndefined();
      expect(await own.primary.client.exists(`${prefix}{c}:claim`)).toBe(0);
    });
  });
}
