// A command Redis refuses must not put what was sent into the log: ioredis hangs every argument of a
// failed command on its error (`command.args`), so a 6 MB result (customer data) went whole into a log
// line. The store's errors carry the command's name, a digest of its key and the value's length only.
// Real refusals on a redis-server of the test's own (maxmemory and ACLs are server-wide).
import { createHash } from 'node:crypto';
import { inspect } from 'node:util';
import { createStderrLogger, isStoreFullError } from '@toolgate/core';
import { recordingLogger } from '@toolgate/core/testing';
import { type Redis, ReplyError } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createRedisClient, createRedisStore, redisReady } from '../src/index.js';
import { fillRedis, type OwnRedisServer, startOwnRedis } from '../src/testing.js';
import { reportRedisMissing, TEST_REDIS_URL } from './needs-redis.js';

/** What must never appear: a piece of the value, and the key's own text (a confirmation page's id). */
const SECRET = 'card 4111-1111-1111-1111 of Jane Roe';
const KEY_TEXT = 'page-7Qx2';

/** A value of about `size` characters, made of the secret. */
const secretValue = (size: number): string => `${SECRET}; `.repeat(Math.ceil(size / (SECRET.length + 2)));

/** The three ways an error reaches a log: JSON, Node's inspect, and core's stderr logger line. */
function serialisations(error: unknown): string[] {
  const lines: string[] = [];
  createStderrLogger({ stream: { write: (line: string) => lines.push(line) } }).warn(
    { err: error },
    'redis: a command failed',
  );
  return [JSON.stringify(error), inspect(error, { depth: Number.POSITIVE_INFINITY }), ...lines];
}

function expectNothingSent(error: unknown, valueLength?: number): void {
  const [json, ...logged] = serialisations(error);
  for (const text of [json, ...logged]) {
    expect(text).not.toContain(SECRET.slice(0, 9));
    expect(text).not.toContain(KEY_TEXT);
  }
  // What the log gets instead (JSON.stringify leaves out a cause, where a StoreFullError keeps it).
  for (const text of logged) if (valueLength !== undefined) expect(text).toContain(`${valueLength}`);
}

const rejection = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );

const KEY_DIGEST = expect.stringMatching(/^sha256:[\w-]{43}$/);

describe('createRedisStore: a reply that echoes what was sent', () => {
  it("Redis's 'unknown command' echo of the first arguments is cut from the message", async () => {
    const value = secretValue(300);
    const reply = new ReplyError(
      `ERR unknown command 'set', with args beginning with: 'toolgate:{c}:${KEY_TEXT}' '${value.slice(0, 80)}' `,
    );
    Object.assign(reply, { command: { name: 'set', args: [`toolgate:{c}:${KEY_TEXT}`, value] } });
    const store = createRedisStore(
      {
        set: async () => {
          throw reply;
        },
        get: async () => null,
        del: async () => 0,
      },
      { prefix: 'test:' },
    );
    const error = await rejection(store.setIfAbsent(`{c}:${KEY_TEXT}`, value, 1000));
    expect(error).toMatchObject({
      name: 'ReplyError',
      message: "ERR unknown command 'set'",
      command: { name: 'set', keyDigest: KEY_DIGEST, valueLength: value.length, options: ['PX', 1000, 'NX'] },
    });
    expectNothingSent(error, value.length);
  });

  it('a client that throws something not an Error: the store still throws an Error naming the command', async () => {
    const store = createRedisStore(
      {
        set: async () => 'OK',
        get: async () => {
          throw { detail: SECRET };
        },
        del: async () => 0,
      },
      { prefix: 'test:' },
    );
    const error = await rejection(store.get(`{c}:${KEY_TEXT}`));
    expect(error).toBeInstanceOf(Error);
    expect(error).toMatchObject({ name: 'Error', command: { name: 'get', keyDigest: KEY_DIGEST } });
    expectNothingSent(error);
  });
});

