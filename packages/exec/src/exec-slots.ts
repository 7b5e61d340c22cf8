import { availableParallelism } from 'node:os';
import { ToolError } from '@toolgate/core';

/** Options of `createExecSlots`. */
export interface ExecSlotsOptions {
  /** Programs (each with its process group) that may run at once. @default 2 × os.availableParallelism() */
  maxConcurrent?: number;
  /** Calls that may wait for a slot, first come first served; past it a call is refused at once. @default 4 × maxConcurrent */
  maxQueued?: number;
}

/**
 * A bound on the programs running at once, shared by every tool (and `safeExec` call) given it. A slot
 * is taken before the spawn and given back once the program's process group is gone.
 */
export interface ExecSlots {
  readonly maxConcurrent: number;
  readonly maxQueued: number;
  /** Programs running now. */
  readonly running: number;
  /** Calls waiting for a slot now. */
  readonly waiting: number;
}

interface Waiter {
  grant: () => void;
  refuse: (error: unknown) => void;
}

/** The pool behind an `ExecSlots`; its methods are this package's own (not exported from the index). */
export class SlotPool implements ExecSlots {
  readonly maxConcurrent: number;
  readonly maxQueued: number;
  #running = 0;
  readonly #queue: Waiter[] = [];

  constructor(maxConcurrent: number, maxQueued: number) {
    this.maxConcurrent = maxConcurrent;
    this.maxQueued = maxQueued;
  }

  get running(): number {
    return this.#running;
  }

  get waiting(): number {
    return this.#queue.length;
  }

  /**
   * Takes a slot: true when one was free (no promise, no timer: the success path's one check), else a
   * promise that settles when the slot is handed over, or rejects with `rate_limited` (queue full, or
   * no slot within `waitMs`) or `timeout` (the caller aborted while waiting).
   */
  take(signal: AbortSignal | undefined, waitMs: number): true | Promise<void> {
    if (this.#running < this.maxConcurrent && this.#queue.length === 0) {
      this.#running += 1;
      return true;
    }
    if (this.#queue.length >= this.maxQueued) {
      return Promise.reject(
        busy(
          `Too many programs are running (${this.maxConcurrent} at once, ${this.maxQueued} waiting); the call was not started.`,
          waitMs,
        ),
      );
    }
    if (signal?.aborted) return Promise.reject(cancelledWhileWaiting());
    return new Promise<void>((resolve, reject) => {
      const leave = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const index = this.#queue.indexOf(waiter);
        if (index !== -1) this.#queue.splice(index, 1);
      };
      const waiter: Waiter = {
        grant: () => {
          leave();
          resolve();
        },
        refuse: (error) => {
          leave();
          reject(error);
        },
      };
      const onAbort = (): void => waiter.refuse(cancelledWhileWaiting());
      const timer = setTimeout(
        () =>
          waiter.refuse(
            busy(`No program slot came free within ${waitMs} ms; the call was not started.`, waitMs),
          ),
        waitMs,
      );
      timer.unref();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#queue.push(waiter);
    });
  }

  /** Gives a slot back: straight to the first waiter (FIFO, no barging), or to the pool. */
  release(): void {
    const next = this.#queue[0];
    if (next === undefined) {
      this.#running -= 1;
      return;
    }
    next.grant();
  }
}

/**
 * A pool of program slots to share between tools: `execTool({ ..., slots })`, `safeExec(..., { slots })`.
 * Tools given none share the process's default pool (`maxConcurrent` = 2 × the CPUs, `maxQueued` =
 * 4 × that). A call that finds every slot taken waits, first come first served, at most its tool's
 * `timeoutMs` or until its caller aborts; a call that finds the queue full, or waits in vain, is answered
 * `rate_limited` with `retryAfterMs` (never `unavailable`, which a breaker would count for every caller).
 */
export function createExecSlots(options: ExecSlotsOptions = {}): ExecSlots {
  const maxConcurrent = options.maxConcurrent ?? 2 * availableParallelism();
  if (!Number.isSafeInteger(maxConcurrent) || maxConcurrent < 1) {
    throw new TypeError(
      `exec: maxConcurrent must be a positive integer, got ${String(options.maxConcurrent)}`,
    );
  }
  const maxQueued = options.maxQueued ?? 4 * maxConcurrent;
  if (!Number.isSafeInteger(maxQueued) || maxQueued < 0) {
    throw new TypeError(`exec: maxQueued must be a non-negative integer, got ${String(options.maxQueued)}`);
  }
  return new SlotPool(maxConcurrent, maxQueued);
}

let defaultSlots: SlotPool | undefined;

/** The pool behind `slots`, checked: the process's default pool when none was given. */
export function slotPoolOf(slots: ExecSlots | undefined): SlotPool {
  if (slots === undefined) {
    defaultSlots ??= createExecSlots() as SlotPool;
    return defaultSlots;
  }
  if (!(slots instanceof SlotPool)) {
    throw new TypeError('exec: slots must come from createExecSlots()');
  }
  return slots;
}

const BUSY_HINT =
  'Too many programs are running at once. Wait for retryAfterMs, then call again; send such calls one after another, not all at once.';

function busy(message: string, retryAfterMs: number): ToolError {
  return new ToolError('rate_limited', message, { hint: BUSY_HINT, retryAfterMs, retryable: true });
}

function cancelledWhileWaiting(): ToolError {
  return new ToolError('timeout', 'The call was cancelled before the program started.');
}
