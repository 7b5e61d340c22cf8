/**
 * Settles with `promise`, or rejects with the signal's reason as soon as `signal` aborts (the work itself
 * is not stopped: pass the signal to it too where it can follow). The listener is removed either way.
 */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** A signal that aborts when `signal` does or after `timeoutMs` (a `TimeoutError` DOMException). */
export function deadlineSignal(signal: AbortSignal | undefined, timeoutMs: number): AbortSignal {
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new RangeError(`deadlineSignal: timeoutMs must be a positive number, got ${timeoutMs}`);
  }
  const timeout = AbortSignal.timeout(timeoutMs);
  return signal === undefined ? timeout : AbortSignal.any([signal, timeout]);
}

/**
 * Runs `work` with a signal that follows `signal` and a time limit, and rejects at once when either
 * fires, even if `work` ignores its signal. The one abort/deadline helper every store and dependency
 * call uses.
 */
export function withDeadline<T>(
  work: (signal: AbortSignal) => Promise<T>,
  options: { signal?: AbortSignal | undefined; timeoutMs: number },
): Promise<T> {
  const signal = deadlineSignal(options.signal, options.timeoutMs);
  let started: Promise<T>;
  try {
    started = Promise.resolve(work(signal));
  } catch (error) {
    return Promise.reject(error);
  }
  return raceAbort(started, signal);
}

/** True for the errors an abort or a deadline produce (`AbortError`, `TimeoutError`). */
export function isAbortError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const name = (error as { name?: unknown }).name;
  return name === 'AbortError' || name === 'TimeoutError';
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}
