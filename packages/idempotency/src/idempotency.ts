import { randomUUID } from 'node:crypto';
import {
  boundStore,
  createMemoryStore,
  fail,
  isPassThrough,
  isStoreFullError,
  isToolResult,
  type NextFn,
  optInTools,
  outcomeOf,
  raceAbort,
  resolveToolOptions,
  runDetached,
  type ToolContext,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import { type CallKeys, keysOf } from './call-keys.js';
import {
  checkToolOptions,
  type IdempotencyOptions,
  type IdempotencyToolOptions,
  TOOL_DEFAULTS,
} from './options.js';

/** The `_meta` key a replayed (or joined) result carries. */
export const IDEMPOTENCY_META = 'toolgate/idempotency';

/** The middleware, with `close()` for the app's shutdown. */
export type IdempotencyMiddleware = ToolMiddleware & {
  /** Writes pending log summaries and closes the store it created (a store passed in is the app's). */
  close(): Promise<void>;
};

/** Lost claims being removed at once; more are left to expire with claimTtlMs. */
const MAX_LOST_CLAIMS = 1000;
const LOST_CLAIM_MAX_DELAY_MS = 5000;

// `c`: the claiming call's own token, so a call whose claim write landed with its answer lost (a cut
// connection, a late reply, a client that resent the write) knows the claim it finds is its own.
type StoredCall = { s: 'running'; a: string; c?: string } | { s: 'done'; a: string; r: ToolResult };

interface Flight {
  readonly args: string;
  readonly result: Promise<ToolResult>;
  /** When its claim expires (started + claimTtlMs): a run that hangs holds its key no longer here either. */
  readonly until: number;
}

/**
 * A retried side effect runs once. A call to an enabled tool claims its key (`SET NX PX`); a repeat
 * within `windowMs` replays the stored result; an identical call still running is joined (in this
 * process) or awaited by polling the store (another replica), never run twice. A failure releases the
 * claim unless `storeFailures`.
 */
export function createIdempotency(options: IdempotencyOptions = {}): IdempotencyMiddleware {
  const { store: given, storeTimeoutMs = 200, pollIntervalMs = 50, tools, ...globals } = options;
  const resolver = resolveToolOptions<IdempotencyToolOptions>(
    'createIdempotency',
    TOOL_DEFAULTS,
    { ...globals, tools: optInTools(tools) },
    checkToolOptions,
  );
  if (!(Number.isFinite(storeTimeoutMs) && storeTimeoutMs > 0)) {
    throw new RangeError('createIdempotency: storeTimeoutMs must be a positive number of milliseconds');
  }
  if (!(Number.isFinite(pollIntervalMs) && pollIntervalMs >= 1)) {
    throw new RangeError('createIdempotency: pollIntervalMs must be at least 1 ms');
  }
  const store = given ?? createMemoryStore();
  const bounded = boundStore(store, storeTimeoutMs, 'idempotency');
  const inFlight = new Map<string, Flight>();

  const storeDown = (
    ctx: ToolContext,
    keys: CallKeys,
    opts: IdempotencyToolOptions,
    next: NextFn,
    op: string,
    error: unknown,
  ) => {
    if (ctx.signal.aborted) throw ctx.signal.reason;
    // A full store is not an outage but a flood (this caller's, or many callers'): running the call
    // unguarded is what a flood would be after, so it is refused whatever onStoreFailure says.
    if (isStoreFullError(error)) {
      bounded.failed(op, error, ctx.logger, 'calls that need a new key are refused rate_limited');
      ctx.decisions.push({
        by: 'idempotency',
        action: 'refused',
        reason: 'store full',
        detail: { key: keys.digest, full: error.reason },
      });
      return fail(
        'rate_limited',
        'The server is keeping track of too many calls right now, so it did not run this one.',
        {
          hint: 'Nothing was done. Finish or wait for your earlier calls before making new ones, then retry this one.',
          retryable: true,
        },
      );
    }
    const open = opts.onStoreFailure === 'open';
    bounded.failed(
      op,
      error,
      ctx.logger,
      open ? 'calls run without the once-only guarantee' : 'calls are refused unavailable',
    );
    ctx.decisions.push({
      by: 'idempotency',
      action: open ? 'fail-open' : 'fail-closed',
      reason: 'store unavailable',
      detail: { key: keys.digest },
    });
    if (open) return next();
    return fail(
      'unavailable',
      'The server cannot make sure this call runs only once right now, so it did not run it.',
      {
        hint: 'Nothing was done. Retry once in a few seconds; if it fails again, tell the user the service is unavailable.',
        retryable: true,
        retryAfterMs: 2000,
      },
    );
  };

  const runClaimed = async (
    ctx: ToolContext,
    next: NextFn,
    keys: CallKeys,
    opts: IdempotencyToolOptions,
  ): Promise<ToolResult> => {
    ctx.decisions.push({
      by: 'idempotency',
      action: 'claimed',
      detail: { key: keys.digest, explicit: keys.explicit },
    });
    let result: ToolResult;
    try {
      result = await next();
    } catch (error) {
      await release(ctx, keys);
      throw error;
    }
    if (result.isError === true && !(opts.storeFailures && isOutcome(result))) {
      // A call that timed out (core answered a cancelled call without its handler, or a deadline further
      // in answered for it) may still be running its side effect, or have done it: its claim stays until
      // claimTtlMs, so a retry never runs beside it.
      if (outcomeOf(result) === 'timeout') {
        ctx.decisions.push({
          by: 'idempotency',
          action: 'held',
          reason: 'timed out',
          detail: { key: keys.digest },
        });
      } else {
        await release(ctx, keys);
      }
      return result;
    }
    const stored: StoredCall = { s: 'done', a: keys.args, r: result };
    // Not bound to the call's signal: a cancelled call that ran must still leave its result behind.
    await bounded.set(keys.storeKey, JSON.stringify(stored), opts.windowMs).catch((error: unknown) => {
      bounded.failed(
        'set',
        error,
        ctx.logger,
        'a finished result was not kept; its claim expires after claimTtlMs',
      );
    });
    return result;
  };

  const holdsToken = async (ctx: ToolContext, keys: CallKeys, token: string): Promise<boolean> => {
    try {
      return isOwnClaim(parseStored((await bounded.get(keys.storeKey, ctx.signal)) ?? ''), token);
    } catch {
      return false;
    }
  };

  const lostClaims = new Set<ReturnType<typeof setTimeout>>();
  const removeLostClaim = (keys: CallKeys, token: string, expires: number): void => {
    // During an outage every call lands here: past MAX_LOST_CLAIMS at once, a claim is left to expire
    // (claimTtlMs), so an outage never turns into a crowd of timers and a burst of reads at recovery.
    if (lostClaims.size >= MAX_LOST_CLAIMS) return;
    let delay = pollIntervalMs;
    const attempt = async (): Promise<void> => {
      // Stops well before the claim could have expired and been made again by another call.
      if (Date.now() + 2 * storeTimeoutMs >= expires) return;
      try {
        if (isOwnClaim(parseStored((await bounded.get(keys.storeKey)) ?? ''), token)) {
          await bounded.delete(keys.storeKey);
        }
      } catch {
        // The store still does not answer: tried again less and less often (up to every 5 s).
        delay = Math.min(delay * 2, LOST_CLAIM_MAX_DELAY_MS);
        schedule();
      }
    };
    const schedule = (): void => {
      const timer = setTimeout(() => {
        lostClaims.delete(timer);
        void attempt();
      }, delay);
      timer.unref();
      lostClaims.add(timer);
    };
    // Outside the call: it outlives the call's answer, and belongs to no call's trace.
    runDetached(schedule);
  };

  const release = async (ctx: ToolContext, keys: CallKeys): Promise<void> => {
    await bounded.delete(keys.storeKey).catch((error: unknown) => {
      bounded.failed('delete', error, ctx.logger, 'a failed call keeps its claim until claimTtlMs');
    });
  };

  const settle = async (
    ctx: ToolContext,
    next: NextFn,
    keys: CallKeys,
    opts: IdempotencyToolOptions,
  ): Promise<ToolResult> => {
    const waitUntil = Date.now() + opts.claimTtlMs;
    const token = randomUUID();
    const running = JSON.stringify({ s: 'running', a: keys.args, c: token } satisfies StoredCall);
    for (;;) {
      let claimed: boolean;
      try {
        claimed = await bounded.setIfAbsent(keys.storeKey, running, opts.claimTtlMs, ctx.signal);
      } catch (error) {
        // The write may have landed with its answer lost: a claim that holds this call's token is its own.
        if (!isStoreFullError(error)) {
          if (!ctx.signal.aborted && (await holdsToken(ctx, keys, token))) {
            return runClaimed(ctx, next, keys, opts);
          }
          // This call will not run under it: once the store answers, a claim of its own is removed, so
          // retries are not kept waiting for claimTtlMs by a call that is not running.
          removeLostClaim(keys, token, Date.now() + opts.claimTtlMs);
        }
        return storeDown(ctx, keys, opts, next, 'setIfAbsent', error);
      }
      if (claimed) return runClaimed(ctx, next, keys, opts);
      let text: string | undefined;
      try {
        text = await bounded.get(keys.storeKey, ctx.signal);
      } catch (error) {
        return storeDown(ctx, keys, opts, next, 'get', error);
      }
      if (text !== undefined) {
        const stored = parseStored(text);
        // Damaged, or written by something else: whether the call ran cannot be read, so it is treated
        // as a store that cannot be read (never polled until claimTtlMs, never run over it).
        if (stored === undefined) return storeDown(ctx, keys, opts, next, 'get', new UnreadableEntryError());
        if (stored.a !== keys.args) return otherArguments(ctx, keys);
        // This call's own claim, written by a resent write after its first answer was lost.
        if (isOwnClaim(stored, token)) return runClaimed(ctx, next, keys, opts);
        if (stored.s === 'done') return replay(ctx, keys, stored.r, 'replayed');
        if (Date.now() >= waitUntil) return stillRunning(ctx, keys, pollIntervalMs);
        await sleep(pollIntervalMs, ctx.signal);
      }
      // Absent: the claim was released (the other call failed) or expired; claim it again.
    }
  };

  // Not async itself: a call of a tool that did not opt in (nearly all) gets next()'s promise back
  // with no promise, await or closure of this middleware's own.
  const middleware = ((ctx, next) => {
    if (isPassThrough(ctx)) return next();
    const opts = resolver.forTool(ctx.toolName);
    if (opts === undefined || !opts.enabled) return next();
    return idempotentCall(ctx, next, opts);
  }) as IdempotencyMiddleware;

  const idempotentCall = async (
    ctx: ToolContext,
    next: NextFn,
    opts: IdempotencyToolOptions,
  ): Promise<ToolResult> => {
    const derived = keysOf(ctx, opts.ignoreArguments);
    if ('refused' in derived) return derived.refused;
    const keys = derived.keys;
    const flight = inFlight.get(keys.storeKey);
    // A flight past its claim is treated as another replica treats an expired claim: claimed again.
    if (flight !== undefined && Date.now() < flight.until) {
      if (flight.args !== keys.args) return otherArguments(ctx, keys);
      const result = await outcomeWithin(flight, ctx.signal);
      if (result === undefined) return stillRunning(ctx, keys, pollIntervalMs);
      return replay(ctx, keys, structuredClone(result), 'joined');
    }
    const until = Date.now() + opts.claimTtlMs;
    const result = settle(ctx, next, keys, opts);
    const entry: Flight = { args: keys.args, result, until };
    inFlight.set(keys.storeKey, entry);
    try {
      return await result;
    } finally {
      if (inFlight.get(keys.storeKey) === entry) inFlight.delete(keys.storeKey);
    }
  };
  middleware.close = async () => {
    for (const timer of lostClaims) clearTimeout(timer);
    lostClaims.clear();
    bounded.flush();
    if (given === undefined) await store.close?.();
  };
  return middleware;
}

/**
 * Whether a failure is the call's outcome, kept under `storeFailures`. A request for confirmation is a
 * question: kept, it would be replayed to the confirmed retry, which then could never run.
 */
function isOutcome(result: ToolResult): boolean {
  return outcomeOf(result) !== 'confirmation_required';
}

/** The flight's outcome, or undefined once its claim expired; follows the waiting call's own signal. */
function outcomeWithin(flight: Flight, signal: AbortSignal): Promise<ToolResult | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), Math.max(0, flight.until - Date.now()));
  });
  return raceAbort(Promise.race([flight.result, expired]), signal).finally(() => clearTimeout(timer));
}

