// A write Redis refuses for want of memory, as the store reports it; the same against a real Redis at
// its maxmemory, with idempotency on top, is in @toolgate/idempotency's test/redis-full.test.ts.
import { isStoreFullError, StoreFullError } from '@toolgate/core';
import { ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createRedisStore } from '../src/index.js';

const OOM = "OOM command not allowed when used memory > 'maxmemory'.";

describe('createRedisStore: a Redis out of memory is a full store', () => {
  const fake = { set: async () => 'OK', get: async () => null, del: async () => 0 };

  it("an OOM reply to a write rejects with core's StoreFullError (the reply, summarised, as its cause)", async () => {
    const reply = new ReplyError(OOM);
    const store = createRedisStore(
      {
        ...fake,
        set: async () => {
          throw reply;
        },
      },
      { prefix: 'test:' },
    );
    for (const write of [() => store.set('{c}:k', 'v', 1000), () => store.setIfAbsent('{c}:k', 'v', 1000)]) {
      const error = await write().then(
        () => undefined,
        (rejected: unknown) => rejected,
      );
      expect(error).toBeInstanceOf(StoreFullError);
      expect(isStoreFullError(error)).toBe(true);
      // The cause is the refusal's words and a summary of the command, never the ioredis error itself
      // (its command.args hold the value written).
      expect(error).toMatchObject({
        reason: 'store',
        limit: undefined,
        cause: {
          name: 'ReplyError',
          message: OOM,
          command: { name: 'set', keyDigest: expect.stringMatching(/^sha256:[\w-]{43}$/), valueLength: 1 },
        },
      });
      expect((error as Error).cause).not.toBe(reply);
      expect((error as Error).message).toBe(
        'RedisStore: a write was refused: Redis is at its maxmemory (policy noeviction)',
      );
    }
  });

  it('any other error keeps its name, code and message, with the command summarised', async () => {
    const other = new ReplyError('WRONGTYPE Operation against a key holding the wrong kind of value');
    const store = createRedisStore(
      {
        ...fake,
        set: async () => {
          throw other;
        },
      },
      { prefix: 'test:' },
    );
    const error = await store.set('k', 'v', 1000).then(
      () => undefined,
      (rejected: unknown) => rejected,
    );
    expect(isStoreFullError(error)).toBe(false);
    expect(error).toBeInstanceOf(Error);
    expect(error).toMatchObject({
      name: 'ReplyError',
      message: 'WRONGTYPE Operation against a key holding the wrong kind of value',
      command: { name: 'set', valueLength: 1, options: ['PX', 1000] },
    });
  });
});
