import { randomUUID } from 'node:crypto';
import {
  boundStore,
  createLogThrottle,
  createMemoryStore,
  type ErrorCode,
  errorOf,
  fail,
  isErrorCode,
  isPassThrough,
  isStoreFullError,
  isToolResult,
  type LateOutcome,
  type NextFn,
  newIncidentId,
  onLateOutcome,
  optInTools,
  outcomeOf,
  type PolicyDecision,
  raceAbort,
  resolveToolOptions,
  runDetached,
  type StoreFullError,
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
// `ran`: the call ran but its result could not be kept (too large for the store, not JSON, a refused
// write); `o` is its outcome ('ok' or the error code) and `t` when it finished (epoch ms).
type StoredCall =
  | { s: 'running'; a: string; c?: string }
  | { s: 'done'; a: string; r: ToolResult }
  | RanMarker;
type RanMarker = { s: 'ran'; a: string; o: 'ok' | ErrorCode; t: number };

/** A claim this call wrote: its token, its text as stored, and a time it does not expire before (epoch ms). */
interface Claim {
  readonly token: string;
  readonly value: string;
  readonly expires: number;
}

/** Why a finished call's result was not kept (a decision's reason). */
type NotKept = 'not serialisable' | 'too large' | 'store full' | 'store failed';

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
    token: string,
    // The claim's text as stored: a release deletes the key only while it holds this.
    running: string,
    // Taken before any claim write of this call: its claim expires no earlier (never an object here,
    // so a successful call allocates nothing more).
    claimExpires: number,
  ): Promise<ToolResult> => {
    ctx.decisions.push({
      by: 'idempotency',
      action: 'claimed',
      detail: { key: keys.digest, explicit: keys.explicit },
    });
    // What the policies inside decide from here on tells whether a failure is the tool's own.
    const inside = ctx.decisions.length;
    let result: ToolResult;
    try {
      result = await next();
    } catch (error) {
      await release(ctx, keys, opts, running, claimExpires);
      throw error;
    }
    if (result.isError === true && outcomeOf(result) === 'timeout') {
      // A call that timed out (core answered a cancelled call without its handler, or a deadline further
      // in answered for it) may still be running its side effect, or have done it: core hands over what
      // the handler came to, should it settle later, and that replaces the timeout (kept or held).
      onLateOutcome(ctx, (late) => keepLate(ctx, keys, opts, token, running, claimExpires, late));
    }
    // Read only for a failure: a success costs nothing more.
    const own = result.isError !== true || isToolsOwn(ctx.decisions, inside);
    return keepOutcome(ctx, keys, opts, token, running, claimExpires, result, own);
  };

  /** What a finished call leaves in the store: its result, a marker, or nothing (its claim released). */
  const keepOutcome = async (
    ctx: ToolContext,
    keys: CallKeys,
    opts: IdempotencyToolOptions,
    token: string,
    running: string,
    claimExpires: number,
    result: ToolResult,
    // The handler's own outcome, not a policy inside that answered for it (see `isToolsOwn`).
    own: boolean,
  ): Promise<ToolResult> => {
    if (result.isError === true && !(opts.storeFailures && own && isOutcome(result))) {
      // A timed-out call's claim stays until claimTtlMs (or its handler's late outcome), so a retry
      // never runs beside a handler that may still be doing its side effect.
      if (outcomeOf(result) === 'timeout') {
        ctx.decisions.push({
          by: 'idempotency',
          action: 'held',
          reason: 'timed out',
          detail: { key: keys.digest },
        });
      } else {
        await release(ctx, keys, opts, running, claimExpires);
      }
      return result;
    }
    const stored: StoredCall = { s: 'done', a: keys.args, r: result };
    let text: string;
    try {
      text = JSON.stringify(stored);
    } catch (error) {
      await keepMarker(
        ctx,
        keys,
        opts,
        { token, value: running, expires: claimExpires },
        result,
        'not serialisable',
        error,
      );
      return result;
    }
    // A result is kept for windowMs in a store shared by every caller, and the model chooses arguments
    // that can make it large (an echoed note, a rendered document): uncapped, a few calls fill a Redis at
    // its maxmemory (then every caller's new calls are refused) or the memory store (which counts entries,
    // not their size). Past maxResultSize only the marker is kept, so entries × maxResultSize bounds what
    // the store holds, and a retry still never runs the call again. One comparison on the success path.
    if (text.length > opts.maxResultSize) {
      await keepMarker(
        ctx,
        keys,
        opts,
        { token, value: running, expires: claimExpires },
        result,
        'too large',
        undefined,
      );
      return result;
    }
    try {
      // Not bound to the call's signal: a cancelled call that ran must still leave its result behind.
      await bounded.set(keys.storeKey, text, opts.windowMs);
    } catch (error) {
      await keepMarker(
        ctx,
        keys,
        opts,
        { token, value: running, expires: claimExpires },
        result,
        isStoreFullError(error) ? 'store full' : 'store failed',
        error,
      );
    }
    return result;
  };

  /**
   * A timed-out call's handler settled after all: what it came to replaces the held claim (or the kept
   * timeout), so a retry is answered what the call did instead of running it again, or runs it when it
   * failed. Only while the claim is surely still this call's: past it, another call may hold the key.
   */
  const keepLate = (
    ctx: ToolContext,
    keys: CallKeys,
    opts: IdempotencyToolOptions,
    token: string,
    running: string,
    claimExpires: number,
    late: LateOutcome,
  ): void => {
    const fields = { tool: ctx.toolName, requestId: ctx.request.id, key: keys.digest };
    if (Date.now() + storeTimeoutMs >= claimExpires) {
      ctx.logger.warn(
        { ...fields, claimTtlMs: opts.claimTtlMs },
        'idempotency: a timed-out call finished past its claim (claimTtlMs), which another call may hold now; what it did was not kept',
      );
      return;
    }
    const kept =
      late.result === undefined
        ? release(ctx, keys, opts, running, claimExpires)
        : keepOutcome(ctx, keys, opts, token, running, claimExpires, late.result, true);
    kept.then(
      () =>
        ctx.logger.info(
          { ...fields, outcome: late.result === undefined ? 'threw' : outcomeOf(late.result) },
          'idempotency: a timed-out call finished after its answer; its outcome replaced the held claim',
        ),
      (error: unknown) =>
        ctx.logger.warn(
          { ...fields, err: error },
          'idempotency: the late outcome of a timed-out call was not kept',
        ),
    );
  };

  const notKeptLog = createLogThrottle({ intervalMs: 60_000 });
  /**
   * The call ran but its result cannot be kept: a small marker takes its claim's place for `windowMs`,
   * so a retry is told the call already ran instead of waiting out claimTtlMs and then running it again.
   * A marker that cannot be written now is tried again until shortly before the claim expires (a retry
   * meanwhile waits as for a running call); the log follows it under an incident id.
   */
  const keepMarker = async (
    ctx: ToolContext,
    keys: CallKeys,
    opts: IdempotencyToolOptions,
    claim: Claim,
    result: ToolResult,
    why: NotKept,
    error: unknown,
  ): Promise<void> => {
    const outcome = result.isError === true ? (errorOf(result)?.error ?? 'internal') : 'ok';
    const marker = JSON.stringify({ s: 'ran', a: keys.args, o: outcome, t: Date.now() } satisfies RanMarker);
    let markerError: unknown;
    try {
      await bounded.set(keys.storeKey, marker, opts.windowMs);
    } catch (failure) {
      markerError = failure;
    }
    const written = markerError === undefined;
    const retrying = !written && replaceLostClaim(keys, claim, marker, opts.windowMs, ctx);
    ctx.decisions.push({
      by: 'idempotency',
      action: 'result-not-kept',
      reason: why,
      detail: { key: keys.digest, marker: written ? 'written' : retrying ? 'retrying' : 'not written' },
    });
    const then = written
      ? 'a retry is told the call already ran'
      : 'a retry waits as for a running call until a marker is written or the claim expires';
    if (why === 'not serialisable') {
      notKeptLog(`idempotency:not-serialisable:${ctx.toolName}`, (suppressed) =>
        ctx.logger.warn(
          { tool: ctx.toolName, err: error, ...(suppressed > 0 ? { repeated: suppressed } : {}) },
          `idempotency: a finished call's result is not JSON and was not kept; ${then}`,
        ),
      );
    } else if (why === 'too large') {
      notKeptLog(`idempotency:too-large:${ctx.toolName}`, (suppressed) =>
        ctx.logger.warn(
          {
            tool: ctx.toolName,
            maxResultSize: opts.maxResultSize,
            ...(suppressed > 0 ? { repeated: suppressed } : {}),
          },
          `idempotency: a finished call's result is longer than maxResultSize and was not kept; ${then}`,
        ),
      );
    } else {
      bounded.failed('set', error, ctx.logger, `a finished result was not kept; ${then}`);
    }
    if (written) return;
    ctx.incidentId ??= newIncidentId();
    ctx.logger.error(
      {
        incidentId: ctx.incidentId,
        tool: ctx.toolName,
        requestId: ctx.request.id,
        key: keys.digest,
        claimTtlMs: opts.claimTtlMs,
        reason: why,
        err: markerError,
      },
      retrying
        ? 'idempotency: a call ran, but neither its result nor a marker saying so could be stored; the marker is tried again until its claim expires, after which a retry would run the call again'
        : 'idempotency: a call ran, but neither its result nor a marker saying so could be stored; after its claim expires a retry runs the call again',
    );
  };

  const holdsToken = async (ctx: ToolContext, keys: CallKeys, token: string): Promise<boolean> => {
    try {
      return isOwnClaim(parseStored((await bounded.get(keys.storeKey, ctx.signal)) ?? ''), token);
    } catch {
      return false;
    }
  };

  const lostClaims = new Set<ReturnType<typeof setTimeout>>();
  /**
   * Once the store answers, replaces a claim of this call's own: removes it (a call that did not run
   * under it), or puts `marker` in its place (a call that ran, whose result and marker were not
   * written). False when too many are pending: the claim is then left to expire (claimTtlMs).
   */
  const replaceLostClaim = (
    keys: CallKeys,
    claim: Claim,
    marker?: string,
    windowMs?: number,
    ctx?: ToolContext,
  ): boolean => {
    // During an outage every call lands here: past MAX_LOST_CLAIMS at once, a claim is left to expire
    // (claimTtlMs), so an outage never turns into a crowd of timers and a burst of reads at recovery.
    if (lostClaims.size >= MAX_LOST_CLAIMS) return false;
    // The log lines that follow a marker written late, under the call's incident id.
    const report = (level: 'info' | 'error', message: string): void => {
      if (ctx === undefined) return;
      try {
        ctx.logger[level]({ incidentId: ctx.incidentId, tool: ctx.toolName, key: keys.digest }, message);
      } catch {
        // a logger that throws must not break the timer
      }
    };
    let delay = pollIntervalMs;
    const attempt = async (): Promise<void> => {
      // Stops well before the claim could have expired and been made again by another call.
      if (Date.now() + 2 * storeTimeoutMs >= claim.expires) {
        report(
          'error',
          'idempotency: the marker of a call that ran was never written; once its claim expires a retry runs the call again',
        );
        return;
      }
      try {
        if (marker === undefined && bounded.deleteIfEquals !== undefined) {
          // One atomic step: the key is deleted only while it holds this claim, however late it lands.
          await bounded.deleteIfEquals(keys.storeKey, claim.value);
        } else if (isOwnClaim(parseStored((await bounded.get(keys.storeKey)) ?? ''), claim.token)) {
          if (marker === undefined) await bounded.delete(keys.storeKey);
          else {
            await bounded.set(keys.storeKey, marker, windowMs!);
            report(
              'info',
              'idempotency: the marker of a call that ran was written after all; a retry is told the call already ran',
            );
          }
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
    return true;
  };

  const release = async (
    ctx: ToolContext,
    keys: CallKeys,
    opts: IdempotencyToolOptions,
    running: string,
    claimExpires: number,
  ): Promise<void> => {
    const pastClaim = (): void =>
      ctx.logger.warn(
        { tool: ctx.toolName, requestId: ctx.request.id, key: keys.digest, claimTtlMs: opts.claimTtlMs },
        'idempotency: a failed call ran past its claim (claimTtlMs), which another call may hold now; it was not released',
      );
    // The key may hold the claim of a call made since (on any replica) by the time a release lands (a
    // partition that heals, a lost reply): deleting that claim would let a third call run beside it. A
    // store with deleteIfEquals deletes the key only while it holds this call's own claim, however late.
    if (bounded.deleteIfEquals !== undefined) {
      let released: boolean;
      try {
        released = await bounded.deleteIfEquals(keys.storeKey, running);
      } catch (error) {
        bounded.failed('deleteIfEquals', error, ctx.logger, 'a failed call keeps its claim until claimTtlMs');
        return;
      }
      if (!released) pastClaim();
      return;
    }
    // Without it, only a time guard: a claim that may have expired before the delete lands is left alone.
    if (Date.now() + storeTimeoutMs >= claimExpires) {
      pastClaim();
      return;
    }
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
    // How long this call waits for another's claim: until it expires, or maxWaitMs if sooner.
    const waitEnds =
      opts.maxWaitMs === undefined ? waitUntil : Math.min(waitUntil, Date.now() + opts.maxWaitMs);
    // Taken before each claim write: a claim won after waiting for another call's expires later.
    let claimExpires = waitUntil;
    const token = randomUUID();
    const running = JSON.stringify({ s: 'running', a: keys.args, c: token } satisfies StoredCall);
    for (;;) {
      let claimed: boolean;
      // A full store refuses every write, even of a key that holds a value (Redis answers OOM before it
      // looks at NX): a repeat needs no new key, so what the key holds answers it, as below.
      let full: StoreFullError | undefined;
      try {
        claimed = await bounded.setIfAbsent(keys.storeKey, running, opts.claimTtlMs, ctx.signal);
      } catch (error) {
        // The write may have landed with its answer lost: a claim that holds this call's token is its own.
        // Not when the store says it landed on the primary alone (redis-store's `minReplicas`): a
        // failover would lose it, and a retry on the new primary would run the call a second time.
        if (!isStoreFullError(error)) {
          if (!ctx.signal.aborted && !isNotReplicated(error) && (await holdsToken(ctx, keys, token))) {
            return runClaimed(ctx, next, keys, opts, token, running, claimExpires);
          }
          // This call will not run under it: once the store answers, a claim of its own is removed, so
          // retries are not kept waiting for claimTtlMs by a call that is not running.
          // `claimExpires` was taken before the write: the claim, if it landed, expires no earlier. A time
          // taken now (after the write timed out and the read failed, up to 2 × storeTimeoutMs later) would
          // let the removal run past the claim's real expiry and delete the claim of a call made since.
          replaceLostClaim(keys, { token, value: running, expires: claimExpires });
          return storeDown(ctx, keys, opts, next, 'setIfAbsent', error);
        }
        if (ctx.signal.aborted) throw ctx.signal.reason;
        full = error;
        claimed = false;
      }
      if (claimed) return runClaimed(ctx, next, keys, opts, token, running, claimExpires);
      // What the key cannot answer is refused as the store's failure: on a full store, as a full store
      // (never run unguarded by onStoreFailure 'open').
      const refuse = (error: unknown) =>
        full === undefined
          ? storeDown(ctx, keys, opts, next, 'get', error)
          : storeDown(ctx, keys, opts, next, 'setIfAbsent', full);
      let text: string | undefined;
      try {
        text = await bounded.get(keys.storeKey, ctx.signal);
      } catch (error) {
        return refuse(error);
      }
      // Nothing stored and no room for a claim: refused as a full store.
      if (text === undefined && full !== undefined)
        return storeDown(ctx, keys, opts, next, 'setIfAbsent', full);
      if (text !== undefined) {
        const stored = parseStored(text);
        // Damaged, or written by something else: whether the call ran cannot be read, so it is treated
        // as a store that cannot be read (never polled until claimTtlMs, never run over it).
        if (stored === undefined) return refuse(new UnreadableEntryError());
        if (stored.a !== keys.args) return otherArguments(ctx, keys);
        // This call's own claim, written by a resent write after its first answer was lost.
        if (isOwnClaim(stored, token)) return runClaimed(ctx, next, keys, opts, token, running, waitUntil);
        if (stored.s === 'done') return replay(ctx, keys, stored.r, 'replayed');
        if (stored.s === 'ran') return alreadyRan(ctx, keys, stored);
        // Another call's claim: waited for as for any running call, full store or not (each poll tries
        // the claim again, so a call whose claim was released claims it once there is room).
        if (Date.now() >= waitEnds) return stillRunning(ctx, keys, pollIntervalMs);
        await sleep(pollIntervalMs, ctx.signal);
      }
      claimExpires = Date.now() + opts.claimTtlMs;
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
      const waitEnds =
        opts.maxWaitMs === undefined ? flight.until : Math.min(flight.until, Date.now() + opts.maxWaitMs);
      const result = await outcomeWithin(flight, waitEnds, ctx.signal);
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
    notKeptLog.flush();
    if (given === undefined) await store.close?.();
  };
  return middleware;
}

/**
 * Whether a failure is the call's outcome, kept under `storeFailures`. A request for confirmation is a
 * question: kept, it would be replayed to the confirmed retry, which then could never run. A timeout (or
 * a cancelled call) is no outcome either: the handler may still be doing its side effect, so its claim
 * is held until claimTtlMs or the handler's late outcome, as without `storeFailures`; kept, it would be
 * replayed for windowMs to every retry, though it tells the model to retry.
 */
function isOutcome(result: ToolResult): boolean {
  const outcome = outcomeOf(result);
  return outcome !== 'confirmation_required' && outcome !== 'timeout';
}

/**
 * The decisions a policy inside idempotency records while it lets a call through to the handler, or
 * about the handler's run once it ran (a breaker opening on its failure, redact-errors mapping its
 * throw). Every other decision is a policy answering for the call: confirm refusing a token that does
 * not match (`refused`), a person declining (`declined`), an open circuit (`short-circuit`), a limit.
 */
const LETS_THROUGH: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  ['authz', new Set(['allow'])],
  ['rate-limit', new Set(['allow'])],
  ['url-allowlist', new Set(['allow'])],
  ['confirm', new Set(['confirmed'])],
  ['circuit-breaker', new Set(['half-open', 'timeout', 'open', 'open-caller', 'close'])],
  ['redact-errors', new Set(['map', 'internal', 'scrub', 'cancelled'])],
  ['audit', new Set(['late-outcome'])],
  // exec's decisions are its handler's own (an argument it refuses, a process it kills).
  ['exec', new Set(['refuse', 'kill'])],
]);

/**
 * Whether a failure is the tool's own: every decision made inside idempotency since its claim (from
 * `from` on) let the call through or followed its handler's run. A refusal by a policy inside (confirm,
 * a circuit breaker, one of the app's own) is not the call's outcome: kept under `storeFailures` it
 * would be replayed for `windowMs` to the retry it asks for (a correctly confirmed call, a call after
 * the circuit closed), which then never runs. An unknown decision counts as a refusal: a failure not
 * kept only runs again, as without `storeFailures`.
 */
function isToolsOwn(decisions: readonly PolicyDecision[], from: number): boolean {
  for (let index = from; index < decisions.length; index += 1) {
    const decision = decisions[index]!;
    if (LETS_THROUGH.get(decision.by)?.has(decision.action) !== true) return false;
  }
  return true;
}

/** The flight's outcome, or undefined at `until` (its claim's expiry, or maxWaitMs); follows the waiting call's own signal. */
function outcomeWithin(flight: Flight, until: number, signal: AbortSignal): Promise<ToolResult | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), Math.max(0, until - Date.now()));
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

