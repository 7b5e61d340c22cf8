import { EventEmitter } from 'node:events';
import {
  type CallerIdentity,
  createLogThrottle,
  type Logger,
  type LogThrottle,
  type NextFn,
  runDetached,
  type ToolContext,
  type ToolResult,
} from '@toolgate/core';
import CircuitBreaker from 'opossum';
import {
  CAPACITY_RETRY_AFTER_MS,
  callerCapacityAnswer,
  cancelledAnswer,
  capacityAnswer,
  openAnswer,
  probingAnswer,
  timeoutAnswer,
} from './answers.js';
import { CallerLedger, type FailureRoute, identityTag } from './callers.js';
import { type Verdict, verdictOfResult, verdictOfThrow } from './classify.js';
import { type CallOwner, type Ending, GuardedCall, type SlotHolder } from './deadline.js';
import { DeadlineQueue } from './deadline-queue.js';
import type { CircuitEvents } from './events.js';
import type { ResolvedSettings } from './settings.js';
import type { BreakerStats, CircuitEvent, CircuitEventType, CircuitState } from './types.js';

/** One counted outcome, fed to opossum after the call ended. */
interface Report {
  readonly ctx: ToolContext;
  readonly failed: boolean;
}

type Transition = 'open' | 'half-open' | 'close';

const BY = 'circuit-breaker';

/** Most callers whose slot counts a breaker keeps; past it, those holding no slot are dropped. */
const MAX_HOLDERS = 1024;

/** The slots one caller holds, keyed by its identity. */
interface Holder extends SlotHolder {
  readonly id: string;
  /** core's `local` caller (stdio, in-process): the only caller there is, held to no share. */
  readonly local: boolean;
}

// opossum's action: it only replays an outcome that already happened (see DependencyBreaker).
const replay = (report: Report): Promise<Report> =>
  report.failed ? Promise.reject(report) : Promise.resolve(report);
const ignore = (): void => {};

/** The counters of an opossum window bucket that this breaker adds to (a success) or takes from (a refused caller's failures). */
interface WindowBucket {
  fires: number;
  successes: number;
  failures: number;
}

/**
 * One breaker for one dependency (or one tool), for the server's life.
 *
 * opossum keeps the rolling window, the error-rate and volume thresholds and the open → half-open →
 * closed machine with its reset timer. The call itself runs outside opossum's `fire`, and only
 * counted outcomes are replayed into it afterwards, because inside `fire` a tool server's guarantees
 * break: every fire counts toward the volume (so short-circuits and model mistakes dilute the error
 * rate), an `errorFilter`-excluded error counts as a success and closes a half-open breaker, a
 * capacity refusal counts as a failure, a timeout only stops the waiting, and a call that started
 * before the breaker opened can close it by succeeding during half-open.
 */
