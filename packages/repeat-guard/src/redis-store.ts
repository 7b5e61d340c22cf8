import { closesSilentRedisConnections, StoreCommandError } from '@toolgate/core';
import type { RedisRepeatClient, RedisRepeatStore, RedisRepeatStoreOptions } from './types.js';

/**
 * A store on Redis, shared by every replica of a server. Takes a connected ioredis client (or any
 * client with the same `get`, `set ... PX`, `del`); the caller owns its lifecycle. Expiry is
 * Redis's own (`PX`), so nothing needs sweeping. An ioredis client without a `socketTimeout` is
 * refused with a TypeError: it would keep a connection gone silent for good.
 */
export function createRedisRepeatStore(
  redis: RedisRepeatClient,
  options: RedisRepeatStoreOptions,
): RedisRepeatStore {
  const prefix = checkPrefix(options?.prefix);
  checkSocketTimeout(redis);
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

/**
 * Refuses an ioredis client that would keep a silent connection for good. A connection that stops
 * answering without a reset (a partition, a NAT or firewall that forgot the flow) stays 'ready' in
 * ioredis unless `socketTimeout` closes it: every call then waits `storeTimeoutMs` and finds the store
 * failed (runs unguarded, or is refused with `onStoreFailure: 'closed'`) for the rest of the process's life, and each call's commands stay queued in the client (memory grows
 * with every call). Checked where the client shows its options (ioredis); a Cluster's are under
 * `redisOptions`.
 */
function checkSocketTimeout(redis: RedisRepeatClient): void {
  const options = redis.options;
  if (options === undefined || options === null) return;
  if (!closesSilentRedisConnections(options)) {
    throw new TypeError(
      "createRedisRepeatStore: create the ioredis client with socketTimeout (e.g. 2000 ms, as @toolgate/redis-store's createRedisClient does): without it a connection that goes silent without a reset is never closed, every call waits storeTimeoutMs and finds the store failed (onStoreFailure) for the life of the process, and every command sent stays queued in the client",
    );
  }
}

/**
 * The prefix, required: with a default, two servers (production and staging, two apps) sharing one
 * Redis would share every entry, and one would answer the other's calls with its results.
 */
function checkPrefix(prefix: unknown): string {
  if (typeof prefix === 'string' && prefix !== '') return prefix;
  throw new TypeError(
    prefix === undefined
      ? "createRedisRepeatStore: prefix is required: name this server's entries (e.g. { prefix: 'orders-prod:repeat:' }), the same on all its replicas and another on every other server sharing the Redis; under one prefix, one server's cached results answer the other's calls"
      : "createRedisRepeatStore: prefix must be a non-empty string (e.g. 'orders-prod:repeat:')",
  );
}
