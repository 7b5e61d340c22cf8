import { createLogThrottle, type Logger, type LogThrottle } from '@toolgate/core';
import type { CircuitEvent, CircuitEventListener, CircuitEventType } from './types.js';

/** Listeners per event type. A listener that throws is logged and cannot break the call that emitted. */
export class CircuitEvents {
  readonly #listeners = new Map<CircuitEventType, Set<CircuitEventListener>>();
  /** A listener that throws on every short-circuit would write a line per call through an outage. */
  #throttle: LogThrottle | undefined;

  on(type: CircuitEventType, listener: CircuitEventListener): () => void {
    if (typeof listener !== 'function')
      throw new TypeError('circuit breakers: a listener must be a function');
    let set = this.#listeners.get(type);
    if (!set) {
      set = new Set();
      this.#listeners.set(type, set);
    }
    // A wrapper per subscription, so subscribing one function twice gives two independent handles.
    const entry: CircuitEventListener = (event) => listener(event);
    set.add(entry);
    return () => {
      set.delete(entry);
    };
  }

  emit(event: CircuitEvent, logger: Logger): void {
    const set = this.#listeners.get(event.type);
    if (!set || set.size === 0) return;
    for (const listener of set) {
      try {
        listener(event);
      } catch (error) {
        this.#throttle ??= createLogThrottle();
        this.#throttle(`${event.type}:${event.breaker}`, (suppressed) =>
          logger.error(
            { err: error, event: event.type, breaker: event.breaker, ...(suppressed > 0 && { suppressed }) },
            'circuit breaker listener threw',
          ),
        );
      }
    }
  }

  clear(): void {
    this.#listeners.clear();
    this.#throttle?.flush();
  }
}
