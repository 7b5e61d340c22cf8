import type { Logger, ToolMiddleware } from '@toolgate/core';

/** The settings of one breaker. Every field is optional; unset fields fall back to the defaults. */
export interface BreakerSettings {
  /**
   * Milliseconds a call may run before it is answered `timeout` and its `ctx.signal` is aborted; it
   * counts as a dependency failure. `false` disables the deadline (`0` is refused, not "disabled").
   * @default 30000
   */
  timeout?: number | false;
  /**
   * The breaker opens after this many counted failures in a row (a success resets the count),
   * whichever trips first of this and the error-rate rule. A dead dependency fails every call, and
   * after a healthy minute the rate rule alone needs as many failures as the window holds successes
   * (measured: 28 s and thousands of calls against a dead database). `false` leaves only the rate rule.
   * @default 5
   */
  consecutiveFailures?: number | false;
  /** The breaker opens when failures exceed this percentage of counted calls in the window. @default 50 */
  errorThresholdPercentage?: number;
  /** Counted calls the window must hold before the breaker may open at all (opossum's default is 0). @default 5 */
  volumeThreshold?: number;
  /** Length of the rolling window of counted calls, in milliseconds. @default 60000 */
  rollingCountTimeout?: number;
  /** Buckets the window is divided into (it slides one bucket at a time). @default 12 */
  rollingCountBuckets?: number;
  /** Milliseconds the breaker stays open before it lets one probe call through (half-open). @default 30000 */
  resetTimeout?: number;
  /**
   * Calls allowed in flight at once; the next is answered `rate_limited` (never counted), with a hint
   * that the server is at capacity and a `retryAfterMs` until the oldest call in flight ends or hits
   * its deadline.
   * @default 32
   */
  capacity?: number;
  /**
   * The part of `capacity` one caller (core's `CallerIdentity` id) may hold, whether or not anyone else
   * is calling: `ceil(capacity × callerShare)` calls, at least 1. Its next call is answered
   * `rate_limited` (never counted); other callers are not affected. Only core's `local` caller (stdio,
   * in-process: the only caller there is) may use the whole capacity; a lone HTTP caller (or every
   * caller of an unauthenticated transport, all `anonymous`) gets its share. `1` turns it off.
   * @default 0.5
   */
  callerShare?: number;
  /**
   * When the breaker would open (or a failed probe would reopen it) but fewer than `minFailingCallers`
   * callers (core's `CallerIdentity` id, whatever values its tools bind) failed within the window, that
   * caller alone is refused (`unavailable`) for `resetTimeout`, and its failures leave the window: for a
   * caller that is not `local` whether or not anyone else called; for core's `local` caller (stdio) only
   * while another caller succeeded within the window, so a local caller alone opens it as before.
   * `false` always opens for everyone.
   * @default true
   */
  isolateCallers?: boolean;
  /**
   * Distinct callers that failed within the window (those refused on their own included) that open the
   * breaker for everyone (at least 2).
   * @default 2
   */
  minFailingCallers?: number;
}

/** Per-tool entry of `tools`: own settings, or the name of a dependency whose breaker it shares. */
export interface ToolBreakerOptions extends BreakerSettings {
  /**
   * A dependency this tool guards together with other tools (e.g. `carrier-api`); its settings come
   * from `dependencies[name]`, so none may be given here.
   * @default the tool's own name (one breaker per tool)
   */
  dependency?: string;
}

/** Options of `createCircuitBreaker`: global settings, per-tool overrides and shared dependencies. */
export interface CircuitBreakerOptions extends BreakerSettings {
  /** Per-tool settings, a shared dependency, or `false` to opt the tool out. @default {} */
  tools?: Record<string, ToolBreakerOptions | false>;
  /** Settings of the breakers shared by tools that name a dependency. @default {} */
  dependencies?: Record<string, BreakerSettings>;
  /** Where state changes are logged; never stdout. @default the calling server's `ctx.logger` */
  logger?: Logger;
}

