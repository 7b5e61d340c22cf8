import {
  boundStore,
  createMemoryStore,
  fail,
  isPassThrough,
  isStoreFullError,
  type NextFn,
  optInTools,
  outcomeOf,
  raceAbort,
  resolveToolOptions,
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

type StoredCall = { s: 'running'; a: string } | { s: 'done'; a: string; r: ToolResult };

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
      await release(ctx, keys);
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
    const running = JSON.stringify({ s: 'running', a: keys.args } satisfies StoredCall);
    for (;;) {
      let claimed: boolean;
      try {
        claimed = await bounded.setIfAbsent(keys.storeKey, running, opts.claimTtlMs, ctx.signal);
      } catch (error) {
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
        if (stored !== undefined && stored.a !== keys.args) return otherArguments(ctx, keys);
        if (stored?.s === 'done') return replay(ctx, keys, stored.r, 'replayed');
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

function parseStored(text: string): StoredCall | undefined {
  try {
    const value = JSON.parse(text) as StoredCall;
    return typeof value === 'object' && value !== null && typeof value.a === 'string' ? value : undefined;
  } catch {
    return undefined;
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
