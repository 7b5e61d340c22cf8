/**
 * Settles with `promise`, or rejects with the signal's reason as soon as `signal` aborts (the work itself
 * is not stopped: pass the signal to it too where it can follow). The listener is removed either way,
 * and a rejection of `promise` after the abort is handled (never an unhandled rejection).
 */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(abortReason(signal));
  }
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

/** A deadline's signal, and `release()` for when the work it bounds is done. */
export interface Deadline {
  /** Aborts when the caller's signal does or after the time limit (a `TimeoutError` DOMException). */
  readonly signal: AbortSignal;
  /**
   * The work is done: the timer is cleared and the listener on the caller's signal removed at once,
   * rather than held until the time limit (a long limit under many calls holds as many timers, and a
   * long-lived caller's signal as many listeners). The signal never aborts after it. Idempotent.
   */
  release(): void;
}

/**
 * A signal that aborts when `signal` does or after `timeoutMs`, with `release()` to let go of it early.
 *
 * Built from a controller and a timer of its own, not `AbortSignal.any([signal, AbortSignal.timeout()])`:
 * on Node 20 the combined signal holds its sources weakly, so once a garbage collection ran before the
 * time limit, the timeout signal was gone and the deadline never fired (a call waited forever). The
 * timer here holds the controller until it fires or is released; it is unref'd, so it never keeps a
 * process alive.
 */
export function createDeadline(signal: AbortSignal | undefined, timeoutMs: number): Deadline {
  checkTimeout('createDeadline', timeoutMs);
  const controller = new AbortController();
  if (signal?.aborted) {
    controller.abort(abortReason(signal));
    return { signal: controller.signal, release: () => {} };
  }
  const onAbort = (): void => {
    clearTimeout(timer);
    controller.abort(abortReason(signal!));
  };
  const timer = setTimeout(() => {
    signal?.removeEventListener('abort', onAbort);
    controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
  }, timeoutMs);
  timer.unref();
  signal?.addEventListener('abort', onAbort, { once: true });
  return {
    signal: controller.signal,
    release: () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    },
  };
}

/**
 * `createDeadline(signal, timeoutMs).signal`: a signal that aborts when `signal` does or after
 * `timeoutMs`. Its timer and its listener on `signal` stay until the time limit; use `createDeadline`
 * and release it when the work is done.
 */
export function deadlineSignal(signal: AbortSignal | undefined, timeoutMs: number): AbortSignal {
  checkTimeout('deadlineSignal', timeoutMs);
  return createDeadline(signal, timeoutMs).signal;
}

/**
 * Runs `work` with a signal that follows `signal` and a time limit, and rejects at once when either
 * fires, even if `work` ignores its signal. The one abort/deadline helper every store and dependency
 * call uses. One controller, one timer and one listener per call: `AbortSignal.any`/`timeout` cost tens
 * of microseconds each on Node 20, too much for a store operation on every tool call.
 */
export function withDeadline<T>(
  work: (signal: AbortSignal) => Promise<T>,
  options: { signal?: AbortSignal | undefined; timeoutMs: number; what?: string },
): Promise<T> {
  checkTimeout('withDeadline', options.timeoutMs);
  const outer = options.signal;
  if (outer?.aborted) return Promise.reject(abortReason(outer));
  const controller = new AbortController();
  return new Promise<T>((resolve, reject) => {
    const stop = (reason: unknown): void => {
      settled = true;
      clearTimeout(timer);
      outer?.removeEventListener('abort', onAbort);
      controller.abort(reason);
      reject(reason);
    };
    const onAbort = (): void => stop(abortReason(outer!));
    let settled = false;
    // Timers run before I/O in each turn of the event loop: after a stall, a reply that has already
    // arrived would lose to its own deadline. Give I/O that one turn before refusing.
    const timer = setTimeout(() => {
      setImmediate(() => {
        if (settled) return;
        const what = options.what ?? 'the operation';
        stop(new DOMException(`${what} did not finish within ${options.timeoutMs} ms`, 'TimeoutError'));
      });
    }, options.timeoutMs);
    outer?.addEventListener('abort', onAbort, { once: true });
    let pending: Promise<T>;
    try {
      pending = Promise.resolve(work(controller.signal));
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then(
      (value) => {
        settled = true;
        clearTimeout(timer);
        outer?.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        settled = true;
        clearTimeout(timer);
        outer?.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** True for the errors an abort or a deadline produce (`AbortError`, `TimeoutError`). */
export function isAbortError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const name = (error as { name?: unknown }).name;
  return name === 'AbortError' || name === 'TimeoutError';
}

function checkTimeout(where: string, timeoutMs: number): void {
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new RangeError(`${where}: timeoutMs must be a positive number, got ${timeoutMs}`);
  }
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}
