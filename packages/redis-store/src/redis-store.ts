import {
  type KeyValueStore,
  StoreCommandError,
  StoreFullError,
  type StoreOperationOptions,
  withDeadline,
} from '@toolgate/core';

/** The commands the store sends; an ioredis 6 client (`createRedisClient`) has them. */
export interface RedisStoreClient {
  set(key: string, value: string, px: 'PX', ttlMs: number): Promise<unknown>;
  set(key: string, value: string, px: 'PX', ttlMs: number, nx: 'NX'): Promise<unknown>;
  get(key: string): Promise<string | null>;
  del(key: string): Promise<number>;
  /** ioredis' options, checked at creation when present (a Cluster's are under `redisOptions`). */
  readonly options?: {
    autoResendUnfulfilledCommands?: boolean;
    redisOptions?: { autoResendUnfulfilledCommands?: boolean };
  };
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
  checkNoResend(client);
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
          throw fullOr(
            new StoreCommandError(error, {
              name: 'set',
              key: prefix + key,
              value,
              options: ['PX', ttlMs, 'NX'],
            }),
          );
        }
      });
    },
    set(key, value, ttlMs, op) {
      checkTtl(ttlMs);
      return bounded(op, async () => {
        try {
          await client.set(prefix + key, value, 'PX', ttlMs);
        } catch (error) {
          throw fullOr(
            new StoreCommandError(error, { name: 'set', key: prefix + key, value, options: ['PX', ttlMs] }),
          );
        }
      });
    },
    get(key, op) {
      return bounded(op, async () => {
        try {
          return (await client.get(prefix + key)) ?? undefined;
        } catch (error) {
          throw new StoreCommandError(error, { name: 'get', key: prefix + key });
        }
      });
    },
    delete(key, op) {
      return bounded(op, async () => {
        try {
          return (await client.del(prefix + key)) > 0;
        } catch (error) {
          throw new StoreCommandError(error, { name: 'del', key: prefix + key });
        }
      });
    },
  };
}

/**
 * A write Redis refused for want of memory (`maxmemory` reached under `noeviction`: `-OOM command not
 * allowed when used memory > 'maxmemory'`) as core's `StoreFullError`: a full store, which policies
 * refuse `rate_limited` (fail closed) rather than treat as an outage. Any other refusal is thrown as it came.
 */
function fullOr(error: StoreCommandError): Error {
  if (/^OOM\b/.test(error.message)) {
    // The refusal (its words and a summary of the command, never the value) is the cause, for the log.
    return new StoreFullError('store', undefined, {
      message: 'RedisStore: a write was refused: Redis is at its maxmemory (policy noeviction)',
      cause: error,
    });
  }
  return error;
}

/**
 * Refuses a client that would send a command twice: ioredis (by default) sends the commands whose replies
 * a dropped connection lost again after it reconnects, though Redis may have applied them. A `DEL` that
 * released a claim, applied a second time after another replica claimed the key, deletes that claim,
 * and a third call then runs beside the second. Checked where the client shows its options (ioredis).
 */
function checkNoResend(client: RedisStoreClient): void {
  const options = client.options;
  if (options === undefined || options === null) return;
  const resend = options.autoResendUnfulfilledCommands ?? options.redisOptions?.autoResendUnfulfilledCommands;
  if (resend !== false) {
    throw new TypeError(
      'createRedisStore: create the ioredis client with autoResendUnfulfilledCommands: false (createRedisClient does): a write whose reply a dropped connection lost may have been applied, and sent again after the reconnect it can undo what other replicas did since',
    );
  }
}

function checkTtl(ttlMs: number): void {
  if (!(Number.isInteger(ttlMs) && ttlMs >= 1)) {
    throw new RangeError(`RedisStore: ttlMs must be a positive integer of milliseconds, got ${ttlMs}`);
  }
}
