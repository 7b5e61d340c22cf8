import { StoreCommandError } from '@toolgate/core';
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
      try {
        return (await redis.get(prefix + key)) ?? undefined;
      } catch (error) {
        throw new StoreCommandError(error, { name: 'get', key: prefix + key });
      }
    },
    async set(key, value, ttlMs) {
      // PX takes a positive integer; a fraction of a millisecond left still means "expire now".
      const ms = Math.max(1, Math.ceil(ttlMs));
      try {
        await redis.set(prefix + key, value, 'PX', ms);
      } catch (error) {
        throw new StoreCommandError(error, { name: 'set', key: prefix + key, value, options: ['PX', ms] });
      }
    },
    async delete(key) {
      try {
        await redis.del(prefix + key);
      } catch (error) {
        throw new StoreCommandError(error, { name: 'del', key: prefix + key });
      }
    },
  };
}
