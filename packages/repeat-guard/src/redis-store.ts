import type { RedisRepeatClient, RedisRepeatStore, RedisRepeatStoreOptions } from './types.js';

/**
 * A store on Redis, shared by every replica of a server. Takes a connected ioredis client (or any
 * client with the same `get`, `set ... PX`, `del`); the caller owns its lifecycle. Expiry is
 * Redis's own (`PX`), so nothing needs sweeping.
 */
export function createRedisRepeatStore(
  redis: RedisRepeatClient,
  options: RedisRepeatStoreOptions = {},
): RedisRepeatStore {
  const prefix = options.prefix ?? 'toolgate:repeat:';
  return {
    prefix,
    async get(key) {
      return (await redis.get(prefix + key)) ?? undefined;
    },
    async set(key, value, ttlMs) {
      // PX takes a positive integer; a fraction of a millisecond left still means "expire now".
      await redis.set(prefix + key, value, 'PX', Math.max(1, Math.ceil(ttlMs)));
    },
    async delete(key) {
      await redis.del(prefix + key);
    },
  };
}
