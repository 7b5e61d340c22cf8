import {
  callNext,
  createSettleable,
  deferSignal,
  type NextFn,
  runDetached,
  type Settleable,
  type SignalSource,
  type ToolContext,
  type ToolResult,
} from '@toolgate/core';
import type { DeadlineEntry, DeadlineQueue } from './deadline-queue.js';

/** The capacity slots one caller holds in one breaker. */
export interface SlotHolder {
  held: number;
}

/** How the wait for the rest of the chain ended. */
export type Ending = 'returned' | 'threw' | 'timed-out' | 'cancelled';

/** What a GuardedCall reports to: the breaker that counts its outcome. */
export interface CallOwner {
  /** The chain's work itself settled (which may be after the wait ended): its slot is free. */
  release(call: GuardedCall): void;
  /**
   * Called once, when the wait ends: `value` is the result (`returned`) or the error (`threw`).
   * Returns the call's answer.
   */
  conclude(call: GuardedCall, ending: Ending, value: unknown): ToolResult | Promise<ToolResult>;
}

/**
 * One call run through a breaker: `next()` under the call's own deadline and abort signal. The wait
 * ends at the first of: the chain settles, the deadline passes, or the caller cancels. On the deadline
 * the handler's `ctx.signal` is aborted with a `TimeoutError`, so its work really stops (opossum's
 * timeout only stops the waiting).
 *
 * One object per call holds all of it: it is the deadline queue's entry, the listener on the
 * caller's signal (`handleEvent`) and the lazily derived signal behind `ctx.signal`, so a call
 * allocates no entry, closure or AbortController of its own on the common path.
 *
 * The listener on the caller's signal is attached only once the call outlives about a millisecond
 * (see `watchCancel`), or at once when the handler reads `ctx.signal`: on a fresh request signal,
 * adding and removing it measured over a microsecond, and most calls are over by then. A cancel that
 * lands before the listener is attached is seen when it is attached, or when the chain settles.
 *
 * With a deadline, `ctx.signal` becomes a signal that aborts when the caller's does or when the
 * deadline passes: the `AbortSignal.any([ctx.signal, deadline])` of core's contract, built on the
 * listener this call already holds on the caller's signal, and only when someone reads it.
 * Measured on Node 20, `AbortSignal.any` costs tens of microseconds a call (its weak-reference
 * bookkeeping) and a fresh signal several; most calls never read theirs.
 */
export class GuardedCall implements DeadlineEntry, SignalSource {
  readonly ctx: ToolContext;
  /** The breaker's generation when the call began; an outcome from an older one is stale. */
  readonly generation: number;
  /** The half-open breaker's probe call. */
  readonly probe: boolean;
  /** The count of slots its caller holds, which this call adds to until its work settles. */
  readonly holder: SlotHolder;
  deadline = 0;
  prev: DeadlineEntry | undefined = undefined;
  next: DeadlineEntry | undefined = undefined;
  linked = false;
  readonly #owner: CallOwner;
  readonly #outer: AbortSignal;
  readonly #deadlines: DeadlineQueue | undefined;
  /**
   * The call's answer. Core's settleable (not a plain `new Promise`): the after-call steps of the
   * middleware outside the breaker (`mapSettled`) run inside its settling, so the race costs one hop.
   */
  #answer: Settleable | undefined = undefined;
  #done = false;
  /** The listener on the caller's signal is attached. */
  #listening = false;
  /** Links in the batch waiting for `attachListeners` (a call that ends first leaves it at once). */
  watched = false;
  prevToWatch: GuardedCall | undefined = undefined;
  nextToWatch: GuardedCall | undefined = undefined;
  // The lazily derived signal (only with a deadline).
  #derived: AbortController | undefined = undefined;
  #current: AbortSignal | undefined = undefined;
  #stopped = false;
  #reason: unknown = undefined;

  constructor(
    owner: CallOwner,
    ctx: ToolContext,
    deadlines: DeadlineQueue | undefined,
    generation: number,
    probe: boolean,
    holder: SlotHolder,
  ) {
    this.#owner = owner;
    this.ctx = ctx;
    this.#outer = ctx.signal;
    this.#deadlines = deadlines;
    this.generation = generation;
    this.probe = probe;
    this.holder = holder;
  }

