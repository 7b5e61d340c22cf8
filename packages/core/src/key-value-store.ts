import { withDeadline } from './deadline.js';

/** Per-operation options every store method takes. */
export interface StoreOperationOptions {
  /** Aborts the operation (the call's signal combined with the store's time limit). */
  signal?: AbortSignal;
}

/**
 * The one small interface behind every piece of shared policy state (idempotency claims and results,
 * confirmation tokens, ...): string values with a time to live. `createMemoryStore()` is the default;
 * a Redis implementation makes the state shared by a fleet. Values are opaque strings (JSON); keys come
 * from `callKey`/`callerScope`, so they already carry the caller's identity.
 */
export interface KeyValueStore {
  /** Stores `value` unless `key` holds one (Redis `SET NX PX`); true when this call stored it. */
  setIfAbsent(key: string, value: string, ttlMs: number, options?: StoreOperationOptions): Promise<boolean>;
  /** Stores `value`, replacing any (Redis `SET PX`). */
  set(key: string, value: string, ttlMs: number, options?: StoreOperationOptions): Promise<void>;
  /** The value, or undefined when absent or expired. */
  get(key: string, options?: StoreOperationOptions): Promise<string | undefined>;
  /** Removes `key`; true when it held a value. */
  delete(key: string, options?: StoreOperationOptions): Promise<boolean>;
  /** Releases what the store holds (connections, timers). */
  close?(): Promise<void>;
}

export interface MemoryStoreOptions {
  /** Most entries kept; the oldest are dropped first past it. @default 100000 */
  maxEntries?: number;
  /** The clock, for tests. @default Date.now */
  now?: () => number;
}

interface Entry {
  value: string;
  expiresAt: number;
  /** The write's sequence number (see `order` in createMemoryStore). */
  seq: number;
}

/** A `KeyValueStore` in this process's memory: bounded, expiring, synchronous underneath. */
export function createMemoryStore(options: MemoryStoreOptions = {}): KeyValueStore {
  const maxEntries = options.maxEntries ?? 100_000;
  if (!(Number.isInteger(maxEntries) && maxEntries >= 1)) {
    throw new RangeError('createMemoryStore: maxEntries must be a positive integer');
  }
  const now = options.now ?? Date.now;
  const entries = new Map<string, Entry>();
  // Write order, oldest first, for eviction: each write appends its key and sequence number; a slot
  // whose entry was rewritten or deleted since is skipped. (Evicting with `entries.keys().next()`
  // walks the holes deletions leave at the front of a Map: thousands per eviction once full.)
  let order: string[] = [];
  let orderSeqs: number[] = [];
  let head = 0;
  let sequence = 0;
  const evictOldest = (): void => {
    while (head < order.length) {
      const key = order[head]!;
      const seq = orderSeqs[head]!;
      head += 1;
      if (entries.get(key)?.seq === seq) {
        entries.delete(key);
        return;
      }
    }
  };
  const compactOrder = (): void => {
    // The Map's own order is write order too (put deletes before it sets).
    order = [...entries.keys()];
    orderSeqs = order.map((key) => entries.get(key)!.seq);
    head = 0;
  };
  const live = (key: string): Entry | undefined => {
    const entry = entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= now()) {
      entries.delete(key);
      return undefined;
    }
    return entry;
  };
  const put = (key: string, value: string, ttlMs: number): void => {
    checkTtl(ttlMs);
    const seq = sequence;
    sequence += 1;
    entries.delete(key);
    entries.set(key, { value, expiresAt: now() + ttlMs, seq });
    order.push(key);
    orderSeqs.push(seq);
    while (entries.size > maxEntries) evictOldest();
    // Skipped slots are dropped once they outnumber the live entries.
    if (order.length - head > 2 * entries.size + 64) compactOrder();
  };
  return {
    async setIfAbsent(key, value, ttlMs, op) {
      op?.signal?.throwIfAborted();
      if (live(key) !== undefined) return false;
      put(key, value, ttlMs);
      return true;
    },
    async set(key, value, ttlMs, op) {
      op?.signal?.throwIfAborted();
      put(key, value, ttlMs);
    },
    async get(key, op) {
      op?.signal?.throwIfAborted();
      return live(key)?.value;
    },
    async delete(key, op) {
      op?.signal?.throwIfAborted();
      const had = live(key) !== undefined;
      entries.delete(key);
      return had;
    },
    async close() {
      entries.clear();
      compactOrder();
    },
  };
}

function checkTtl(ttlMs: number): void {
  if (!(Number.isInteger(ttlMs) && ttlMs >= 1)) {
    throw new RangeError(`KeyValueStore: ttlMs must be a positive integer of milliseconds, got ${ttlMs}`);
  }
}

/**
 * A store whose every operation is bounded by `timeoutMs` and follows the caller's signal (core's
 * `withDeadline`): a store that stops answering (a silent network partition) fails the operation within
 * the limit instead of hanging the call. Wrap a shared store once, when the policy is created.
 */
export function limitStore(
  store: KeyValueStore,
  options: { timeoutMs: number; name?: string },
): KeyValueStore {
  const what = `${options.name ?? 'the store'}`;
  const limit = { timeoutMs: options.timeoutMs, what };
  return {
    setIfAbsent: (key, value, ttlMs, op) =>
      withDeadline((signal) => store.setIfAbsent(key, value, ttlMs, { signal }), {
        ...limit,
        signal: op?.signal,
      }),
    set: (key, value, ttlMs, op) =>
      withDeadline((signal) => store.set(key, value, ttlMs, { signal }), { ...limit, signal: op?.signal }),
    get: (key, op) => withDeadline((signal) => store.get(key, { signal }), { ...limit, signal: op?.signal }),
    delete: (key, op) =>
      withDeadline((signal) => store.delete(key, { signal }), { ...limit, signal: op?.signal }),
    ...(store.close ? { close: () => store.close!() } : {}),
  };
}