/** A breaker's state. */
export type CircuitState = 'closed' | 'open' | 'half-open';

/** What the event API reports. */
export type CircuitEventType =
  | 'open'
  | 'half-open'
  | 'close'
  | 'short-circuit'
  | 'reject-capacity'
  | 'timeout'
  | 'open-caller';

/** One event: a state change of a breaker, or a call it refused or timed out. */
export interface CircuitEvent {
  type: CircuitEventType;
  /** The breaker's name: the dependency, or the tool it belongs to. */
  breaker: string;
  /** The breaker's state after the event. */
  state: CircuitState;
  /** The tool of the call that caused the event; undefined for the timer-driven `half-open`. */
  toolName: string | undefined;
  /** Wall-clock time of the event (ms since the epoch). */
  at: number;
  /**
   * For `open-caller` and a refused caller's `short-circuit`: core's `callerTag` of that caller (a
   * digest, never the identity itself); undefined otherwise.
   */
  caller?: string | undefined;
}

export type CircuitEventListener = (event: CircuitEvent) => void;

/** A breaker's counts, for tracing and health endpoints. */
export interface BreakerStats {
  name: string;
  state: CircuitState;
  /** The tools that have called through this breaker. */
  tools: string[];
  /** Calls running now (a timed-out call whose handler ignores its signal still runs). */
  inFlight: number;
  /** While open: milliseconds until the breaker lets a probe through. */
  retryAfterMs: number | undefined;
  /** Callers whose failures are tracked (at most 1024), and those refused on their own now. */
  callers: { tracked: number; refused: number };
  /** opossum's rolling window: counted calls only (never short-circuits, capacity refusals or model mistakes). */
  window: { calls: number; successes: number; failures: number; errorPercentage: number };
  /** Since the breaker was created. */
  totals: {
    successes: number;
    failures: number;
    timeouts: number;
    /** Model mistakes and cancelled calls: neither success nor failure. */
    ignored: number;
    /** Outcomes of calls that started before the last state change, kept out of the window. */
    stale: number;
    shortCircuits: number;
    capacityRejections: number;
    opened: number;
    closed: number;
    /** Times one caller alone was refused (`open-caller`). */
    callerOpens: number;
    /** Calls answered `unavailable` because their caller alone was refused. */
    callerShortCircuits: number;
  };
}

/** The middleware `createCircuitBreaker()` returns: it runs calls through the breakers it holds. */
export interface CircuitBreaker extends ToolMiddleware {
  /** Every breaker created so far, by name (a dependency, or the tool it belongs to). */
  stats(): Record<string, BreakerStats>;
  /** The state of the breaker `name` (a dependency or a tool), or undefined before its first call. */
  state(name: string): CircuitState | undefined;
  /** Subscribes to breaker events; returns the unsubscribe function. A throwing listener is logged, never fatal. */
  on(type: CircuitEventType, listener: CircuitEventListener): () => void;
  /** Stops every breaker's timers; later calls are answered `unavailable`. Call it when the server closes. */
  close(): void;
  /** @deprecated Use `close()`; goes in the next release. */
  shutdown(): void;
}

/**
 * The old shape `createCircuitBreakers()` returns.
 * @deprecated Use `createCircuitBreaker()`, which returns the middleware itself with these methods.
 */
export interface CircuitBreakers {
  /** Put it last in the global chain (innermost), or in a tool's own `middleware`. */
  readonly middleware: ToolMiddleware;
  /** Every breaker created so far, by name. */
  stats(): Record<string, BreakerStats>;
  /** Subscribes to breaker events; returns the unsubscribe function. A throwing listener is logged, never fatal. */
  on(type: CircuitEventType, listener: CircuitEventListener): () => void;
  /** Stops every breaker's timers; later calls are answered `unavailable`. Call it when the server closes. */
  shutdown(): void;
}
