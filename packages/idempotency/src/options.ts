import type { KeyValueStore, PerToolOptions } from '@toolgate/core';

/** What the middleware does when its store cannot answer. */
export type OnStoreFailure = 'closed' | 'open';

/** Options a tool may set for itself (under `tools`), or the server for every tool. */
export interface IdempotencyToolOptions {
  /** Whether calls of the tool are made idempotent; a tool listed under `tools` with an object is enabled unless it says false. @default false */
  enabled: boolean;
  /** How long a finished call's result is replayed to a repeated call, in ms. @default 600000 */
  windowMs: number;
  /** How long a running call holds its claim (must exceed the handler's longest run, confirmation included), in ms. @default 300000 */
  claimTtlMs: number;
  /** Keep failures too, so a retry after a failure replays it instead of running again (never `confirmation_required`). @default false */
  storeFailures: boolean;
  /** When the store cannot answer: 'closed' refuses with `unavailable` (no side effect twice), 'open' runs the call unguarded. A full store (core's `StoreFullError`) is refused `rate_limited` either way. @default 'closed' */
  onStoreFailure: OnStoreFailure;
  /** Arguments left out of the call's digest (a confirmation token differs between a first call and its confirmed retry). @default ['confirmation'] */
  ignoreArguments: readonly string[];
  /**
   * Longest result kept, in characters of its stored JSON. A longer one is not kept: a small marker says
   * the call ran (a retry is answered `repeated_call`, never run again). Bounds what one call can put in
   * the store, so the store's entry limits bound its memory. @default 65536
   */
  maxResultSize: number;
  /**
   * Longest an identical call waits for a running one (in this process, or another replica's claim),
   * in ms; then it is answered `unavailable` (retryable, `still-running`) without running. Undefined:
   * until the running call's claim expires (`claimTtlMs`). A timed-out call's claim is held until then
   * too, so a retry of it waits this long before it hears anything. @default undefined (claimTtlMs)
   */
  maxWaitMs: number | undefined;
}

/** Options of `createIdempotency`. */
export interface IdempotencyOptions
  extends Partial<IdempotencyToolOptions>,
    PerToolOptions<IdempotencyToolOptions> {
  /** Where claims and results live; a Redis store (`@toolgate/redis-store`) shares them across replicas. @default createMemoryStore() */
  store?: KeyValueStore;
  /** Longest one store operation may take, in ms. @default 200 */
  storeTimeoutMs?: number;
  /** How often a call waiting on another replica's claim reads the store, in ms. @default 50 */
  pollIntervalMs?: number;
}

export const TOOL_DEFAULTS: IdempotencyToolOptions = Object.freeze({
  enabled: false,
  windowMs: 600_000,
  claimTtlMs: 300_000,
  storeFailures: false,
  onStoreFailure: 'closed',
  ignoreArguments: Object.freeze(['confirmation']),
  maxResultSize: 65_536,
  maxWaitMs: undefined,
});

export function checkToolOptions(resolved: Readonly<IdempotencyToolOptions>, where: string): void {
  for (const field of ['windowMs', 'claimTtlMs'] as const) {
    if (!(Number.isInteger(resolved[field]) && resolved[field] >= 1)) {
      throw new RangeError(`${where}: ${field} must be a positive integer of milliseconds`);
    }
  }
  if (!(Number.isInteger(resolved.maxResultSize) && resolved.maxResultSize >= 1)) {
    throw new RangeError(`${where}: maxResultSize must be a positive integer of characters`);
  }
  const wait = resolved.maxWaitMs;
  if (wait !== undefined && !(Number.isInteger(wait) && wait >= 0)) {
    throw new RangeError(`${where}: maxWaitMs must be a whole number of milliseconds from 0, or undefined`);
  }
  if (resolved.onStoreFailure !== 'closed' && resolved.onStoreFailure !== 'open') {
    throw new TypeError(`${where}: onStoreFailure must be 'closed' or 'open'`);
  }
  if (!Array.isArray(resolved.ignoreArguments))
    throw new TypeError(`${where}: ignoreArguments must be an array of names`);
}
