import {
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
import { type CallEntry, decodeCallEntry, encodeCallEntry } from './call-entry.js';
import { repeatCallKey } from './key.js';
import { createMemoryRepeatStore } from './memory-store.js';
import { checkProgress } from './no-progress.js';
import { resolveRules } from './options.js';
import { StoreAccess, StoreUnavailable } from './store-access.js';
import type { RepeatGuard, RepeatGuardOptions, RepeatRules, RepeatStore } from './types.js';

/** Identical calls running now in this process: later ones wait for the first one's answer. */
interface Flight {
  /** Calls of this key running now (they were below the threshold when they started). */
  running: number;
  /** The first runner's stored entry, or undefined when it threw, was aborted or was not remembered. */
  readonly done: Promise<string | undefined>;
  settle(encoded: string | undefined): void;
}

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
  const scopeOf = options.scope;
  const flights = new Map<string, Flight>();

  const run = async (
    ctx: ToolContext,
    next: NextFn,
    toolRules: Readonly<RepeatRules>,
    scope: string | undefined,
    key: string,
    earlier: CallEntry | undefined,
  ): Promise<ToolResult> => {
    let flight = flights.get(key);
    const owner = flight === undefined;
    if (flight === undefined) {
      flight = newFlight();
      flights.set(key, flight);
    }
    flight.running += 1;
    try {
      const result = await next();
      // An aborted call's result (often a timeout) says nothing about the next identical call.
      if (ctx.signal.aborted) return result;
      const remembered = rememberedEntry(toolRules, earlier, result);
      if (owner) flight.settle(remembered?.text);
      if (remembered) await store.write(key, remembered.text, remembered.ttlMs, ctx);
      else if (earlier) await store.write(key, undefined, 0, ctx);
      return await checkProgress(ctx, toolRules, store, scope, key, result);
    } finally {
      flight.running -= 1;
      if (owner) {
        flight.settle(undefined);
        if (flights.get(key) === flight) flights.delete(key);
      }
    }
  };

  const middleware: ToolMiddleware = async function repeatGuardMiddleware(ctx, next) {
    const toolRules = isPassThrough(ctx) ? undefined : rules.forTool(ctx.toolName);
    if (toolRules === undefined) return next();
    // Identity and bindings always come from core; a custom scope can only split a caller further.
    const scope = scopeOf?.(ctx);
    const key = repeatCallKey(ctx, scope);
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
    const earlier = decodeCallEntry(stored);
    const answer = earlier && answerRepeat(ctx, toolRules, earlier, key, false);
    if (answer) return answer;
    const flight = flights.get(key);
    const executed = earlier && inWindow(earlier, toolRules, Date.now()) ? earlier.count : 0;
    if (flight && executed + flight.running + 1 >= toolRules.threshold) {
      // Single flight: an identical call is running now; its answer is this call's earlier result.
      // Each waiter follows its own abort: a cancelled waiter stops waiting for someone else's call.
      const settled = decodeCallEntry(await raceAbort(flight.done, ctx.signal));
      const shared = settled && answerRepeat(ctx, toolRules, settled, key, true);
      if (shared) return shared;
    }
    return run(ctx, next, toolRules, scope, key, earlier);
  };
  return Object.assign(middleware, { close: () => store.flush() });
}

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
    if (envelope.retryable) {
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
  ctx.decisions.push({
    by: 'repeat-guard',
    action: 'short-circuit',
    reason: 'repeated_call',
    detail: { answer: kind, ageMs, executions: entry.count, inFlight },
  });
  ctx.logger.info(
    { tool: ctx.toolName, requestId: ctx.request.id, key, answer: kind, ageMs, inFlight },
    'repeat-guard: repeated call answered without running it',
  );
  return answer;
}

function inWindow(entry: CallEntry, rules: Readonly<RepeatRules>, now: number): boolean {
  return now - entry.firstAt < rules.windowMs;
}

/** What to store after a real run: the entry's JSON and its time to live, or undefined to forget the key. */
function rememberedEntry(
  rules: Readonly<RepeatRules>,
  earlier: CallEntry | undefined,
  result: ToolResult,
): { text: string; ttlMs: number } | undefined {
  if (rules.onFailedRepeat === 'run' && result.isError === true) return undefined;
  const now = Date.now();
  const continuing = earlier !== undefined && inWindow(earlier, rules, now);
  const firstAt = continuing ? earlier.firstAt : now;
  let text: string;
  try {
    text = encodeCallEntry({ count: (continuing ? earlier.count : 0) + 1, firstAt, at: now, result });
  } catch {
    return undefined; // not JSON (a BigInt, a cycle): the SDK cannot send it either; nothing to replay
  }
  if (text.length > rules.maxResultSize) return undefined;
  return { text, ttlMs: firstAt + rules.windowMs - now };
}

function newFlight(): Flight {
  let resolve!: (encoded: string | undefined) => void;
  let settled = false;
  const done = new Promise<string | undefined>((done) => {
    resolve = done;
  });
  return {
    running: 0,
    done,
    settle(encoded) {
      if (settled) return;
      settled = true;
      resolve(encoded);
    },
  };
}