export class DependencyBreaker implements CallOwner {
  readonly name: string;
  readonly settings: ResolvedSettings;
  /** Tools that call through this breaker. */
  readonly tools = new Set<string>();
  readonly #opossum: CircuitBreaker<[Report], Report>;
  readonly #rotator = new EventEmitter();
  readonly #rotateTimer: NodeJS.Timeout;
  readonly #logger: Logger;
  readonly #events: CircuitEvents;
  readonly #deadlines: DeadlineQueue | undefined;
  /** Bumped on every state change; an outcome from an older generation is stale. */
  #generation = 0;
  #lastTransition: Transition = 'close';
  #probing = false;
  /** The probe in flight (while `#probing`), when it started (performance.now()), and whose it is. */
  #probeCall: GuardedCall | undefined;
  #probeStartedAt = 0;
  #probeId: string | undefined;
  #inFlight = 0;
  /** Counted failures in a row in this generation; a success resets it. */
  #consecutive = 0;
  /** Set while this breaker itself trips opossum on the consecutive rule, for the log line. */
  #trippedBy: string | undefined;
  /** Short-circuits since the breaker last opened from closed, for the close line. */
  #outageShortCircuits = 0;
  #outageStartedAt = 0;
  /** A dead dependency flaps open → half-open → open every reset period: those lines are throttled. */
  readonly #throttle: LogThrottle = createLogThrottle({ intervalMs: 60_000 });
  /** performance.now(), as the reset timer runs: a step of the wall clock must not move retryAfterMs. */
  #openedAt = 0;
  #shut = false;
  /** opossum's current window bucket; dropped at each rotation and read again on the next success. */
  #bucket: WindowBucket | undefined;
  /** The report opossum is processing: state changes happen synchronously inside its events. */
  #reporting: Report | undefined;
  /** Which callers the failures come from; undefined when `isolateCallers` is off. */
  readonly #callers: CallerLedger | undefined;
  /** Window rotations so far, the clock of "another caller is about" (closing empties the window without moving it). */
  #rotations = 0;
  /** Set while closing empties the window: those rotations are no passing time. */
  #emptying = false;
  /** Slots one caller that is not `local` may hold (`callerShare` of `capacity`). */
  readonly #callerSlots: number;
  /** Slots held per caller identity. */
  readonly #holders = new Map<string, Holder>();
  // The caller of the last call (by reference) and its holder: a steady caller costs one comparison.
  #lastCaller: CallerIdentity | undefined;
  #lastHolder: Holder | undefined;
  // The identity of the last call, and the last other identity before it with the rotation it was last
  // seen at: another caller is about while that rotation is within the window.
  #seenId: string | undefined;
  #seenAt = 0;
  #otherId: string | undefined;
  #otherAt = 0;
  /**
   * The callers whose probe ended without a success (or outran resetTimeout), and until when
   * (performance.now()) each may not take the next probe: the probe goes to someone else. The `local`
   * caller is barred only while another caller is about. Emptied when a probe succeeds; at most
   * MAX_HOLDERS, the oldest bar dropped first.
   */
  readonly #barred = new Map<string, number>();
  readonly #totals: BreakerStats['totals'] = {
    successes: 0,
    failures: 0,
    timeouts: 0,
    ignored: 0,
    stale: 0,
    shortCircuits: 0,
    capacityRejections: 0,
    opened: 0,
    closed: 0,
    callerOpens: 0,
    callerShortCircuits: 0,
  };

  constructor(name: string, settings: ResolvedSettings, logger: Logger, events: CircuitEvents) {
    this.name = name;
    this.settings = settings;
    this.#logger = logger;
    this.#events = events;
    this.#deadlines = settings.timeout === false ? undefined : new DeadlineQueue(settings.timeout);
    this.#callers = settings.isolateCallers
      ? new CallerLedger(settings.rollingCountBuckets, settings.minFailingCallers)
      : undefined;
    this.#callerSlots = Math.max(1, Math.ceil(settings.capacity * settings.callerShare));
    // A fresh options object per breaker: opossum's constructor writes its defaults into the one it gets.
    this.#opossum = new CircuitBreaker(replay, {
      name,
      timeout: false, // the deadline is per call, through the call's own signal (runWithDeadline)
      errorThresholdPercentage: settings.errorThresholdPercentage,
      // Never reached: #record applies the volume and error-rate rule itself, after weighing callers.
      // opossum still opens a half-open breaker on its probe's failure.
      volumeThreshold: Number.MAX_SAFE_INTEGER,
      rollingCountTimeout: settings.rollingCountTimeout,
      rollingCountBuckets: settings.rollingCountBuckets,
      resetTimeout: settings.resetTimeout,
      rollingPercentilesEnabled: false,
      enableSnapshots: false,
      // Our own rotation, so the window can also be emptied when the breaker closes.
      rotateBucketController: this.#rotator,
    });
    const bucketMs = Math.floor(settings.rollingCountTimeout / settings.rollingCountBuckets);
    this.#rotateTimer = setInterval(() => this.#rotator.emit('rotate'), bucketMs);
    this.#rotateTimer.unref();
    // After opossum's own rotate listener (added in its constructor), which starts a new bucket.
    this.#rotator.on('rotate', () => {
      this.#bucket = undefined;
      // Closing empties the window at once: that is no time passing. Rotating the ledger (or the
      // presence clock) there aged out the very success that closed the breaker, so the next failures of
      // one caller opened it for everyone again.
      if (this.#emptying) return;
      this.#rotations += 1;
      this.#callers?.rotate();
      if (this.#holders.size > 1) this.#dropIdleHolders();
    });
    this.#opossum.on('failure', (_error, _latency, args) => {
      this.#reporting = args[0];
    });
    // Before opossum's own success listener, which closes a half-open breaker.
    this.#opossum.prependListener('success', (report: Report) => {
      this.#reporting = report;
    });
    this.#opossum.on('open', () => this.#transition('open'));
    // opossum's reset timer was set inside the call whose failure opened the breaker: its log line and
    // listeners belong to no call, so they must not run in (and join the trace of) that one.
    this.#opossum.on('halfOpen', () => runDetached(() => this.#transition('half-open')));
    this.#opossum.on('close', () => this.#transition('close'));
  }

  run(ctx: ToolContext, next: NextFn): Promise<ToolResult> {
    const breaker = this.#opossum;
    // Who is calling: one reference comparison for the caller of the last call.
    if (ctx.caller !== this.#lastCaller) this.#noteCaller(ctx.caller);
    this.#seenAt = this.#rotations;
    const holder = this.#lastHolder as Holder;
    let probe = false;
    if (!breaker.closed) {
      if (!breaker.halfOpen) return Promise.resolve(this.#shortCircuit(ctx));
      // A probe that has run longer than resetTimeout (a slow call, or no deadline at all) no longer
      // holds the breaker half-open against other callers: another caller may take the next probe.
      if (this.#probing && !this.#probeOverrun()) return Promise.resolve(this.#shortCircuit(ctx));
      // Every slot is held by a call that began before the breaker opened (a dependency that swallows
      // requests): the outage goes on, so say so rather than "at capacity, retry in a second".
      if (this.#inFlight >= this.settings.capacity) return Promise.resolve(this.#shortCircuit(ctx, true));
      // The last probe was this caller's and did not succeed (cancelled, a mistake, a failure, overrun):
      // the next one goes to another caller, so that no caller can hold the breaker half-open or open by
      // taking every probe. The `local` caller (the only one there is) probes again as before.
      const barredUntil = this.#barred.size === 0 ? undefined : this.#barred.get(this.#seenId as string);
      if (barredUntil !== undefined && (!holder.local || this.#othersAbout())) {
        const barredMs = barredUntil - performance.now();
        if (barredMs > 0) return Promise.resolve(this.#shortCircuit(ctx, false, Math.ceil(barredMs)));
      }
      probe = true;
    }
    // Nothing per call unless some caller is refused on its own (see CallerLedger).
    const callers = this.#callers;
    if (callers?.refusing) {
      const retryAfterMs = callers.refusedFor(ctx, performance.now());
      if (retryAfterMs !== undefined) return Promise.resolve(this.#refuseCaller(ctx, retryAfterMs));
    }
    if (this.#inFlight >= this.settings.capacity) return Promise.resolve(this.#rejectCapacity(ctx));
    // One caller's share, whether or not anyone else is about: it cannot take every slot from callers
    // still to come (nor hold them with slow calls it cancels, or that ignore their deadline).
    if (holder.held >= this.#callerSlots && !holder.local) {
      return Promise.resolve(this.#rejectCapacity(ctx, true));
    }
    if (probe) {
      // The overrun probe's caller is barred as if its probe had failed; its outcome counts for nothing.
      if (this.#probing) this.#barProber(this.#probeId, performance.now() + this.settings.resetTimeout);
      this.#probing = true;
      this.#probeStartedAt = performance.now();
      this.#probeId = this.#seenId;
      this.#decide(ctx, 'half-open', 'probe call after the reset timeout');
    }
    this.#inFlight += 1;
    holder.held += 1;
    const call = new GuardedCall(this, ctx, this.#deadlines, this.#generation, probe, holder);
    if (probe) this.#probeCall = call;
    return call.run(next);
  }

  /** The probe in flight has run past resetTimeout, and this call is another caller's. */
  #probeOverrun(): boolean {
    return (
      this.#seenId !== this.#probeId && performance.now() - this.#probeStartedAt >= this.settings.resetTimeout
    );
  }

  /** A call's own work settled: its slot is free (CallOwner). */
  release(call: GuardedCall): void {
    this.#inFlight -= 1;
    call.holder.held -= 1;
  }

  /**
   * How a call's wait ended, weighed and counted (CallOwner). The common case, a success of a
   * closed breaker, is counted synchronously: no Promise, no await.
   */
  conclude(call: GuardedCall, ending: Ending, value: unknown): ToolResult | Promise<ToolResult> {
    if (ending === 'returned' && !call.probe) {
      const result = value as ToolResult;
      if (verdictOfResult(result) === 'success' && this.#countSuccess(call.generation)) {
        this.#callers?.noteSuccess(call.ctx);
        return result;
      }
    }
    return this.#concludeCounted(call, ending, value);
  }

  async #concludeCounted(call: GuardedCall, ending: Ending, value: unknown): Promise<ToolResult> {
    const { ctx } = call;
    // A probe another caller's probe replaced (it outran resetTimeout): its outcome is stale.
    const superseded = call.probe && call !== this.#probeCall;
    const probe = call.probe && !superseded;
    const generation = superseded ? -1 : call.generation;
    // Only a probe that succeeded leaves its caller free to take the next probe at once.
    let verdict: Verdict = 'ignored';
    try {
      switch (ending) {
        case 'returned': {
          const result = value as ToolResult;
          verdict = verdictOfResult(result);
          await this.#record(ctx, generation, verdict, probe);
          return result;
        }
        case 'threw':
          verdict = verdictOfThrow(value);
          await this.#record(ctx, generation, verdict, probe);
          throw value;
        case 'timed-out': {
          const timeoutMs = this.settings.timeout as number;
          this.#totals.timeouts += 1;
          this.#decide(ctx, 'timeout', `no answer within ${timeoutMs} ms; the call's signal was aborted`, {
            timeoutMs,
          });
          this.#emit('timeout', ctx.toolName);
          await this.#record(ctx, generation, 'failure', probe);
          return timeoutAnswer(ctx.toolName, timeoutMs);
        }
        default:
          // Cancelled by the caller: says nothing about the dependency.
          await this.#record(ctx, generation, 'ignored', probe);
          return cancelledAnswer(ctx.toolName);
      }
    } finally {
      // Only after the probe's outcome reached opossum, so no second probe slips in meanwhile.
      if (probe) this.#endProbe(ctx, verdict === 'success');
    }
  }

  /**
   * The probe ended. One that did not succeed bars its caller from the next probe while another caller
   * is about: for `resetTimeout` from now when the breaker is still half-open (a probe cancelled or
   * answered with a model mistake), or through the whole next half-open period when it reopened.
   */
  #endProbe(ctx: ToolContext, succeeded: boolean): void {
    this.#probing = false;
    this.#probeCall = undefined;
    if (succeeded) {
      this.#barred.clear();
      return;
    }
    const { resetTimeout } = this.settings;
    this.#barProber(
      ctx.caller.id,
      this.#opossum.opened ? this.#openedAt + 2 * resetTimeout : performance.now() + resetTimeout,
    );
  }

  #barProber(id: string | undefined, until: number): void {
    if (id === undefined) return;
    const now = performance.now();
    for (const [other, otherUntil] of this.#barred) if (otherUntil <= now) this.#barred.delete(other);
    if (this.#barred.size >= MAX_HOLDERS) this.#barred.delete(this.#barred.keys().next().value as string);
    this.#barred.delete(id);
    this.#barred.set(id, until);
  }

  /** The call's caller differs from the last one (by reference): its identity and its slot holder. */
  #noteCaller(caller: CallerIdentity): void {
    const id = caller.id;
    if (id !== this.#seenId) {
      this.#otherId = this.#seenId;
      this.#otherAt = this.#seenAt;
      this.#seenId = id;
    }
    let holder = this.#holders.get(id);
    if (holder === undefined) {
      if (this.#holders.size >= MAX_HOLDERS) this.#dropIdleHolders();
      holder = { id, held: 0, local: caller.kind === 'local' };
      this.#holders.set(id, holder);
    }
    this.#lastCaller = caller;
    this.#lastHolder = holder;
  }

  /** Whether a caller other than the current call's has called within the rolling window. */
  #othersAbout(): boolean {
    return this.#otherId !== undefined && this.#rotations - this.#otherAt < this.settings.rollingCountBuckets;
  }

  /** Forgets the callers that hold no slot (but the last one, whose holder is kept by reference). */
  #dropIdleHolders(): void {
    for (const [id, holder] of this.#holders) {
      if (holder.held === 0 && holder !== this.#lastHolder) this.#holders.delete(id);
    }
  }

  state(): CircuitState {
    const breaker = this.#opossum;
    return breaker.closed ? 'closed' : breaker.halfOpen ? 'half-open' : 'open';
  }

  stats(): BreakerStats {
    const window = this.#opossum.stats;
    const state = this.state();
    return {
      name: this.name,
      state,
      tools: [...this.tools],
      inFlight: this.#inFlight,
      retryAfterMs: state === 'open' ? this.#retryAfterMs() : undefined,
      callers: this.#callers?.counts(performance.now()) ?? { tracked: 0, refused: 0 },
      window: {
        calls: window.fires,
        successes: window.successes,
        failures: window.failures,
        errorPercentage: window.fires === 0 ? 0 : (window.failures / window.fires) * 100,
      },
      totals: { ...this.#totals },
    };
  }

  shutdown(): void {
    if (this.#shut) return;
    this.#shut = true;
    clearInterval(this.#rotateTimer);
    this.#throttle.flush();
    this.#opossum.shutdown();
  }

  /**
   * Counts a success of a closed breaker into opossum's window without `fire`, by adding to the
   * same two counters of its current bucket that fire's 'fire' and 'success' events add to (fire would
   * add a Promise, a semaphore turn and a closure per call, and a closed breaker's success changes no
   * state). Not through those events either: opossum's 'success' listener also pushes each call's
   * latency onto the bucket's `latencyTimes`, even with rolling percentiles off, so at thousands of
   * calls a second every bucket carried an array of tens of thousands of numbers that each scavenge
   * copied (the breaker's GC time per call was larger than all its own code). False when this path does
   * not apply.
   */
  #countSuccess(generation: number): boolean {
    const breaker = this.#opossum;
    if (generation !== this.#generation || this.#shut || !breaker.closed) return false;
    this.#totals.successes += 1;
    this.#consecutive = 0;
    // `status.window` is a copy of the bucket list, so it is read once per bucket, not per call.
    let bucket = this.#bucket;
    if (bucket === undefined) {
      bucket = breaker.status.window[0] as unknown as WindowBucket;
      this.#bucket = bucket;
    }
    bucket.fires += 1;
    bucket.successes += 1;
    return true;
  }

  /** Replays a counted outcome into opossum, unless the breaker changed state since the call began. */
  async #record(ctx: ToolContext, generation: number, verdict: Verdict, probe: boolean): Promise<void> {
    if (verdict === 'ignored') {
      this.#totals.ignored += 1;
      return;
    }
    if (generation !== this.#generation || this.#shut) {
      // Started before the last state change: it says nothing about the dependency as it is now, and
      // only the probe may close a half-open breaker.
      this.#totals.stale += 1;
      return;
    }
    const failed = verdict === 'failure';
    // Failures of a closed breaker and of the probe are weighed per caller (isolateCallers), and noted
    // at once: failures that land together (one tick, each waiting for opossum below) must each find
    // the others when weighed, or the first is taken for one caller's alone and the rest never trip it.
    const callers = failed && (probe || this.#opossum.closed) ? this.#callers : undefined;
    if (callers !== undefined && !callers.noteFailure(ctx, generation, performance.now())) {
      // A call of a caller refused while it ran: its failure stays out of the window and the streak.
      this.#totals.failures += 1;
      return;
    }
    if (failed) {
      this.#totals.failures += 1;
      this.#consecutive += 1;
    } else {
      this.#totals.successes += 1;
      this.#consecutive = 0;
      this.#callers?.noteSuccess(ctx);
    }
    if (probe && callers !== undefined) {
      // A failed probe would reopen the breaker for everyone. Weighed like any failure that would open
      // it: when another caller succeeded within the window (or this caller's failures are already
      // weighed as its own), it is this caller's, who alone is refused; the breaker stays half-open and
      // the next call is the probe.
      const route = callers.weighFailure(
        ctx,
        generation,
        performance.now(),
        this.settings.resetTimeout,
        true,
      );
      if (route.to === 'open-caller') this.#openCaller(ctx, route, true);
      if (route.to !== 'shared') return;
    }
    const replayed = this.#opossum.fire({ ctx, failed });
    // A success of a closed breaker changes nothing and cannot reject; a failure may open the breaker
    // and a probe may close it: wait for those, so the state change lands in this call's decisions.
    if (failed || probe) await replayed.then(ignore, ignore);
    if (!failed || generation !== this.#generation || !this.#opossum.closed || this.#shut) return;
    // Both rules are checked here rather than in opossum (whose volume threshold is set out of reach),
    // so that a failure that would open the breaker can be weighed per caller first. The failure has
    // landed in the window by now, and so has every one replayed before it.
    const { consecutiveFailures: streak, volumeThreshold, errorThresholdPercentage } = this.settings;
    const window = this.#opossum.stats;
    const byRate =
      window.fires >= volumeThreshold && (window.failures / window.fires) * 100 > errorThresholdPercentage;
    const byStreak = streak !== false && this.#consecutive >= streak;
    if (callers !== undefined) {
      const now = performance.now();
      const route = callers.weighFailure(
        ctx,
        generation,
        now,
        this.settings.resetTimeout,
        byRate || byStreak,
      );
      if (route.to === 'refused-caller') {
        // Refused while this failure was on its way: it leaves the window again.
        this.#forget(1);
        return;
      }
      if (route.to === 'open-caller') {
        this.#forget(route.failures);
        this.#consecutive = 0;
        this.#openCaller(ctx, route);
        return;
      }
    }
    if (!byRate && !byStreak) return;
    // opossum's open() runs the same open → half-open machine and events.
    this.#reporting = { ctx, failed: true };
    this.#trippedBy = byRate ? undefined : `${this.#consecutive} failures in a row`;
    this.#opossum.open();
  }

  /** Takes `failures` counted failures (a refused caller's) back out of the window, newest bucket first. */
  #forget(failures: number): void {
    let left = failures;
    for (const bucket of this.#opossum.status.window as unknown as WindowBucket[]) {
      if (left <= 0) return;
      const taken = Math.min(left, bucket.failures);
      bucket.failures -= taken;
      bucket.fires -= taken;
      left -= taken;
    }
  }

  /** One caller alone is refused from now: the decision, a throttled log line (its tag only) and the event. */
  #openCaller(ctx: ToolContext, route: Extract<FailureRoute, { to: 'open-caller' }>, probe = false): void {
    this.#totals.callerOpens += 1;
    const { tag, again, othersSucceeded } = route;
    const resetTimeoutMs = this.settings.resetTimeout;
    const reason = again
      ? "the caller's calls failed again after its reset period"
      : !othersSucceeded
        ? probe
          ? "the probe call failed, and no other caller failed within the window: the failure is this caller's"
          : "the failures that would open the breaker are one caller's; no other caller failed within the window"
        : probe
          ? "the probe call failed, but other callers succeeded within the window: the failure is this caller's"
          : "the failures that would open the breaker are one caller's, while other callers succeed";
    this.#decide(ctx, 'open-caller', reason, { caller: tag, retryAfterMs: resetTimeoutMs });
    // A flood of callers each refused in turn would otherwise write a line apiece.
    this.#throttle('open-caller', (suppressed) =>
      this.#logger.warn(
        {
          breaker: this.name,
          tools: [...this.tools],
          caller: tag,
          reason,
          resetTimeoutMs,
          ...(suppressed > 0 ? { suppressed } : {}),
        },
        suppressed > 0
          ? `circuit breaker refused one caller (${suppressed} more times since the last line)`
          : "circuit breaker refused one caller: its calls fail, other callers' do not",
      ),
    );
    this.#emit('open-caller', ctx.toolName, tag);
  }

  #refuseCaller(ctx: ToolContext, retryAfterMs: number): ToolResult {
    this.#totals.callerShortCircuits += 1;
    const caller = identityTag(ctx.caller);
    this.#decide(
      ctx,
      'short-circuit',
      "this caller is refused on its own: its calls failed, other callers' did not",
      {
        state: 'open-caller',
        caller,
        retryAfterMs,
      },
    );
    this.#emit('short-circuit', ctx.toolName, caller);
    return openAnswer(ctx.toolName, retryAfterMs);
  }

  // One log line per state change, never one per call. Only the flapping of a dependency that stays
  // down (open → half-open → open each reset period) is throttled, with counts.
  #transition(transition: Transition): void {
    const from = this.#lastTransition;
    this.#lastTransition = transition;
    this.#generation += 1;
    this.#consecutive = 0;
    const ctx = transition === 'half-open' ? undefined : this.#reporting?.ctx;
    this.#reporting = undefined;
    const trippedBy = this.#trippedBy;
    this.#trippedBy = undefined;
    const fields: Record<string, unknown> = { breaker: this.name, tools: [...this.tools], state: transition };
    if (transition === 'open') {
      this.#openedAt = performance.now();
      this.#totals.opened += 1;
      const window = this.#opossum.stats;
      const reason =
        from === 'half-open'
          ? 'the probe call failed'
          : (trippedBy ?? `${window.failures} of ${window.fires} calls failed in the window`);
      fields.reason = reason;
      fields.resetTimeoutMs = this.settings.resetTimeout;
      if (from === 'half-open') {
        this.#throttle('reopen', (suppressed) =>
          this.#logger.warn(
            { ...fields, ...(suppressed > 0 ? { suppressed } : {}) },
            suppressed > 0
              ? `circuit breaker reopened: probe calls keep failing (${suppressed} more times since the last line)`
              : 'circuit breaker reopened: the probe call failed',
          ),
        );
      } else {
        this.#outageStartedAt = this.#openedAt;
        this.#outageShortCircuits = 0;
        fields.calls = window.fires;
        fields.failures = window.failures;
        this.#logger.warn(fields, 'circuit breaker opened');
      }
      if (ctx) this.#decide(ctx, 'open', reason);
    } else if (transition === 'close') {
      this.#totals.closed += 1;
      // Start the closed breaker with an empty window (as Hystrix does): the failures that opened it
      // would otherwise reopen it at the first new failure.
      this.#emptying = true;
      for (let bucket = 0; bucket < this.settings.rollingCountBuckets; bucket += 1)
        this.#rotator.emit('rotate');
      this.#emptying = false;
      this.#throttle.flush();
      fields.openMs = Math.round(performance.now() - this.#outageStartedAt);
      fields.shortCircuits = this.#outageShortCircuits;
      this.#logger.info(fields, 'circuit breaker closed');
      if (ctx) this.#decide(ctx, 'close', 'the probe call succeeded');
    } else {
      this.#throttle('half-open', (suppressed) =>
        this.#logger.info(
          { ...fields, ...(suppressed > 0 ? { suppressed } : {}) },
          'circuit breaker half-open: the next call is a probe',
        ),
      );
    }
    this.#emit(transition, ctx?.toolName);
  }

  /**
   * `noSlot`: half-open, but the probe finds every slot taken (see `run`). `barredMs`: half-open, but
   * this caller's own last probe did not succeed and the next one is left to other callers for so long.
   */
  #shortCircuit(ctx: ToolContext, noSlot = false, barredMs?: number): ToolResult {
    const open = this.#opossum.opened;
    const retryAfterMs = open
      ? this.#retryAfterMs()
      : noSlot
        ? this.settings.resetTimeout
        : (barredMs ?? this.#probeWaitMs());
    this.#totals.shortCircuits += 1;
    this.#outageShortCircuits += 1;
    const reason = open
      ? 'breaker open'
      : noSlot
        ? 'half-open: every slot is held by a call still running'
        : barredMs !== undefined
          ? "half-open: this caller's last probe did not succeed; the next probe is left to other callers"
          : 'half-open: a probe call is in flight';
    this.#decide(ctx, 'short-circuit', reason, { state: open ? 'open' : 'half-open', retryAfterMs });
    this.#emit('short-circuit', ctx.toolName);
    return open || noSlot
      ? openAnswer(ctx.toolName, retryAfterMs)
      : probingAnswer(ctx.toolName, retryAfterMs);
  }

  /** `share`: the caller holds its whole share of the capacity while other callers are about. */
  #rejectCapacity(ctx: ToolContext, share = false): ToolResult {
    this.#totals.capacityRejections += 1;
    // A slot frees when a call ends, at the latest when the oldest one hits its deadline.
    const untilDeadline = this.#deadlines?.untilOldestMs();
    const retryAfterMs = Math.max(
      1,
      Math.min(CAPACITY_RETRY_AFTER_MS, untilDeadline ?? CAPACITY_RETRY_AFTER_MS),
    );
    const { capacity } = this.settings;
    if (share) {
      const slots = this.#callerSlots;
      const caller = identityTag(ctx.caller);
      this.#decide(
        ctx,
        'reject-capacity',
        `this caller already has ${slots} calls in flight, its share of ${capacity} while other callers are about`,
        { capacity, callerCapacity: slots, caller, retryAfterMs },
      );
      this.#emit('reject-capacity', ctx.toolName, caller);
      return callerCapacityAnswer(ctx.toolName, slots, retryAfterMs);
    }
    this.#decide(ctx, 'reject-capacity', `${capacity} calls already in flight`, {
      capacity,
      retryAfterMs,
    });
    this.#emit('reject-capacity', ctx.toolName);
    return capacityAnswer(ctx.toolName, capacity, retryAfterMs);
  }

  /** Time until the reset timer lets a probe through. */
  #retryAfterMs(): number {
    return Math.max(1, Math.ceil(this.#openedAt + this.settings.resetTimeout - performance.now()));
  }

  /**
   * Until the probe in flight ends (its deadline) or no longer holds half-open (resetTimeout after it
   * began), whichever comes first; one such period for the probe's own caller once it overran.
   */
  #probeWaitMs(): number {
    const { timeout, resetTimeout } = this.settings;
    const wait = timeout === false ? resetTimeout : Math.min(timeout, resetTimeout);
    const left = this.#probeStartedAt + wait - performance.now();
    return left >= 1 ? Math.ceil(left) : wait;
  }

  #decide(ctx: ToolContext, action: string, reason: string, detail: Record<string, unknown> = {}): void {
    ctx.decisions.push({ by: BY, action, reason, detail: { breaker: this.name, ...detail } });
  }

  #emit(type: CircuitEventType, toolName: string | undefined, caller?: string): void {
    const event: CircuitEvent = { type, breaker: this.name, state: this.state(), toolName, at: Date.now() };
    if (caller !== undefined) event.caller = caller;
    this.#events.emit(event, this.#logger);
  }
}