  /** Runs `next()` and answers with what the owner concludes. */
  run(next: NextFn): Promise<ToolResult> {
    const outer = this.#outer;
    if (outer.aborted) {
      this.#owner.release(this);
      this.#done = true;
      return Promise.resolve(this.#conclude('cancelled', undefined));
    }
    if (this.#deadlines !== undefined) {
      deferSignal(this.ctx, this);
      this.#deadlines.add(this);
    }
    watchCancel(this);
    const work = callNext(next);
    work.then(
      (result) => this.#settle('returned', result),
      (error: unknown) => this.#settle('threw', error),
    );
    // Made once the chain below has returned, so it is the last step made when the middleware outside
    // the breaker map the answer, and their steps stack onto it (core's mapSettled).
    this.#answer ??= createSettleable();
    return this.#answer.promise;
  }

  /** The caller cancelled (this object is the listener on its signal). */
  handleEvent(): void {
    this.#stop(this.#outer.reason);
    this.#finish('cancelled', undefined);
  }

  /** The deadline passed (called by the deadline queue). */
  expire(): void {
    const timeoutMs = this.#deadlines!.timeoutMs;
    this.#stop(new DOMException(`The tool call exceeded its ${timeoutMs} ms deadline`, 'TimeoutError'));
    this.#finish('timed-out', undefined);
  }

  /** Attaches the listener on the caller's signal, for a call still waiting (called by `watchCancel`). */
  listen(): void {
    if (this.#done || this.#listening) return;
    if (this.#outer.aborted) {
      this.handleEvent();
      return;
    }
    this.#listening = true;
    this.#outer.addEventListener('abort', this);
  }

  /** The signal the handler sees as `ctx.signal`, made on first read. */
  readSignal(): AbortSignal {
    if (this.#current === undefined) {
      // The derived signal follows the caller's from now on.
      this.listen();
      this.#derived = new AbortController();
      // Read after the deadline or the cancel: already aborted, with the same reason.
      if (this.#stopped) this.#derived.abort(this.#reason);
      this.#current = this.#derived.signal;
    }
    return this.#current;
  }

  writeSignal(value: AbortSignal): void {
    this.#current = value;
  }

  #settle(ending: Ending, value: unknown): void {
    this.#owner.release(this);
    // The chain settled in time: a signal nobody read inside it is the caller's again. Middleware
    // outside the breaker that reads `ctx.signal` afterwards (most check `aborted` once the chain
    // returns) then gets the caller's signal instead of forcing a new AbortController per call.
    if (this.#current === undefined && !this.#stopped) this.#current = this.#outer;
    // Cancelled before the listener was attached: answered as the listener would have.
    if (!this.#listening && this.#outer.aborted) this.handleEvent();
    else this.#finish(ending, value);
  }

  #stop(reason: unknown): void {
    this.#stopped = true;
    this.#reason = reason;
    this.#derived?.abort(reason);
  }

  #finish(ending: Ending, value: unknown): void {
    if (this.#done) return;
    this.#done = true;
    if (this.linked) this.#deadlines!.remove(this);
    if (this.watched) unwatchCancel(this);
    if (this.#listening) this.#outer.removeEventListener('abort', this);
    this.#answer ??= createSettleable();
    this.#answer.settle(this.#conclude(ending, value));
  }

  #conclude(ending: Ending, value: unknown): Promise<ToolResult> | ToolResult {
    try {
      return this.#owner.conclude(this, ending, value);
    } catch (error) {
      return Promise.reject(error);
    }
  }
}

// Calls begun in the last millisecond or so, whose listener on the caller's signal is attached by one
// shared timer if they are still waiting then. A linked list a call leaves as soon as it ends: queuing
// allocates nothing, and a run of calls that never yields to the event loop (all in microtasks) holds
// no finished call. One timer per millisecond rather than a setImmediate per turn: a server that takes
// each request in a turn of its own (HTTP, the in-process bench) made one Immediate per call.
let firstToWatch: GuardedCall | undefined;
let lastToWatch: GuardedCall | undefined;
let attachScheduled = false;

function watchCancel(call: GuardedCall): void {
  call.watched = true;
  call.prevToWatch = lastToWatch;
  if (lastToWatch === undefined) firstToWatch = call;
  else lastToWatch.nextToWatch = call;
  lastToWatch = call;
  if (!attachScheduled) {
    attachScheduled = true;
    // Outside the call that happened to arm it (the timer serves every call), and unref'd.
    runDetached(() => setTimeout(attachListeners, ATTACH_AFTER_MS).unref());
  }
}

/** How long a call waits before its listener on the caller's signal is attached, at most about. */
const ATTACH_AFTER_MS = 1;

function unwatchCancel(call: GuardedCall): void {
  call.watched = false;
  if (call.prevToWatch === undefined) firstToWatch = call.nextToWatch;
  else call.prevToWatch.nextToWatch = call.nextToWatch;
  if (call.nextToWatch === undefined) lastToWatch = call.prevToWatch;
  else call.nextToWatch.prevToWatch = call.prevToWatch;
  call.prevToWatch = undefined;
  call.nextToWatch = undefined;
}

function attachListeners(): void {
  attachScheduled = false;
  while (firstToWatch !== undefined) {
    const call = firstToWatch;
    unwatchCancel(call);
    call.listen();
  }
}
