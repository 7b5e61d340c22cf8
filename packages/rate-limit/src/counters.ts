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
  /** Calls this replica admitted in process that this Redis count carries (restored if it fails). */
  carried?: Carried;
}

/** Calls of one key admitted in process that Redis has not counted yet, for the window ending at `resetAt`. */
interface Carried {
  count: number;
  resetAt: number;
}

/**
 * The in-process insurance: the same limit in memory (a bounded `memoryCounter`, not
 * rate-limiter-flexible's store, which keeps every key and a timer per key for a window and follows the
 * wall clock), and it marks the calls it judges. It extends `RateLimiterMemory` because
 * rate-limiter-flexible accepts only its own limiters as insurance; only `consume` is ever called by it.
 *
 * It follows Redis while Redis answers, so that the switch either way never hands a replica a second
 * budget within one window:
 * - every Redis answer seeds the key's window here (the fleet's count and the time left), so a call
 *   judged here after Redis fails continues that window instead of opening a fresh one;
 * - every call admitted here is carried: the next Redis count of the key adds it (`consume(key, 1 +
 *   carried)`), so after Redis returns the shared count includes what each replica admitted alone.
 */
class InsuranceLimiter extends RateLimiterMemory {
  readonly #counter: InsuranceCounter;
  readonly #maxKeys: number;
  /** Per key, the calls admitted here that no Redis count carries yet (bounded by `maxKeys`). */
  readonly #carried = new Map<string, Carried>();

  constructor(limit: Limit, maxKeys: number) {
    super({ points: limit.points, duration: limit.seconds, keyPrefix: '' });
    this.#counter = memoryCounter(limit, { maxKeys });
    this.#maxKeys = maxKeys;
  }

  override consume(
    key: string | number,
    _points = 1,
    options: Record<string, unknown> = {},
  ): Promise<RateLimiterRes> {
    const marks = options as ConsumeMarks;
    // The call was judged here already; this answer (marked as this limiter's) is thrown away.
    marks.insured = true;
    if (marks.abandoned === true) return Promise.resolve(new RateLimiterRes(this.points, 0, 0, false));
    const judgement = this.judge(String(key), marks.carried);
    if (judgement.kind === 'limited') {
      return Promise.reject(new RateLimiterRes(0, judgement.msBeforeNext, this.points + 1, false));
    }
    return Promise.resolve(new RateLimiterRes(0, 0, 1, false));
  }

  /** Judges a call here; `carried` (taken for a Redis count that failed) is handed back first. */
  judge(key: string, carried: Carried | undefined): Judgement {
    if (carried !== undefined) this.giveBack(key, carried);
    const judgement = this.#counter.consumeNow(key);
    if (judgement.kind === 'allowed') {
      const resetAt = this.#counter.resetAtOf(key);
      const held = this.#carried.get(key);
      // A live carried count belongs to this window (Redis answers may have moved its end a little).
      if (held !== undefined && held.resetAt > performance.now()) {
        held.count += 1;
        held.resetAt = resetAt;
      } else {
        this.#hold(key, { count: 1, resetAt });
      }
    }
    return judgement;
  }

  /** Takes the calls of `key` admitted here that Redis has not counted, for the next Redis count to add. */
  take(key: string): Carried | undefined {
    if (this.#carried.size === 0) return undefined;
    const held = this.#carried.get(key);
    if (held === undefined) return undefined;
    this.#carried.delete(key);
    return held.resetAt > performance.now() ? held : undefined;
  }

  /** Hands back calls taken for a Redis count that did not reach Redis (while their window lives). */
  giveBack(key: string, carried: Carried): void {
    if (carried.resetAt <= performance.now()) return;
    const held = this.#carried.get(key);
    if (held === undefined) this.#hold(key, { count: carried.count, resetAt: carried.resetAt });
    else held.count += carried.count;
  }

  /** A Redis command given up on answered after all: Redis counted `count` calls held here. */
  counted(key: string, count: number): void {
    const held = this.#carried.get(key);
    if (held === undefined) return;
    held.count -= count;
    if (held.count <= 0) this.#carried.delete(key);
  }

  /** Redis answered: the key's window here continues Redis's (its count, its reset). */
  follow(key: string, answer: RateLimiterRes): void {
    this.#counter.seed(key, answer.consumedPoints, answer.msBeforeNext);
  }

  #hold(key: string, carried: Carried): void {
    // Bounded like the windows: past maxKeys the oldest carried count is dropped (a flood of distinct
    // callers during an outage; Redis then never hears of those calls, each replica still held its limit).
    if (this.#carried.size >= this.#maxKeys) {
      const oldest = this.#carried.keys().next().value as string;
      this.#carried.delete(oldest);
    }
    this.#carried.set(key, carried);
  }
}

