import type { ToolMiddleware } from '@toolgate/core';

/** Whose calls a limit counts. */
export type LimitScope = 'caller' | 'caller-tool' | 'tool' | 'global';

/** A window as text: whole seconds, minutes, hours or days (`'30s'`, `'1m'`, `'1h'`, `'1d'`). */
export type DurationText = `${number}${'s' | 'm' | 'h' | 'd'}`;

/** One limit: at most `points` calls per `duration` for each `per` bucket. */
export interface RateLimitSpec {
  /**
   * The limit's name, in keys, logs and `_meta`: letters, digits, `_`, `-`, `.`. A tool shares a
   * global limit's counter by repeating it unchanged; two different limits may not share a name.
   * @default `${per}-${points}-per-${seconds}s`
   */
  name?: string;
  /**
   * `caller`: each caller across all tools; `caller-tool`: each caller on each tool; `tool`: each tool,
   * all callers together; `global`: every call of every caller.
   */
  per: LimitScope;
  /** Calls allowed per window: a positive integer. */
  points: number;
  /** The window: seconds (a whole number, at least 1) or text such as `'1m'`. */
  duration: number | DurationText;
}

/** The options a tool may override (`tools: { name: { limits } | false }`). */
export interface ToolRateLimits {
  /** The limits that apply; every one must allow a call (the most restrictive answers). @default [] */
  limits: readonly RateLimitSpec[];
}

/**
 * A Redis client configured as documented: ioredis with `enableOfflineQueue: false`, `protocol: 2` and a
 * `socketTimeout`.
 * Typed structurally so that users of the memory store need not install ioredis.
 */
export interface RedisRateLimitClient {
  /** ioredis' options, checked at creation when present. */
  readonly options?: {
    enableOfflineQueue?: boolean;
    protocol?: number;
    socketTimeout?: number;
    redisOptions?: { protocol?: number; socketTimeout?: number };
  };
  // biome-ignore lint/suspicious/noExplicitAny: rate-limiter-flexible calls ioredis' command methods by name.
  readonly [command: string]: any;
}

/** Where the counters live. */
export type RateLimitStore = 'memory' | { redis: RedisRateLimitClient };

/** Options of `createRateLimit`. */
export interface RateLimitOptions extends Partial<ToolRateLimits> {
  /** Per tool: its own `limits` (replacing the global list) or `false` (no limits). @default {} */
  tools?: Readonly<Record<string, Partial<ToolRateLimits> | false>>;
  /** `'memory'` (this process) or `{ redis: client }` (shared by a fleet). @default 'memory' */
  store?: RateLimitStore;
  /**
   * When Redis fails or runs past `timeoutMs`: `'open'` judges the call by in-process copies of the
   * same limits (rate-limiter-flexible's insurance limiter), `'closed'` answers `unavailable`.
   * @default 'open'
   */
  onStoreError?: 'open' | 'closed';
  /** Time limit of one Redis operation, in ms (the call's abort also ends the wait). @default 100 */
  timeoutMs?: number;
  /** `retryAfterMs` of the `unavailable` answer when the store is down and `onStoreError` is `'closed'`. @default 1000 */
  unavailableRetryAfterMs?: number;
  /**
   * Count unknown tools and refused arguments against the caller's `per: 'caller'` limits, so a model
   * (or an attacker) cannot spam invalid calls for free. @default true
   */
  countRefusedCalls?: boolean;
  /**
   * Most windows one limit holds in process: the memory store's counters, and with Redis the fail-open
   * insurance (which follows the windows Redis reports for the keys this process counts). Past it, the window that ends first is dropped to make room (its caller starts a fresh
   * window; nobody is refused for it) and one line per interval is logged. @default 100000
   */
  maxMemoryKeys?: number;
  /**
   * First part of every key; no braces (they mark the Redis Cluster hash tag). Required with
   * `store: { redis }`: the namespace of this server's counters, e.g. `'orders-prod:rl'`, the same on
   * every replica and another on every other server sharing the Redis (under one prefix, two servers
   * spend one budget). @default 'tg:rl' with the memory store; none (required) with Redis
   */
  keyPrefix?: string;
  /** How long a store incident logs only one line (then one line with the count), in ms. @default 60000 */
  logIntervalMs?: number;
}

/** What `_meta['toolgate/rate-limit']` carries on a `rate_limited` answer. */
export interface RateLimitMeta {
  /** The limit's points (calls per window). */
  limit: number;
  /** Always 0 on a refusal. */
  remaining: number;
  /** Milliseconds until the window of the answering limit resets. */
  resetMs: number;
  /** The answering limit's name. */
  name: string;
}

/** The middleware, with `close()` for the app's shutdown (writes pending log summaries). */
export interface RateLimitMiddleware extends ToolMiddleware {
  close(): void;
}
