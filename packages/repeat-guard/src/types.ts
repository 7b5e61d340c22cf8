import type { ToolContext, ToolMiddleware } from '@toolgate/core';

/** What the call that repeats an earlier successful call gets back. */
export type OnRepeat = 'cached' | 'fail';

/** What the repeat of a failed call gets back. */
export type OnFailedRepeat = 'refuse' | 'run';

/** What a call gets when the store cannot answer: `open` runs it unguarded, `closed` answers `unavailable`. */
export type OnStoreFailure = 'open' | 'closed';

/** What a call that ends a no-progress streak gets back. */
export type OnNoProgress = 'note' | 'fail';

/** The rules one tool follows; global defaults, overridable per tool. */
export interface RepeatRules {
  /**
   * The identical call (same caller identity, bindings, tool and arguments) that reaches this count within the window
   * is answered without running; 2 answers the second one.
   * @default 2
   */
  threshold: number;
  /** How long after the first identical call a repeat still counts, in ms. @default 60000 */
  windowMs: number;
  /**
   * `cached`: the repeat gets the earlier result back with a note; `fail`: it gets a `repeated_call`
   * failure with core's default hint.
   * @default 'cached'
   */
  onRepeat: OnRepeat;
  /**
   * `refuse`: the repeat of a failed call gets the earlier error back with a hint not to retry it
   * unchanged, unless that error was retryable and its `retryAfterMs` (0 when absent) has passed;
   * `run`: failures are not remembered and every repeat runs.
   * @default 'refuse'
   */
  onFailedRepeat: OnFailedRepeat;
  /**
   * "No progress": when this many calls in a row of one tool (for one caller) return an identical
   * result with different arguments, the last one is flagged; `false` turns the check off.
   * @default false
   */
  noProgress: number | false;
  /**
   * `note`: the flagged result is returned with a note (a hint on a failure) to stop varying the
   * arguments; `fail`: it is replaced by a `repeated_call` failure.
   * @default 'note'
   */
  onNoProgress: OnNoProgress;
  /**
   * Results whose stored JSON is longer than this (characters) are not remembered: their repeats
   * run again. Bounds what one call can put in the store, and what is read back: a stored value
   * longer than this is not the guard's and reads as absent.
   * @default 1000000
   */
  maxResultSize: number;
}

/**
 * Where repeat-guard remembers calls: string values with a time to live. Methods may return
 * promises (a shared store such as Redis) or plain values (memory).
 */
export interface RepeatStore {
  /** The value under `key`, or undefined when absent or expired. */
  get(key: string): Promise<string | undefined> | string | undefined;
  /** Stores `value` under `key` for `ttlMs` milliseconds (a positive integer). */
  set(key: string, value: string, ttlMs: number): Promise<void> | void;
  /** Forgets `key`. */
  delete(key: string): Promise<void> | void;
}

/** The in-memory store, with its size exposed for monitoring and tests. */
export interface MemoryRepeatStore extends RepeatStore {
  /** Entries held now (expired ones may linger until touched or evicted). */
  readonly size: number;
  /** Sum of the stored values' and keys' lengths, in characters (a guard's entry: its result's text). */
  readonly totalSize: number;
  /** Forgets everything. */
  clear(): void;
}

export interface MemoryRepeatStoreOptions {
  /** Most entries held; the least recently used are evicted beyond it (half the store at once). @default 10000 */
  maxEntries?: number;
  /** Most characters held across all keys and values; the least recently used are evicted beyond it. @default 64000000 */
  maxSize?: number;
}

/**
 * The part of a Redis client the Redis store uses. An ioredis client with a `socketTimeout` fits it as
 * is; so does any client with the same three commands.
 */
export interface RedisRepeatClient {
  get(key: string): Promise<string | null>;
  set(key: string, value: string, millisecondsToken: 'PX', milliseconds: number): Promise<unknown>;
  del(key: string): Promise<unknown>;
  /** ioredis' options, checked at creation when present (a Cluster's are under `redisOptions`). */
  readonly options?: {
    socketTimeout?: number;
    redisOptions?: { socketTimeout?: number };
  };
}

export interface RedisRepeatStoreOptions {
  /**
   * Prepended to every key: the namespace of this server's entries, e.g. `'orders-prod:repeat:'`. The
   * same on every replica of a server, and another on every other server or environment sharing the
   * Redis (under one prefix, one server's cached results answer the other's calls). @default none: required
   */
  prefix: string;
}

/** Options of `createRepeatGuard()`: global rules, the store, and per-tool overrides or opt-outs. */
export interface RepeatGuardOptions extends Partial<RepeatRules> {
  /**
   * Where calls are remembered. Give a shared store (`createRedisRepeatStore`) when several
   * replicas serve one client.
   * @default createMemoryRepeatStore({ maxEntries })
   */
  store?: RepeatStore;
  /**
   * Longest wait for one store operation, in ms; also bounded by the call's abort. A store that
   * drops packets then costs a call at most this (read) plus this (write), never a hang.
   * @default 200
   */
  storeTimeoutMs?: number;
  /**
   * When the store fails or runs past `storeTimeoutMs`: `open` runs the call without the guard (the
   * guard is an optimisation; the tools stay up), `closed` answers `unavailable` without running it.
   * Either way the incident is logged once when it starts and once, with a count, when it ends.
   * @default 'open'
   */
  onStoreFailure?: OnStoreFailure;
  /** Most remembered entries of the default in-memory store; ignored when `store` is given. @default 10000 */
  maxEntries?: number;
  /**
   * An extra key component that splits one caller's calls further (a session, a tenant header). It is
   * added to core's `callKey` (caller identity + bindings + tool + arguments), never replaces it: two
   * callers or two bound customers never share an entry, whatever it returns.
   * @default none (core's `callKey` alone)
   */
  scope?: (ctx: ToolContext) => string;
  /** Per-tool overrides by tool name; `false` opts the tool out (a polling tool such as a job-status check). @default {} */
  tools?: Record<string, Partial<RepeatRules> | false>;
}

/** The Redis store; `prefix` is the namespace its keys live under. */
export interface RedisRepeatStore extends RepeatStore {
  readonly prefix: string;
}

/** The middleware `createRepeatGuard()` returns. */
export interface RepeatGuard extends ToolMiddleware {
  /**
   * Writes the log lines still held back (a store outage, calls it could not key or answer from);
   * call it when the server shuts down.
   */
  close(): void;
}