function replay(
  ctx: ToolContext,
  keys: CallKeys,
  result: ToolResult,
  action: 'replayed' | 'joined',
): ToolResult {
  ctx.decisions.push({ by: 'idempotency', action, detail: { key: keys.digest } });
  return { ...result, _meta: { ...result._meta, [IDEMPOTENCY_META]: { replayed: true, key: keys.digest } } };
}

function otherArguments(ctx: ToolContext, keys: CallKeys): ToolResult {
  ctx.decisions.push({
    by: 'idempotency',
    action: 'refused',
    reason: 'key reused with other arguments',
    detail: { key: keys.digest },
  });
  return fail('invalid_argument', 'This idempotency key was used with other arguments.', {
    hint: 'Use a new idempotency key for a different request, or repeat the original arguments exactly.',
  });
}

function stillRunning(ctx: ToolContext, keys: CallKeys, pollIntervalMs: number): ToolResult {
  ctx.decisions.push({ by: 'idempotency', action: 'still-running', detail: { key: keys.digest } });
  return fail('unavailable', 'An identical call is still running; this one did not run again.', {
    hint: 'Wait, then retry once with the same arguments to get its result.',
    retryable: true,
    retryAfterMs: Math.max(1000, pollIntervalMs),
  });
}

/** Whether `stored` is the claim written by the call holding `token` (its own, after a lost reply). */
function isOwnClaim(stored: StoredCall | undefined, token: string): boolean {
  return stored?.s === 'running' && stored.c === token;
}

/** A stored claim or result, or undefined when the text is neither (damaged, or another writer's). */
function parseStored(text: string): StoredCall | undefined {
  let value: Partial<Record<'s' | 'a' | 'c' | 'r', unknown>>;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || typeof value.a !== 'string') return undefined;
  if (value.s === 'running' && (value.c === undefined || typeof value.c === 'string')) {
    return value as StoredCall;
  }
  if (value.s === 'done' && isToolResult(value.r)) return value as StoredCall;
  return undefined;
}

/** What the log shows for an entry that is not a claim or result this middleware wrote (never its text). */
class UnreadableEntryError extends Error {
  constructor() {
    super('idempotency: the stored entry is not a claim or result this middleware can read');
    this.name = 'UnreadableEntryError';
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return raceAbort(
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      signal.addEventListener('abort', () => clearTimeout(timer), { once: true });
    }),
    signal,
  );
}
