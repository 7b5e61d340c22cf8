import { isStoreFullError, type KeyValueStore } from './key-value-store.js';
import { createLogThrottle } from './log-throttle.js';
import type { Logger } from './types.js';

/** A store whose every operation is time-limited, follows a signal and logs failures once per incident. */
export interface BoundedStore {
  setIfAbsent(key: string, value: string, ttlMs: number, signal?: AbortSignal): Promise<boolean>;
  set(key: string, value: string, ttlMs: number, signal?: AbortSignal): Promise<void>;
  get(key: string, signal?: AbortSignal): Promise<string | undefined>;
  delete(key: string, signal?: AbortSignal): Promise<boolean>;
  /** The store's `deleteIfEquals`, present only when the store has it. */
  deleteIfEquals?(key: string, expected: string, signal?: AbortSignal): Promise<boolean>;
  /** Logs a failed operation (throttled: one line per incident, then a count), a `StoreFullError` as a full store. */
  failed(operation: string, error: unknown, logger: Logger, outcome: string): void;
  flush(): void;
}

/**
 * Wraps a policy's store: each operation fails with a `TimeoutError` DOMException after `timeoutMs`, or
 * with the signal's reason when it aborts (the store gets the signal too); `name` prefixes messages.
 */
export function boundStore(store: KeyValueStore, timeoutMs: number, name: string): BoundedStore {
  const throttle = createLogThrottle({ intervalMs: 60_000 });
  // One timer and one listener per operation: core's withDeadline builds AbortSignal.timeout + any per
  // call, which measured ~100 µs per operation on Node 20 (bench/); the store gets the call's own signal.
  const run = <T>(
    signal: AbortSignal | undefined,
    work: (signal: AbortSignal | undefined) => Promise<T>,
  ): Promise<T> => {
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        reject(new DOMException(`${name}: the store did not answer within ${timeoutMs} ms`, 'TimeoutError'));
      }, timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      const settle = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      let pending: Promise<T>;
      try {
        pending = work(signal);
      } catch (error) {
        pending = Promise.reject(error);
      }
      pending.then(
        (value) => {
          settle();
          resolve(value);
        },
        (error: unknown) => {
          settle();
          reject(error);
        },
      );
    });
  };
  return {
    setIfAbsent: (key, value, ttlMs, signal) =>
      run(signal, (s) => store.setIfAbsent(key, value, ttlMs, s && { signal: s })),
    set: (key, value, ttlMs, signal) => run(signal, (s) => store.set(key, value, ttlMs, s && { signal: s })),
    get: (key, signal) => run(signal, (s) => store.get(key, s && { signal: s })),
    delete: (key, signal) => run(signal, (s) => store.delete(key, s && { signal: s })),
    ...(store.deleteIfEquals
      ? {
          deleteIfEquals: (key: string, expected: string, signal?: AbortSignal) =>
            run(signal, (s) => store.deleteIfEquals!(key, expected, s && { signal: s })),
        }
      : {}),
    failed(operation, error, logger, outcome) {
      // A full store is a flood, not an outage: lines of its own (per limit), so that neither holds
      // back the other's first line.
      const limit = isStoreFullError(error) ? (error.reason === 'scope' ? 'per scope' : 'in total') : '';
      const where = limit === '' ? operation : `${operation}, ${limit}`;
      const [is, was] = limit === '' ? ['failed', 'failed'] : ['is full', 'was full'];
      throttle(`${name}:store:${where}`, (suppressed) =>
        logger.warn(
          { operation, err: error, ...(suppressed > 0 ? { repeated: suppressed } : {}) },
          suppressed > 0
            ? `${name}: the store ${was} ${suppressed} more times (${where}); ${outcome}`
            : `${name}: the store ${is} (${where}); ${outcome}`,
        ),
      );
    },
    flush: () => throttle.flush(),
  };
}