if (TEST_REDIS_URL === undefined) {
  reportRedisMissing('the refused-write tests (they start a redis-server of their own)');
} else {
  describe('createRedisStore: a write Redis refuses carries no value in its error', () => {
    let own: OwnRedisServer;
    let patient: Redis;
    beforeAll(async () => {
      own = await startOwnRedis({ maxmemory: '3mb' });
      // Time enough to send 6 MB on a busy machine, so Redis answers OOM rather than a time limit.
      patient = createRedisClient(own.url, { commandTimeoutMs: 5000, logger: recordingLogger([]) });
      await redisReady(patient);
    }, 20_000);
    beforeEach(async () => {
      await own.client.flushall();
      await own.client.config('SET', 'maxmemory', '0');
    });
    afterAll(async () => {
      patient?.disconnect();
      await own?.close();
    });
    const storeOn = (client: Redis) => createRedisStore(client, { prefix: 'refused:', timeoutMs: 5000 });

    it('OOM (a full Redis): SET of a 6 MB value and SET NX reject with StoreFullError, the value only as its length', async () => {
      await own.client.config('SET', 'maxmemory', '3mb');
      expect(isStoreFullError(await fillRedis(own.client))).toBe(true);
      const store = storeOn(patient);
      const big = secretValue(6 * 1024 * 1024);
      const small = secretValue(200);
      for (const [write, value, options] of [
        [() => store.set(`{c}:${KEY_TEXT}`, big, 60_000), big, ['PX', 60_000]],
        [() => store.setIfAbsent(`{c}:${KEY_TEXT}`, small, 60_000), small, ['PX', 60_000, 'NX']],
      ] as const) {
        const error = await rejection(write());
        expect(isStoreFullError(error)).toBe(true);
        expect((error as Error).cause).toMatchObject({
          name: 'ReplyError',
          message: expect.stringMatching(/^OOM command not allowed/),
          command: { name: 'set', keyDigest: KEY_DIGEST, valueLength: value.length, options },
        });
        expectNothingSent(error, value.length);
      }
    }, 30_000);

    it('NOREPLICAS (min-replicas-to-write unmet): SET and SET NX reject with the reply, the value only as its length', async () => {
      await own.client.config('SET', 'min-replicas-to-write', '1');
      try {
        const store = storeOn(patient);
        const value = secretValue(4096);
        for (const [write, options] of [
          [() => store.set(`{c}:${KEY_TEXT}`, value, 60_000), ['PX', 60_000]],
          [() => store.setIfAbsent(`{c}:${KEY_TEXT}`, value, 60_000), ['PX', 60_000, 'NX']],
        ] as const) {
          const error = await rejection(write());
          expect(isStoreFullError(error)).toBe(false);
          expect(error).toMatchObject({
            name: 'ReplyError',
            message: expect.stringMatching(/^NOREPLICAS /),
            command: { name: 'set', keyDigest: KEY_DIGEST, valueLength: value.length, options },
          });
          expectNothingSent(error, value.length);
        }
      } finally {
        await own.client.config('SET', 'min-replicas-to-write', '0');
      }
    });

    it('WRONGTYPE (GET of a list) and NOPERM (DEL denied by an ACL): the key only as a digest', async () => {
      const store = storeOn(patient);
      await own.client.lpush(`refused:{c}:${KEY_TEXT}`, 'x');
      const wrongType = await rejection(store.get(`{c}:${KEY_TEXT}`));
      expect(wrongType).toMatchObject({
        name: 'ReplyError',
        message: expect.stringMatching(/^WRONGTYPE /),
        command: { name: 'get', keyDigest: KEY_DIGEST },
      });
      expectNothingSent(wrongType);
      await own.client.call('ACL', 'SETUSER', 'default', '-del');
      try {
        const denied = await rejection(store.delete(`{c}:${KEY_TEXT}`));
        expect(denied).toMatchObject({
          name: 'ReplyError',
          message: expect.stringMatching(/^NOPERM /),
          command: { name: 'del', keyDigest: KEY_DIGEST },
        });
        expectNothingSent(denied);
      } finally {
        await own.client.call('ACL', 'SETUSER', 'default', '+del');
      }
    });

    it('the key digest is of the full Redis key, so an operator can match it to a key they hold', async () => {
      await own.client.config('SET', 'min-replicas-to-write', '1');
      try {
        const error = await rejection(storeOn(patient).set('{c}:k', 'v', 1000));
        expect(error).toMatchObject({
          command: {
            keyDigest: `sha256:${createHash('sha256').update('refused:{c}:k').digest('base64url')}`,
          },
        });
      } finally {
        await own.client.config('SET', 'min-replicas-to-write', '0');
      }
    });
  });
}
