import {
  createLogThrottle,
  type Logger,
  type LogThrottle,
  type ToolContext,
  withDeadline,
} from '@toolgate/core';
import type { OnStoreFailure, RepeatStore } from './types.js';

/** Thrown by a fail-closed guard when the store cannot answer; the middleware turns it into `unavailable`. */
export class StoreUnavailable extends Error {}

/**
 * Every store operation of one guard: bounded by `timeoutMs` and by the call's own abort, so a store
 * that drops packets (a partitioned Redis) costs each call at most the time limit instead of hanging
 * it. A failing store is one incident, logged once when it starts (throttled, should it flap) and once
 * when it ends, with the count of operations that failed meanwhile: never one line per call.
 */
export class StoreAccess {
  readonly #store: RepeatStore;
  readonly #timeoutMs: number;
  readonly #onFailure: OnStoreFailure;
  readonly #throttle: LogThrottle = createLogThrottle({ intervalMs: 60_000 });
  #incident: { since: number; failures: number; logger: Logger } | undefined;

  constructor(store: RepeatStore, timeoutMs: number, onFailure: OnStoreFailure) {
    this.#store = store;
    this.#timeoutMs = timeoutMs;
    this.#onFailure = onFailure;
  }

  /**
   * The value under `key`, or undefined when absent. On a store failure: undefined when the guard
   * fails open (the call runs unguarded), a `StoreUnavailable` throw when it fails closed. Rejects
   * with the call's abort reason when the call is cancelled meanwhile.
   */
  async read(key: string, ctx: ToolContext): Promise<string | undefined> {
    try {
      return (await this.#bounded(() => this.#store.get(key), ctx.signal)) ?? undefined;
    } catch (error) {
      if (ctx.signal.aborted) throw ctx.signal.reason;
      this.#failed(error, ctx, 'get');
      if (this.#onFailure === 'closed') throw new StoreUnavailable('repeat-guard store unavailable');
      return undefined;
    }
  }

  /** Stores (or, for undefined, forgets) `key`. A failure is counted and otherwise ignored: the call already ran. */
  async write(key: string, value: string | undefined, ttlMs: number, ctx: ToolContext): Promise<void> {
    try {
      await this.#bounded(
        () =>
          value === undefined
            ? this.#store.delete(key)
            : this.#store.set(key, value, Math.max(1, Math.ceil(ttlMs))),
        ctx.signal,
      );
    } catch (error) {
      if (ctx.signal.aborted) return;
      this.#failed(error, ctx, value === undefined ? 'delete' : 'set');
    }
  }

  /** Writes the pending counts (call when the server closes). */
  flush(): void {
    this.#throttle.flush();
  }

  async #bounded<T>(operation: () => Promise<T> | T, signal: AbortSignal): Promise<T> {
    if (signal.aborted) throw signal.reason;
    const pending = operation();
    // A synchronous store (memory) has answered already: no timer and no signal per operation.
    const value = isPromiseLike(pending)
      ? // Core's deadline helper: rejects at the time limit or the call's abort even if the store hangs.
        await withDeadline(() => Promise.resolve(pending), { signal, timeoutMs: this.#timeoutMs })
      : pending;
    this.#recovered();
    return value;
  }

  #failed(error: unknown, ctx: ToolContext, operation: string): void {
    if (this.#incident === undefined) {
      this.#incident = { since: Date.now(), failures: 0, logger: ctx.logger };
      const outcome = this.#onFailure === 'open' ? 'calls run unguarded' : 'calls are answered unavailable';
      this.#throttle('store-down', (suppressed) =>
        ctx.logger.warn(
          {
            tool: ctx.toolName,
            operation,
            err: error,
            ...(suppressed > 0 ? { incidents: suppressed + 1 } : {}),
          },
          suppressed > 0
            ? `repeat-guard: the store failed again (${suppressed} more incidents since the last line); ${outcome} until it answers`
            : `repeat-guard: the store failed; ${outcome} until it answers`,
        ),
      );
    }
    this.#incident.failures += 1;
  }

  #recovered(): void {
    const incident = this.#incident;
    if (incident === undefined) return;
    this.#incident = undefined;
    incident.logger.info(
      { failures: incident.failures, downMs: Date.now() - incident.since },
      `repeat-guard: the store answers again after ${incident.failures} failed operations`,
    );
  }
}

function isPromiseLike<T>(value: Promise<T> | T): value is Promise<T> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}
