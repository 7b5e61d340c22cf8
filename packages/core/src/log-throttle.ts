import { runDetached } from './detached.js';

/** Options of `createLogThrottle`. */
export interface LogThrottleOptions {
  /** How long after a key's logged line further occurrences are only counted, in ms. @default 60000 */
  intervalMs?: number;
}

/**
 * Logs one occurrence of `key`. `log(suppressed)` writes the line: it runs at once for the first
 * occurrence of a key in an interval (`suppressed` is 0), and once at the end of an interval in which
 * later occurrences were held back (with their count, through the last occurrence's `log`).
 */
export type LogThrottle = ((key: string, log: (suppressed: number) => void) => void) & {
  /** Writes the pending summaries now and forgets every key (call it when the server closes). */
  flush(): void;
};

interface Window {
  suppressed: number;
  log: (suppressed: number) => void;
  timer: NodeJS.Timeout;
}

/**
 * Rate-limited logging with counts: during an outage one failure per call would otherwise write one
 * line per call (thousands a second, each with a stack), burying the first line that says what broke.
 * A key is what makes two lines "the same" (e.g. `breaker:orders-db:open`, `store-read`).
 */
export function createLogThrottle(options: LogThrottleOptions = {}): LogThrottle {
  const intervalMs = options.intervalMs ?? 60_000;
  if (!(Number.isFinite(intervalMs) && intervalMs >= 1)) {
    throw new RangeError('createLogThrottle: intervalMs must be a finite number of at least 1');
  }
  const windows = new Map<string, Window>();

  // Guarded: a logger that throws must not break the call that logged.
  const write = (log: (suppressed: number) => void, suppressed: number): void => {
    try {
      log(suppressed);
    } catch {
      // nothing sensible to do: the logger itself is broken
    }
  };

  const open = (key: string, log: (suppressed: number) => void): Window => {
    // The summary is due later, for every call the window counted: not in the first one's context.
    const timer = runDetached(() => setTimeout(() => close(key), intervalMs));
    const window: Window = { suppressed: 0, log, timer };
    // A pending summary never holds the process open.
    window.timer.unref();
    windows.set(key, window);
    return window;
  };

  const close = (key: string): void => {
    const window = windows.get(key);
    if (window === undefined) return;
    windows.delete(key);
    if (window.suppressed === 0) return;
    write(window.log, window.suppressed);
    // The summary is a line too: keep counting for another interval, so a steady flood writes one
    // line per interval and not two.
    open(key, window.log);
  };

  const throttle = ((key: string, log: (suppressed: number) => void): void => {
    const window = windows.get(key);
    if (window !== undefined) {
      window.suppressed += 1;
      window.log = log;
      return;
    }
    open(key, log);
    write(log, 0);
  }) as LogThrottle;

  throttle.flush = (): void => {
    for (const [key, window] of [...windows]) {
      clearTimeout(window.timer);
      windows.delete(key);
      if (window.suppressed > 0) write(window.log, window.suppressed);
    }
  };
  return throttle;
}
