import { isAbortError, type ToolContext, withDeadline } from '@toolgate/core';
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

/** The in-process insurance: the same limit in memory, which marks the calls it judges. */
class InsuranceLimiter extends RateLimiterMemory {
  override consume(
    key: string | number,
    points = 1,
    options: Record<string, unknown> = {},
  ): Promise<RateLimiterRes> {
    const marks = options as ConsumeMarks;
    if (marks.abandoned === true) return Promise.resolve(new RateLimiterRes(this.points, 0, 0, false));
    marks.insured = true;
    return super.consume(key, points, options);
  }
}

/** A counter whose judgement is immediate (the memory store): no Promise per limit per call. */
export interface SyncCounter extends Counter {
  consumeNow(key: string): Judgement;
}

const ALLOWED: Judgement = Object.freeze({ kind: 'allowed', insured: false });

/**
 * A memory counter: a fixed window per key that starts at the key's first call, like
 * rate-limiter-flexible's `RateLimiterMemory` (which the Redis store's insurance still uses), but
 * synchronous and without a timer per key: expired windows are swept at most once a window. No deadline,
 * since an in-process Map cannot hang.
 */
export function memoryCounter(limit: Limit): SyncCounter {
  const windowMs = limit.seconds * 1000;
  const windows = new Map<string, { count: number; resetAt: number }>();
  let nextSweepAt = Date.now() + windowMs;
  const consumeNow = (key: string): Judgement => {
    const now = Date.now();
    if (now >= nextSweepAt) {
      for (const [held, window] of windows) if (window.resetAt <= now) windows.delete(held);
      nextSweepAt = now + windowMs;
    }
    const window = windows.get(key);
    if (window === undefined || window.resetAt <= now) {
      windows.set(key, { count: 1, resetAt: now + windowMs });
      return limit.points >= 1 ? ALLOWED : limitedFor(limit, windowMs);
    }
    window.count += 1;
    return window.count <= limit.points ? ALLOWED : limitedFor(limit, window.resetAt - now);
  };
  return { consumeNow, consume: (key) => Promise.resolve(consumeNow(key)) };
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
  options: { timeoutMs: number; insured: boolean },
): Counter {
  const insurance = options.insured
    ? new InsuranceLimiter({ points: limit.points, duration: limit.seconds, keyPrefix: '' })
    : undefined;
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