/** A counter whose judgement is immediate (the memory store): no Promise per limit per call. */
export interface SyncCounter extends Counter {
  /** Counts one call of `key`; `logger` hears (throttled by the caller of `onFull`) when the counter is full. */
  consumeNow(key: string, logger?: Logger): Judgement;
  /** Windows held now (expired ones may linger until the next new window). */
  readonly size: number;
}

/** A memory counter that can also take a window from elsewhere (the Redis store's insurance). */
export interface InsuranceCounter extends SyncCounter {
  /**
   * Sets the window of `key` to `count` calls, ending in `msBeforeNext`. Within the same window the
   * count only grows (answers that arrive out of order never lower it).
   */
  seed(key: string, count: number, msBeforeNext: number): void;
  /** When the live window of `key` ends (monotonic ms), or NaN when none. */
  resetAtOf(key: string): number;
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
export function memoryCounter(limit: Limit, options: MemoryCounterOptions): InsuranceCounter {
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
  // Only the Redis store's insurance seeds windows. A seeded window may end before windows set earlier
  // (Redis windows start fleet-wide), so the map is then only roughly in order of ending: an expired
  // window may linger behind a live one until that one ends (at most one window length), and
  // `maxKeys` still bounds the map.
  const seed = (key: string, count: number, msBeforeNext: number): void => {
    if (!(Number.isFinite(count) && Number.isFinite(msBeforeNext)) || msBeforeNext <= 0) return;
    const now = performance.now();
    const resetAt = now + Math.min(msBeforeNext, windowMs);
    const window = windows.get(key);
    if (window !== undefined && window.resetAt > now && Math.abs(window.resetAt - resetAt) < windowMs / 2) {
      // The same window: Redis's count, or more when this process knows of more calls.
      if (count > window.count) window.count = count;
      window.resetAt = resetAt;
      return;
    }
    if (window !== undefined) windows.delete(key);
    makeRoom(now, undefined);
    if (windows.size === 0) firstResetAt = resetAt;
    windows.set(key, { count, resetAt });
  };
  return {
    consumeNow,
    seed,
    resetAtOf: (key) => {
      const window = windows.get(key);
      return window !== undefined && window.resetAt > performance.now() ? window.resetAt : Number.NaN;
    },
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
      // Calls admitted in process while Redis failed ride along with this count (restored if it fails).
      const carried = insurance?.take(key);
      const marks: ConsumeMarks = carried === undefined ? {} : { carried };
      const attempt = limiter.consume(key, 1 + (carried?.count ?? 0), marks);
      try {
        const answer = await withDeadline(() => attempt, {
          signal: ctx.signal,
          timeoutMs: options.timeoutMs,
        });
        if (marks.insured === true) return { kind: 'allowed', insured: true };
        insurance?.follow(key, answer);
        return { kind: 'allowed', insured: false };
      } catch (error) {
        if (error instanceof RateLimiterRes) {
          if (marks.insured !== true) insurance?.follow(key, error);
          return judgeRejection(error, limit, marks.insured === true);
        }
        // The caller gave up: not a store incident; the abort travels on like any other. (A carried
        // count stays with the command: Redis counts it, or the insurance takes it back if it fails.)
        if (ctx.signal.aborted) throw error;
        if (insurance === undefined || !isAbortError(error)) return { kind: 'store-error', error };
        marks.abandoned = true;
        const judgement = insurance.judge(key, carried);
        // Should the command reach Redis after all, Redis counted this call (when admitted here) and
        // the carried ones: they are no longer Redis's to learn of.
        const counted = (carried?.count ?? 0) + (judgement.kind === 'allowed' ? 1 : 0);
        if (counted > 0) {
          const late = (answer: unknown): void => {
            if (answer instanceof RateLimiterRes && marks.insured !== true) insurance.counted(key, counted);
          };
          attempt.then(late, late);
        }
        return judgement.kind === 'allowed'
          ? { kind: 'allowed', insured: true, error }
          : { ...judgement, insured: true, error };
      }
    },
  };
}

/** A limit hit is exactly a `RateLimiterRes` rejection; anything else is a store error. */
function judgeRejection(error: unknown, limit: Limit, insured = false): Judgement {
  if (error instanceof RateLimiterRes) {
    const msBeforeNext = Math.max(1, Math.ceil(error.msBeforeNext));
    return { kind: 'limited', limit, msBeforeNext, insured };
  }
  return { kind: 'store-error', error };
}
