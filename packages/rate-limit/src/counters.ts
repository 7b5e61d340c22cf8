import { performance } from 'node:perf_hooks';
import { isAbortError, type Logger, type ToolContext, withDeadline } from '@toolgate/core';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Limit } from './limits.js';
import type { RedisRateLimitClient } from './types.js';

/** How one limit judged one call. */
export type Judgement =
  | { readonly kind: 'allowed'; readonly insured: boolean; readonly error?: unknown }
  | {
      readonly kind: 'limited';
      readonly limit: Limit;
      readonly msBeforeNext: number;
      readonly insured: boolean;
      readonly error?: unknown;
    }
  | { readonly kind: 'store-error'; readonly error: unknown };

/** Counts the calls of one limit in one store. */
export interface Counter {
  consume(key: string, ctx: ToolContext): Promise<Judgement>;
}

// Per-call options object rate-limiter-flexible hands on to the insurance limiter unchanged: the only
// way to learn that a call was judged in process, and to stop a late Redis error from charging the
// insurance again for a call that already timed out and was judged there.
interface ConsumeMarks {
  insured?: boolean;
  abandoned?: boolean;
}

/**
 * The in-process insurance: the same limit in memory (a bounded `memoryCounter`, not
 * rate-limiter-flexible's store, which keeps every key and a timer per key for a window and follows the
 * wall clock), and it marks the calls it judges. It extends `RateLimiterMemory` because
 * rate-limiter-flexible accepts only its own limiters as insurance; only `consume` is ever called.
 */
class InsuranceLimiter extends RateLimiterMemory {
  readonly #counter: SyncCounter;

  constructor(limit: Limit, maxKeys: number) {
    super({ points: limit.points, duration: limit.seconds, keyPrefix: '' });
    this.#counter = memoryCounter(limit, { maxKeys });
  }

  override consume(
    key: string | number,
    _points = 1,
    options: Record<string, unknown> = {},
  ): Promise<RateLimiterRes> {
    const marks = options as ConsumeMarks;
    if (marks.abandoned === true) return Promise.resolve(new RateLimiterRes(this.points, 0, 0, false));
    marks.insured = true;
    const judgement = this.#counter.consumeNow(String(key));
    if (judgement.kind === 'limited') {
      return Promise.reject(new RateLimiterRes(0, judgement.msBeforeNext, this.points + 1, false));
    }
    return Promise.resolve(new RateLimiterRes(0, 0, 1, false));
  }
}

/** A counter whose judgement is immediate (the memory store): no Promise per limit per call. */
export interface SyncCounter extends Counter {
  /** Counts one call of `key`; `logger` hears (throttled by the caller of `onFull`) when the counter is full. */
  consumeNow(key: string, logger?: Logger): Judgement;
  /** Windows held now (expired ones may linger until the next new window). */
  readonly size: number;
}

const ALLOWED: Judgement = Object.freeze({ kind: 'allowed', insured: false });

/** How a memory counter bounds itself. */
export interface MemoryCounterOptions {
  /** Most windows held; past it the window that ends first is dropped to make room. */
  readonly maxKeys: number;
  /** Called (with the call's logger) each time a live window is dropped to make room. */
  readonly onFull?: (logger: Logger) => void;
}

/**
 * A memory counter: a fixed window per key that starts at the key's first call, like
 * rate-limiter-flexible's `RateLimiterMemory`, but synchronous, without a timer per key, and bounded.
 * No deadline, since an in-process Map cannot hang.
 *
 * - Time is the monotonic clock (`performance.now()`), not the wall clock: a wall clock stepped forward
 *   (NTP, an operator, a VM resumed) would end every window early and hand each caller a new budget,
 *   one stepped back would hold callers for the length of the step, past their window.
 * - Windows are kept in the order they end: all of one counter have the same length and a monotonic
 *   start, and a window that starts over is moved to the back. The expired ones are then a prefix of
 *   the map, dropped from the front when a new window opens (no walk over the live ones).
 * - At most `maxKeys` windows: a flood of distinct callers (new tokens, sessions, bindings) would
 *   otherwise grow the map by one entry per caller for a whole window. Past it the window that ends
 *   first is dropped. That never costs anyone a call: only the dropped caller gains a fresh window, and
 *   a flood that large already holds that many fresh budgets of its own. (Refusing new callers instead
 *   would let the flood lock every new caller out.)
 */
