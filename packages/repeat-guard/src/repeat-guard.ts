import {
  afterSettled,
  callNext,
  createLogThrottle,
  errorOf,
  isPassThrough,
  type NextFn,
  raceAbort,
  type ToolContext,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import {
  refusedFailure,
  repeatedCallFailure,
  repeatNote,
  storeUnavailableFailure,
  withNote,
} from './answers.js';
import {
  type CallEntry,
  decodeCallEntry,
  encodeCallEntry,
  hasEnvelope,
  measureCallEntry,
} from './call-entry.js';
import { Flight, Flights } from './flight.js';
import { repeatCallKey } from './key.js';
import { createMemoryRepeatStore, type MemoryEntries, memoryEntriesOf } from './memory-store.js';
import { checkProgress } from './no-progress.js';
import { resolveRules } from './options.js';
import { StoreAccess, StoreUnavailable } from './store-access.js';
import type { RepeatGuard, RepeatGuardOptions, RepeatRules, RepeatStore } from './types.js';

/**
 * Answers a call that repeats an identical earlier call (same caller identity and bindings, tool and
 * canonical arguments: core's `callKey`) within the window without running it: with the earlier
 * result and a note (or a `repeated_call` failure), or, after a failure, with the earlier error and a
 * hint not to retry unchanged. Calls with refused arguments and calls to unknown tools pass through.
 *
 * Place it after rate-limit and before idempotency and circuit-breaker:
 * `otel → audit → redact-errors → authz → rate-limit → repeat-guard → idempotency → confirm → circuit-breaker → handler`.
 */
export function createRepeatGuard(options: RepeatGuardOptions = {}): RepeatGuard {
  const rules = resolveRules(options);
  const rawStore: RepeatStore =
    options.store ?? createMemoryRepeatStore({ maxEntries: options.maxEntries ?? 10_000 });
  const storeTimeoutMs = options.storeTimeoutMs ?? 200;
  if (!(Number.isFinite(storeTimeoutMs) && storeTimeoutMs >= 1)) {
    throw new RangeError('createRepeatGuard: storeTimeoutMs must be a finite number of at least 1');
  }
  const onStoreFailure = options.onStoreFailure ?? 'open';
  if (onStoreFailure !== 'open' && onStoreFailure !== 'closed') {
    throw new TypeError("createRepeatGuard: onStoreFailure must be 'open' or 'closed'");
  }
  const store = new StoreAccess(rawStore, storeTimeoutMs, onStoreFailure);
  // A memory store (the default) is read and written synchronously, with entries kept as objects.
  const memory = memoryEntriesOf(rawStore);
  const scopeOf = options.scope;
  const flights = new Flights();
  // Lines about calls the guard could not key or answer from: one per kind and minute, with counts
  // (a model can send such a call every time).
  const throttle = createLogThrottle({ intervalMs: 60_000 });
  const logOnce = (ctx: ToolContext, kind: string, error: unknown, message: string): void => {
    throttle(kind, (suppressed) =>
      ctx.logger.warn(
        { tool: ctx.toolName, err: error, ...(suppressed > 0 ? { occurrences: suppressed + 1 } : {}) },
        suppressed > 0 ? `${message} (${suppressed + 1} times in the last minute)` : message,
      ),
    );
  };

  /**
   * `answerRepeat`, never throwing: an entry the answer cannot be built from (a forged or damaged one
   * read from a store, structured content nested past the stack, say) is one the call runs instead of,
   * as it would run with nothing remembered. The answer is built from data that outlived the call that
   * made it; a throw here must not turn this call into an `internal` failure.
   */
  const answerFrom = (
    ctx: ToolContext,
    toolRules: Readonly<RepeatRules>,
    entry: CallEntry,
    key: string,
    scope: string | undefined,
    inFlight: boolean,
  ): ToolResult | undefined => {
    try {
      return answerRepeat(ctx, toolRules, entry, key, memory === undefined, scope, inFlight);
    } catch (error) {
      logOnce(
        ctx,
        'unanswerable',
        error,
        'repeat-guard: a remembered result could not be answered from; the call runs instead',
      );
      return undefined;
    }
  };

  /** The call runs: the first of a key in flight is its owner, whose entry waiters get. */
  const run = async (
    ctx: ToolContext,
    next: NextFn,
    toolRules: Readonly<RepeatRules>,
    scope: string | undefined,
    key: string,
    earlier: CallEntry | undefined,
  ): Promise<ToolResult> => {
    const found = flights.get(key);
    const owner = found === undefined;
    const flight = enterFlight(key, found);
    try {
      const result = await next();
      // An aborted call's result (often a timeout) says nothing about the next identical call.
      if (ctx.signal.aborted) return result;
      if (memory !== undefined) {
        rememberInMemory(memory, toolRules, key, earlier, result, flight, owner, NOT_ABSENT);
      } else {
        const entry = rememberedEntry(toolRules, earlier, result);
        const text = entry && encodedEntry(entry, toolRules);
        if (owner) flight.settle(text === undefined ? undefined : entry);
        if (text !== undefined) await store.write(key, text, ttlOf(entry!, toolRules), ctx);
        else if (earlier !== undefined) await store.write(key, undefined, 0, ctx);
      }
      return toolRules.noProgress === false
        ? result
        : await checkProgress(ctx, toolRules, store, scope, key, result);
    } finally {
      leaveFlight(key, flight, owner);
    }
  };

  /** Joins the flight found for `key`, or starts one (the call then owns it). */
  const enterFlight = (key: string, found: Flight | undefined): Flight => {
    const flight = found ?? new Flight();
    if (found === undefined) flights.add(key, flight);
    flight.running += 1;
    return flight;
  };

  /**
   * A memory store's run ended with `result`: remembers it (or forgets the key when it is not kept),
   * and the owner hands the entry to the flight's waiters. `absentSince`: see `MemoryEntries.set`.
   */
  const rememberInMemory = (
    memory: MemoryEntries,
    toolRules: Readonly<RepeatRules>,
    key: string,
    earlier: CallEntry | undefined,
    result: ToolResult,
    flight: Flight,
    owner: boolean,
    absentSince: number,
  ): void => {
    const entry = rememberedEntry(toolRules, earlier, result);
    const size = entry && measureCallEntry(entry, toolRules.maxResultSize);
    const kept = size === undefined ? undefined : entry;
    if (owner) flight.settle(kept);
    if (kept !== undefined) memory.set(key, kept, ttlOf(kept, toolRules), size!, absentSince);
    else if (earlier !== undefined) memory.delete(key);
  };

  /** Ends a run's part in its flight: the first runner's end also ends the flight. */
  const leaveFlight = (key: string, flight: Flight, owner: boolean): void => {
    flight.running -= 1;
    if (owner) {
      flight.settle(undefined);
      // The owner's flight stays the one under its key until it leaves: only owners remove, and a
      // flight is only added where none was.
      flights.remove(key, flight);
    }
  };

  /**
   * `run` for the memory store without a no-progress check (the default): the same steps, all
   * synchronous once next() settles, so two handlers beside the chain replace an async frame.
   */
  const runInMemory = (
    memory: MemoryEntries,
    ctx: ToolContext,
    next: NextFn,
    toolRules: Readonly<RepeatRules>,
    key: string,
    earlier: CallEntry | undefined,
    joined: Flight | undefined,
    absentSince: number,
  ): Promise<ToolResult> => {
    // `joined`: the flight decide() found for this key (read there, not looked up again).
    const owner = joined === undefined;
    const running = enterFlight(key, joined);
    const pending = callNext(next);
    // Beside the chain (`afterSettled`): remembered before the answer leaves, without a microtask hop.
    afterSettled(
      pending,
      (result) => {
        try {
          // An aborted call's result (often a timeout) says nothing about the next identical call.
          if (!ctx.signal.aborted) {
            rememberInMemory(memory, toolRules, key, earlier, result, running, owner, absentSince);
          }
        } catch (fault) {
          // Caught here rather than through afterSettled's onFault: no third closure per call.
          ctx.logger.error(
            { err: fault, tool: ctx.toolName },
            'repeat-guard: a call could not be remembered',
          );
        } finally {
          leaveFlight(key, running, owner);
        }
      },
      () => leaveFlight(key, running, owner),
    );
    return pending;
  };

  /** A waiter on an identical call in flight: its answer is this call's, else this call runs. */
  const waitThenRun = async (
    ctx: ToolContext,
    next: NextFn,
    toolRules: Readonly<RepeatRules>,
    scope: string | undefined,
    key: string,
    earlier: CallEntry | undefined,
    flight: Flight,
  ): Promise<ToolResult> => {
    // Each waiter follows its own abort: a cancelled waiter stops waiting for someone else's call.
    const settled = await raceAbort(flight.wait(), ctx.signal);
    const shared = settled && answerFrom(ctx, toolRules, settled, key, scope, true);
    return shared || run(ctx, next, toolRules, scope, key, earlier);
  };

  /**
   * After the store was read: answer from `earlier`, wait for an identical call in flight, or run.
   * Not async: a call that runs (nearly all) costs the one promise of `run`.
   */
  const decide = (
    ctx: ToolContext,
    next: NextFn,
    toolRules: Readonly<RepeatRules>,
    scope: string | undefined,
    key: string,
    earlier: CallEntry | undefined,
    absentSince: number,
  ): Promise<ToolResult> => {
    if (earlier !== undefined) {
      const answer = answerFrom(ctx, toolRules, earlier, key, scope, false);
      if (answer) return Promise.resolve(answer);
    }
    const flight = flights.get(key);
    if (flight !== undefined) {
      const executed = earlier && inWindow(earlier, toolRules, Date.now()) ? earlier.count : 0;
      // Single flight: an identical call is running now; its answer is this call's earlier result.
      if (executed + flight.running + 1 >= toolRules.threshold) {
        return waitThenRun(ctx, next, toolRules, scope, key, earlier, flight);
      }
    }
    if (memory !== undefined && toolRules.noProgress === false) {
      return runInMemory(memory, ctx, next, toolRules, key, earlier, flight, absentSince);
    }
    return run(ctx, next, toolRules, scope, key, earlier);
  };

  /** A shared store (Redis, custom): hashed keys, JSON entries, every operation bounded. */
  const viaStore = async (
    ctx: ToolContext,
    next: NextFn,
    toolRules: Readonly<RepeatRules>,
    scope: string | undefined,
    key: string,
  ): Promise<ToolResult> => {
    let stored: string | undefined;
    try {
      stored = await store.read(key, ctx);
    } catch (error) {
      if (error instanceof StoreUnavailable) {
        ctx.decisions.push({ by: 'repeat-guard', action: 'short-circuit', reason: 'store_unavailable' });
        return storeUnavailableFailure(ctx.toolName);
      }
      throw error; // the call was cancelled while the store was asked
    }
    const earlier = decodeCallEntry(stored, toolRules.maxResultSize);
    return decide(ctx, next, toolRules, scope, key, earlier, NOT_ABSENT);
  };

  const middleware: ToolMiddleware = function repeatGuardMiddleware(ctx, next) {
    const toolRules = isPassThrough(ctx) ? undefined : rules.forTool(ctx.toolName);
    if (toolRules === undefined) return next();
    try {
      let scope: string | undefined;
      let key: string;
      try {
        // Identity and bindings always come from core; a custom scope can only split a caller further.
        scope = scopeOf?.(ctx);
        key = memory === undefined ? repeatCallKey(ctx, scope) : memory.keyOf(ctx, scope);
      } catch (error) {
        // No key (arguments a transform made into a Map, a Set or a cycle, arguments nested past
        // the stack, a scope function that threw): the call runs without the guard, as the tool would
        // without it. The guard is an optimisation, and a key it cannot compute can be nobody
        // else's, so nothing is shared; failing the call instead would let any argument the
        // model can nest deep enough turn every call of a tool into an `internal` failure.
        logOnce(
          ctx,
          'unkeyable',
          error,
          'repeat-guard: a call could not be keyed (arguments, bindings or scope that are not plain JSON data); it runs unguarded',
        );
        return next();
      }
      if (memory === undefined) return viaStore(ctx, next, toolRules, scope, key);
      // A cancelled call does not read the store (as with a shared store).
      if (ctx.signal.aborted) return Promise.reject(ctx.signal.reason);
      const value = memory.get(key);
      // A key found in neither generation: if the store is unchanged when the result is remembered
      // (a sequential caller's every call), the write need not look for it again.
      const absentSince = value === undefined ? memory.version() : NOT_ABSENT;
      // A string was put there through the store's public `set`: read it like a shared store's value.
      const earlier = typeof value === 'string' ? decodeCallEntry(value, toolRules.maxResultSize) : value;
      return decide(ctx, next, toolRules, scope, key, earlier, absentSince);
    } catch (error) {
      return Promise.reject(error); // answered with a promise, as an async middleware would
    }
  };
  return Object.assign(middleware, {
    close: () => {
      store.flush();
      throttle.flush();
    },
  });
}

/** `absentSince` when the key was not read absent from a memory store: the write looks for it. */
const NOT_ABSENT = -1;

/**
 * @deprecated Renamed `createRepeatGuard` (core's `createX` convention); this alias goes in the next
 * release.
 */
export const repeatGuard: (options?: RepeatGuardOptions) => RepeatGuard = createRepeatGuard;

/** The answer to a repeat of `entry`, or undefined when this call should run. */
function answerRepeat(
  ctx: ToolContext,
  rules: Readonly<RepeatRules>,
  entry: CallEntry,
  key: string,
  hashed: boolean,
  scope: string | undefined,
  inFlight: boolean,
): ToolResult | undefined {
  const now = Date.now();
  if (!inWindow(entry, rules, now)) return undefined;
  // A waiter already counted the running calls against the threshold before it waited.
  if (!inFlight && entry.count + 1 < rules.threshold) return undefined;
  const ageMs = Math.max(0, now - entry.at);
  const envelope = errorOf(entry.result);
  let answer: ToolResult;
  let kind: string;
  if (envelope) {
    let waitMs: number | undefined;
    // A timeout says nothing about the next identical call, whatever its flag (core's elicitation
    // timeout is not retryable: the user may answer this time).
    if (envelope.retryable || envelope.error === 'timeout') {
      const remaining = (envelope.retryAfterMs ?? 0) - ageMs;
      if (remaining <= 0) return undefined;
      waitMs = Math.ceil(remaining);
    }
    answer = refusedFailure(envelope, ageMs, waitMs);
    kind = 'earlier_error';
  } else if (rules.onRepeat === 'cached') {
    answer = withNote(entry.result, repeatNote(ageMs));
    kind = 'cached';
  } else {
    answer = repeatedCallFailure(ctx.toolName, ageMs);
    kind = 'repeated_call';
  }
  // The hashed key (a shared store's key): logs never carry the arguments. Made before the decision
  // is recorded: should it throw, the call runs and no short-circuit was recorded.
  const loggedKey = hashed ? key : repeatCallKey(ctx, scope);
  ctx.decisions.push({
    by: 'repeat-guard',
    action: 'short-circuit',
    reason: 'repeated_call',
    detail: { answer: kind, ageMs, executions: entry.count, inFlight },
  });
  ctx.logger.info(
    {
      tool: ctx.toolName,
      requestId: ctx.request.id,
      key: loggedKey,
      answer: kind,
      ageMs,
      inFlight,
    },
    'repeat-guard: repeated call answered without running it',
  );
  return answer;
}

function inWindow(entry: CallEntry, rules: Readonly<RepeatRules>, now: number): boolean {
  return now - entry.firstAt < rules.windowMs;
}

/** The entry to remember after a real run, or undefined to forget the key. */
function rememberedEntry(
  rules: Readonly<RepeatRules>,
  earlier: CallEntry | undefined,
  result: ToolResult,
): CallEntry | undefined {
  // A failure is remembered only with the envelope core's boundary passes on (see `hasEnvelope`): a
  // raw `isError` result's text, withheld from the model the first time, would be its message on the
  // repeat.
  if (result.isError === true && (rules.onFailedRepeat === 'run' || !hasEnvelope(result))) {
    return undefined;
  }
  const now = Date.now();
  const continuing = earlier !== undefined && inWindow(earlier, rules, now);
  return {
    count: (continuing ? earlier.count : 0) + 1,
    firstAt: continuing ? earlier.firstAt : now,
    at: now,
    result,
  };
}

/** The entry's JSON for a shared store, or undefined when it is too large or not JSON. */
function encodedEntry(entry: CallEntry, rules: Readonly<RepeatRules>): string | undefined {
  let text: string;
  try {
    text = encodeCallEntry(entry);
  } catch {
    return undefined; // not JSON (a BigInt, a cycle): the SDK cannot send it either; nothing to replay
  }
  return text.length > rules.maxResultSize ? undefined : text;
}

/** What is left of the entry's window, in ms. */
function ttlOf(entry: CallEntry, rules: Readonly<RepeatRules>): number {
  return Math.max(1, Math.ceil(entry.firstAt + rules.windowMs - entry.at));
}
