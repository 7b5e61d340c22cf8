import { type KeyValueStore, StoreFullError, type StoreOperationOptions, withDeadline } from '@toolgate/core';

/** The commands the store sends; an ioredis 6 client (`createRedisClient`) has them. */
export interface RedisStoreClient {
  set(key: string, value: string, px: 'PX', ttlMs: number): Promise<unknown>;
  set(key: string, value: string, px: 'PX', ttlMs: number, nx: 'NX'): Promise<unknown>;
  get(key: string): Promise<string | null>;
  del(key: string): Promise<number>;
}

/** Options of `createRedisStore`. */
export interface RedisStoreOptions {
  /** Prepended to every key to namespace a server's state; no `{` or `}` (the hash tag is the caller's). @default 'toolgate:' */
  prefix?: string;
  /** Longest any one operation may take before it rejects (the call's own signal also ends it), in ms. @default 200 */
  timeoutMs?: number;
}

/** A `KeyValueStore` on Redis, with the key prefix it writes under. */
export interface RedisStore extends KeyValueStore {
  readonly prefix: string;
}

/**
 * Core's `KeyValueStore` on Redis, shared by every replica: `setIfAbsent` is `SET key value PX ttl NX`
 * (one atomic command, so two replicas never both win a claim), expiry is Redis's own. Every operation
 * is bounded by `timeoutMs` and follows the caller's signal, so a partitioned Redis costs a call at most
 * the time limit. The caller owns the client's lifecycle (`close()` does not quit it).
 */
export function createRedisStore(client: RedisStoreClient, options: RedisStoreOptions = {}): RedisStore {
  const prefix = options.prefix ?? 'toolgate:';
  const timeoutMs = options.timeoutMs ?? 200;
  if (/[{}]/.test(prefix)) {
    // A brace in the prefix would become the Redis Cluster hash tag of every key, putting all of them in one slot.
    throw new TypeError('createRedisStore: prefix may not contain { or } (keys carry their own hash tag)');
  }
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new RangeError('createRedisStore: timeoutMs must be a positive number of milliseconds');
  }
  const bounded = <T>(op: StoreOperationOptions | undefined, work: () => Promise<T>): Promise<T> => {
    // Checked here, not inside the work: core's raceAbort would leave the work's own rejection unhandled.
    if (op?.signal?.aborted) return Promise.reject(op.signal.reason);
    return withDeadline(() => work(), { signal: op?.signal, timeoutMs });
  };
  return {
    prefix,
    setIfAbsent(key, value, ttlMs, op) {
      checkTtl(ttlMs);
      return bounded(op, async () => {
        try {
          return (await client.set(prefix + key, value, 'PX', ttlMs, 'NX')) === 'OK';
        } catch (error) {
          throw fullOr(error);
        }
      });
    },
    set(key, value, ttlMs, op) {
      checkTtl(ttlMs);
      return bounded(op, async () => {
        try {
          await client.set(prefix + key, value, 'PX', ttlMs);
        } catch (error) {
          throw fullOr(error);
        }
      });
    },
    get(key, op) {
      return bounded(op, async () => (await client.get(prefix + key)) ?? undefined);
    },
    delete(key, op) {
      return bounded(op, async () => (await client.del(prefix + key)) > 0);
    },
  };
}

/**
 * A write Redis refused for want of memory (`maxmemory` reached under `noeviction`: `-OOM command not
 * allowed when used memory > 'maxmemory'`) as core's `StoreFullError`: a full store, which policies
 * refuse `rate_limited` (fail closed) rather than treat as an outage. Any other error as it is.
 */
function fullOr(error: unknown): unknown {
  if (error instanceof Error && /^OOM\b/.test(error.message)) {
    // The reply itself is the cause, for the log (it names no key).
    return new StoreFullError('store', undefined, {
      message: 'RedisStore: a write was refused: Redis is at its maxmemory (policy noeviction)',
      cause: error,
    });
  }
  return error;
}

function checkTtl(ttlMs: number): void {
  if (!(Number.isInteger(ttlMs) && ttlMs >= 1)) {
    throw new RangeError(`RedisStore: ttlMs must be a positive integer of milliseconds, got ${ttlMs}`);
  }
}