export function memoryCounter(limit: Limit, options: MemoryCounterOptions): SyncCounter {
  const windowMs = limit.seconds * 1000;
  const { maxKeys, onFull } = options;
  const windows = new Map<string, { count: number; resetAt: number }>();
  // When the first window of the map ends: nothing to drop before then (Infinity while empty).
  let firstResetAt = Number.POSITIVE_INFINITY;
  const makeRoom = (now: number, logger: Logger | undefined): void => {
    if (now < firstResetAt && windows.size < maxKeys) return;
    let full = false;
    for (const [held, window] of windows) {
      if (window.resetAt <= now) {
        windows.delete(held);
      } else if (windows.size >= maxKeys) {
        windows.delete(held);
        full = true;
      } else {
        firstResetAt = window.resetAt;
        break;
      }
    }
    if (windows.size === 0) firstResetAt = Number.POSITIVE_INFINITY;
    if (full && logger !== undefined) onFull?.(logger);
  };
  const consumeNow = (key: string, logger?: Logger): Judgement => {
    const now = performance.now();
    const window = windows.get(key);
    if (window !== undefined && window.resetAt > now) {
      window.count += 1;
      return window.count <= limit.points ? ALLOWED : limitedFor(limit, window.resetAt - now);
    }
    // A new window, or one that starts over (moved to the back, so the map stays in order of ending).
    if (window !== undefined) windows.delete(key);
    makeRoom(now, logger);
    const resetAt = now + windowMs;
    if (windows.size === 0) firstResetAt = resetAt;
    windows.set(key, { count: 1, resetAt });
    return limit.points >= 1 ? ALLOWED : limitedFor(limit, windowMs);
  };
  return {
    consumeNow,
    consume: (key, ctx) => Promise.resolve(consumeNow(key, ctx.logger)),
    get size() {
      return windows.size;
    },
  };
}

function limitedFor(limit: Limit, msBeforeNext: number): Judgement {
  return { kind: 'limited', limit, msBeforeNext: Math.max(1, Math.ceil(msBeforeNext)), insured: false };
}

/**
 * A Redis counter (atomic Lua increment with expiry). Each operation runs under `timeoutMs` and the
 * call's abort. With `insured`, a failing Redis (rejected at once while not ready) or a late one
 * (past the deadline) hands the call to an in-process copy of the limit.
 */
export function redisCounter(
  limit: Limit,
  client: RedisRateLimitClient,
  options: { timeoutMs: number; insured: boolean; maxKeys: number },
): Counter {
  const insurance = options.insured ? new InsuranceLimiter(limit, options.maxKeys) : undefined;
  const limiter = new RateLimiterRedis({
    storeClient: client,
    points: limit.points,
    duration: limit.seconds,
    keyPrefix: '',
    rejectIfRedisNotReady: true,
    ...(insurance === undefined ? {} : { insuranceLimiter: insurance }),
  });
  return {
    async consume(key, ctx) {
      const marks: ConsumeMarks = {};
      try {
        await withDeadline(() => limiter.consume(key, 1, marks), {
          signal: ctx.signal,
          timeoutMs: options.timeoutMs,
        });
        return { kind: 'allowed', insured: marks.insured === true };
      } catch (error) {
        if (error instanceof RateLimiterRes) return judgeRejection(error, limit, marks.insured === true);
        // The caller gave up: not a store incident; the abort travels on like any other.
        if (ctx.signal.aborted) throw error;
        if (insurance === undefined || !isAbortError(error)) return { kind: 'store-error', error };
        marks.abandoned = true;
        try {
          await insurance.consume(key, 1, {});
          return { kind: 'allowed', insured: true, error };
        } catch (insuranceError) {
          return judgeRejection(insuranceError, limit, true, error);
        }
      }
    },
  };
}

/** A limit hit is exactly a `RateLimiterRes` rejection; anything else is a store error. */
function judgeRejection(error: unknown, limit: Limit, insured = false, storeError?: unknown): Judgement {
  if (error instanceof RateLimiterRes) {
    const msBeforeNext = Math.max(1, Math.ceil(error.msBeforeNext));
    return {
      kind: 'limited',
      limit,
      msBeforeNext,
      insured,
      ...(storeError === undefined ? {} : { error: storeError }),
    };
  }
  return { kind: 'store-error', error };
}
