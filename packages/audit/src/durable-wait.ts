/** What a durable call's wait comes to when its record was neither stored nor given up within the bound. */
export const LATE = Symbol('late');

/** The longest delay setTimeout takes; a later deadline is reached by re-arming. */
const MAX_TIMER_MS = 2_147_483_647;

interface Waiting {
  readonly due: number;
  readonly resolve: (outcome: boolean | typeof LATE) => void;
}

/**
 * Bounds how long durable calls wait for their records (`durableWaitMs`). One timer serves every
 * waiting call: all wait the same bound, so the call that began waiting first is due first (a Set
 * keeps that order, and a call whose record settles leaves it in O(1)). The timer is armed for the
 * oldest call; when it fires it answers the calls that are due and re-arms for the next one, or stays
 * unarmed while none waits. A call costs a promise, a Set entry and a clock read, no timer of its own.
 * The timer is unref'd: like the writer's retry timers, it does not keep the process alive.
 */
export class DurableWaits {
  readonly #boundMs: number;
  readonly #waiting = new Set<Waiting>();
  #timer: NodeJS.Timeout | undefined;

  constructor(boundMs: number) {
    this.#boundMs = boundMs;
  }

  /**
   * `stored`, or LATE once the bound passes first. The record stays where it is (queued, or in the
   * write being retried): only the call stops waiting for it.
   */
  wait(stored: Promise<boolean>): Promise<boolean | typeof LATE> {
    return new Promise((resolve) => {
      const waiting: Waiting = { due: Date.now() + this.#boundMs, resolve };
      this.#waiting.add(waiting);
      if (this.#timer === undefined) this.#arm(this.#boundMs);
      void stored.then((outcome) => {
        if (this.#waiting.delete(waiting)) resolve(outcome);
      });
    });
  }

  #arm(delayMs: number): void {
    this.#timer = setTimeout(this.#expire, Math.min(Math.max(1, delayMs), MAX_TIMER_MS));
    this.#timer.unref();
  }

  readonly #expire = (): void => {
    this.#timer = undefined;
    const now = Date.now();
    // Deleting the entry being visited is safe in a Set's iteration.
    for (const waiting of this.#waiting) {
      if (waiting.due > now) {
        this.#arm(waiting.due - now);
        return;
      }
      this.#waiting.delete(waiting);
      waiting.resolve(LATE);
    }
  };
}
