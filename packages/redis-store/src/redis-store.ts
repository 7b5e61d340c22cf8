import { hash } from 'node:crypto';
import { type KeyValueStore, StoreFullError, type StoreOperationOptions, withDeadline } from '@toolgate/core';

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
            commandError(error, { name: 'set', key: prefix + key, value, options: ['PX', ttlMs, 'NX'] }),
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
            commandError(error, { name: 'set', key: prefix + key, value, options: ['PX', ttlMs] }),
          );
        }
      });
    },
    get(key, op) {
      return bounded(op, async () => {
        try {
          return (await client.get(prefix + key)) ?? undefined;
        } catch (error) {
          throw commandError(error, { name: 'get', key: prefix + key });
        }
      });
    },
    delete(key, op) {
      return bounded(op, async () => {
        try {
          return (await client.del(prefix + key)) > 0;
        } catch (error) {
          throw commandError(error, { name: 'del', key: prefix + key });
        }
      });
    },
  };
}

/** A failed command as the store's errors describe it: never its value, nor its key in clear. */
interface RedisCommandSummary {
  /** The command: `set`, `get` or `del`. */
  readonly name: string;
  /** `sha256:` and the base64url SHA-256 of the full Redis key (prefix included). */
  readonly keyDigest: string;
  /** Length of the value written, in UTF-16 code units (`value.length`); absent for reads and deletes. */
  readonly valueLength?: number;
  /** What was sent after the value (`['PX', ttlMs, 'NX']`). */
  readonly options?: readonly (string | number)[];
}

/** The longest reply text an error carries (Redis's own are far shorter). */
const MAX_MESSAGE = 200;

/**
 * A command the client or Redis refused, as the store throws it. ioredis puts every argument of a
 * failed command on its error (`command.args`): a 6 MB result would go whole into a log line, and a
 * key may hold a confirmation page's id. This error is built afresh from the original's name, code
 * and message (the failure classifiers read those), with `command` summarising what was sent; nothing
 * else of the original is kept, neither as a property nor as its `cause`.
 */
class RedisCommandError extends Error {
  readonly code?: string | number;
  readonly command: RedisCommandSummary;

  constructor(
    name: string,
    message: string,
    code: string | number | undefined,
    command: RedisCommandSummary,
  ) {
    super(message);
    this.name = name;
    if (code !== undefined) this.code = code;
    this.command = command;
  }
}

interface Sent {
  name: string;
  key: string;
  value?: string;
  options?: readonly (string | number)[];
}

function commandError(error: unknown, sent: Sent): RedisCommandError {
  const fields = readFields(error);
  const command: RedisCommandSummary = {
    name: sent.name,
    keyDigest: `sha256:${hash('sha256', sent.key, 'base64url')}`,
    ...(sent.value === undefined ? {} : { valueLength: sent.value.length }),
    ...(sent.options === undefined ? {} : { options: sent.options }),
  };
  return new RedisCommandError(fields.name, safeMessage(fields.message, sent), fields.code, command);
}

/** name, message and code, read without trusting the thrown value (a getter may throw). */
function readFields(error: unknown): { name: string; message: string; code: string | number | undefined } {
  const read = (field: 'name' | 'message' | 'code'): unknown => {
    try {
      return typeof error === 'object' && error !== null
        ? (error as Record<string, unknown>)[field]
        : undefined;
    } catch {
      return undefined;
    }
  };
  const [name, message, code] = [read('name'), read('message'), read('code')];
  return {
    name: typeof name === 'string' && name.length <= 100 ? name : 'Error',
    message: typeof message === 'string' ? message : 'the Redis client failed with something not an Error',
    code: typeof code === 'string' || typeof code === 'number' ? code : undefined,
  };
}

/**
 * The reply's words without what was sent: Redis echoes the first arguments of an unknown (or renamed)
 * command ("with args beginning with: ..."), so the text is cut there, stripped of the value and key
 * should they appear anyway, and cut to MAX_MESSAGE characters.
 */
function safeMessage(message: string, sent: Sent): string {
  let text = message;
  const echo = text.search(/,? with args beginning with/i);
  if (echo >= 0) text = text.slice(0, echo);
  for (const [secret, shown] of [
    [sent.value, '<value>'],
    [sent.key, '<key>'],
  ] as const) {
    if (secret !== undefined && secret.length >= 4 && text.includes(secret))
      text = text.split(secret).join(shown);
  }
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE)}…` : text;
}

/**
 * A write Redis refused for want of memory (`maxmemory` reached under `noeviction`: `-OOM command not
 * allowed when used memory > 'maxmemory'`) as core's `StoreFullError`: a full store, which policies
 * refuse `rate_limited` (fail closed) rather than treat as an outage. Any other refusal is thrown as it came.
 */
function fullOr(error: RedisCommandError): Error {
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