/** The answer to a retry of a call that ran but whose result could not be kept: never a second run. */
function alreadyRan(ctx: ToolContext, keys: CallKeys, marker: RanMarker): ToolResult {
  const ranAt = new Date(marker.t).toISOString().replace(/\.\d{3}Z$/, 'Z');
  ctx.decisions.push({
    by: 'idempotency',
    action: 'already-ran',
    detail: { key: keys.digest, outcome: marker.o },
  });
  const how = marker.o === 'ok' ? 'succeeded' : `failed (${marker.o})`;
  const result = fail(
    'repeated_call',
    `This call already ran at ${ranAt} and ${how}; its result could not be kept, so it was not run again.`,
    {
      hint: 'Do not repeat it. Check what it did with a tool that reads the current state, then tell the user.',
      retryable: false,
    },
  );
  result._meta = {
    ...result._meta,
    [IDEMPOTENCY_META]: { replayed: true, key: keys.digest, resultKept: false, outcome: marker.o, ranAt },
  };
  return result;
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
  let value: Partial<Record<'s' | 'a' | 'c' | 'r' | 'o' | 't', unknown>>;
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
  if (
    value.s === 'ran' &&
    (value.o === 'ok' || isErrorCode(value.o)) &&
    typeof value.t === 'number' &&
    Number.isFinite(value.t) &&
    Math.abs(value.t) <= 8.64e15
  ) {
    return value as StoredCall;
  }
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
      // Removed when the timer fires: a call polling a long claim would otherwise add one per poll.
      const onAbort = (): void => clearTimeout(timer);
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal.addEventListener('abort', onAbort, { once: true });
    }),
    signal,
  );
}

/**
 * A write the store applied on its primary but too few replicas acknowledged (`@toolgate/redis-store`'s
 * `minReplicas`: its error's code is `NOT_REPLICATED`): never a claim to run under.
 */
function isNotReplicated(error: unknown): boolean {
  return (
    typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 'NOT_REPLICATED'
  );
}
