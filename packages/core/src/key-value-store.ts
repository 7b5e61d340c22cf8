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
  /**
   * Removes `key` only while it holds exactly `expected`, in one atomic step of the store (Redis: one
   * Lua script); true when it held `expected` and was deleted, false when it was absent, expired or held
   * anything else (which stays). Optional: a policy releasing a claim of its own uses it when present,
   * so that a release delivered late never deletes the claim another call made since.
   */
  deleteIfEquals?(key: string, expected: string, options?: StoreOperationOptions): Promise<boolean>;
  /** Releases what the store holds (connections, timers). */
  close?(): Promise<void>;
}

export interface MemoryStoreOptions {
  /**
   * Most entries held in all. A live entry is never evicted: past this, a new key is refused with a
   * `StoreFullError` (reason `'store'`); an expired entry stops counting within 100 ms. @default 100000
   */
  maxEntries?: number;
  /**
   * Most live entries of one scope: a key's Redis Cluster hash tag (the text between its first `{` and
   * the next `}`), or, for keys without one, one scope they all share. A new key past it is refused
   * with a `StoreFullError` (reason `'scope'`); replacing a key never counts against it. @default 10000
   */
  maxEntriesPerScope?: number;
  /**
   * Most bytes held in all, counting each entry's key and value at 2 bytes per UTF-16 code unit (what
   * a JS string may take). A write that would pass it (a new key, or a larger value for a held key) is
   * refused with a `StoreFullError` (reason `'store'`); a value no larger than the one it replaces is
   * always stored. @default 67108864 (64 MiB)
   */
  maxBytes?: number;
  /**
   * Most bytes held by one scope's live entries, counted as for `maxBytes`. A write that would pass it
   * is refused with a `StoreFullError` (reason `'scope'`). @default 8388608 (8 MiB)
   */
  maxBytesPerScope?: number;
  /** The clock, for tests. @default Date.now */
  now?: () => number;
}

// A registry symbol, so the brand survives two copies of this package in one process.
const STORE_FULL_BRAND = Symbol.for('toolgate.StoreFullError');

/**
 * A store refused a write: the key's scope (`reason: 'scope'`) or the whole store (`'store'`) holds as
 * many live entries, or would hold more bytes, than it may. Not an outage: someone is filling the
 * store, so a policy refuses the call rather than running it unguarded. The message never names the
 * key (keys carry callers' digests).
 */
export class StoreFullError extends Error {
  readonly reason: 'scope' | 'store';
  /**
   * The limit that was reached (`maxEntriesPerScope`, `maxEntries`, `maxBytesPerScope` or `maxBytes`;
   * the message names which), when the store has one of its own.
   */
  readonly limit: number | undefined;

  /**
   * `message`: another store's own words (a Redis store's out-of-memory refusal); by default, the
   * memory store's, naming the limit. `cause`: what the store answered, for the server log.
   */
  constructor(
    reason: 'scope' | 'store',
    limit?: number,
    options: { message?: string; cause?: unknown } = {},
  ) {
    super(
      options.message ??
        (reason === 'scope'
          ? `KeyValueStore: a new key was refused: its scope holds maxEntriesPerScope (${limit}) live entries`
          : `KeyValueStore: a new key was refused: the store holds maxEntries (${limit}) live entries`),
      options.cause === undefined ? undefined : { cause: options.cause },
    );
    this.name = 'StoreFullError';
    this.reason = reason;
    this.limit = limit;
    Object.defineProperty(this, STORE_FULL_BRAND, { value: true });
  }
}

/** True for a StoreFullError from any copy of @toolgate/core (`instanceof` is not). */
export function isStoreFullError(value: unknown): value is StoreFullError {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as Record<symbol, unknown>)[STORE_FULL_BRAND] === true
  );
}

interface Entry {
  value: string;
  expiresAt: number;
  scope: string;
  /** What the entry counts against `maxBytes`: 2 × (key + value length). */
  bytes: number;
  /** The expiry bucket whose list holds this key (see `buckets` in createMemoryStore). */
  bucket: number;
}

/** What a scope holds; a scope holding nothing has no slot. */
interface ScopeHeld {
  entries: number;
  bytes: number;
}

/** Width of an expiry bucket: an expired entry stops counting against a limit within this. */
const BUCKET_MS = 100;

/**
 * A `KeyValueStore` in this process's memory: bounded, expiring, synchronous underneath. It never
 * evicts a live entry (one caller's flood would otherwise drop another's claim or used confirmation):
 * past a limit, a new key is refused with a `StoreFullError`.
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): KeyValueStore {
  const maxEntries = positiveCount('maxEntries', options.maxEntries ?? 100_000);
  const maxEntriesPerScope = positiveCount('maxEntriesPerScope', options.maxEntriesPerScope ?? 10_000);
  const maxBytes = positiveCount('maxBytes', options.maxBytes ?? 64 * 1024 * 1024);
  const maxBytesPerScope = positiveCount('maxBytesPerScope', options.maxBytesPerScope ?? 8 * 1024 * 1024);
  const now = options.now ?? Date.now;
  const entries = new Map<string, Entry>();
  const perScope = new Map<string, ScopeHeld>();
  /** Bytes held by every entry, live or expired but not yet dropped. */
  let bytesHeld = 0;
  // Expired entries are found by expiry time, not by a scan: each write files its key under the bucket
  // its entry has expired by (expiresAt rounded up to BUCKET_MS), and every bucket whose time has
  // passed is dropped on the next write. A slot whose entry was deleted, or rewritten into another
  // bucket, is skipped; `slots` counts them all, for compaction.
  let buckets = new Map<number, string[]>();
  let slots = 0;
  /** Every bucket below this was dropped. */
  let nextBucket = Number.NEGATIVE_INFINITY;

  const remove = (key: string, entry: Entry): void => {
    entries.delete(key);
    bytesHeld -= entry.bytes;
    const held = perScope.get(entry.scope)!;
    held.entries -= 1;
    held.bytes -= entry.bytes;
    if (held.entries === 0) perScope.delete(entry.scope);
  };
  /** Throws StoreFullError when `scope` (holding `held`) or the store cannot take `more` bytes. */
  const checkBytes = (held: ScopeHeld | undefined, more: number): void => {
    if (more <= 0) return;
    if ((held?.bytes ?? 0) + more > maxBytesPerScope) {
      throw new StoreFullError('scope', maxBytesPerScope, {
        message: `KeyValueStore: a write was refused: its scope would hold more than maxBytesPerScope (${maxBytesPerScope}) bytes`,
      });
    }
    if (bytesHeld + more > maxBytes) {
      throw new StoreFullError('store', maxBytes, {
        message: `KeyValueStore: a write was refused: the store would hold more than maxBytes (${maxBytes}) bytes`,
      });
    }
  };
  const dropBucket = (bucket: number, keys: string[]): void => {
    buckets.delete(bucket);
    slots -= keys.length;
    for (const key of keys) {
      const entry = entries.get(key);
      if (entry !== undefined && entry.bucket === bucket) remove(key, entry);
    }
  };
  const dropExpired = (time: number): void => {
    const last = Math.floor(time / BUCKET_MS);
    if (last < nextBucket) return;
    // Bucket by bucket, or (after an idle spell longer than there are buckets) over the buckets held.
    if (last - nextBucket < buckets.size) {
      for (let bucket = nextBucket; bucket <= last; bucket += 1) {
        const keys = buckets.get(bucket);
        if (keys !== undefined) dropBucket(bucket, keys);
      }
    } else {
      for (const [bucket, keys] of buckets) if (bucket <= last) dropBucket(bucket, keys);
    }
    nextBucket = last + 1;
  };
  const push = (key: string, bucket: number): void => {
    const keys = buckets.get(bucket);
    if (keys === undefined) buckets.set(bucket, [key]);
    else keys.push(key);
    slots += 1;
  };
  const file = (key: string, bucket: number): void => {
    push(key, bucket);
    // Skipped slots are dropped once they outnumber the entries (a rebuild per that many writes).
    if (slots > 2 * entries.size + 1024) {
      buckets = new Map();
      slots = 0;
      for (const [held, entry] of entries) push(held, entry.bucket);
    }
  };
  const live = (key: string, time: number): Entry | undefined => {
    const entry = entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= time) {
      remove(key, entry);
      return undefined;
    }
    return entry;
  };
  /** Stores `value`; false when `onlyIfAbsent` and the key holds one. Throws StoreFullError. */
  const write = (key: string, value: string, ttlMs: number, onlyIfAbsent: boolean): boolean => {
    checkTtl(ttlMs);
    const bytes = bytesOf(key, value);
    const time = now();
    dropExpired(time);
    const expiresAt = time + ttlMs;
    // Never below nextBucket: a clock that stepped back must not file a key where no drop will look.
    const bucket = Math.max(Math.ceil(expiresAt / BUCKET_MS), nextBucket);
    const entry = live(key, time);
    if (entry !== undefined) {
      if (onlyIfAbsent) return false;
      // Refused before anything changes: the key keeps its value and expiry.
      const held = perScope.get(entry.scope)!;
      checkBytes(held, bytes - entry.bytes);
      held.bytes += bytes - entry.bytes;
      bytesHeld += bytes - entry.bytes;
      entry.bytes = bytes;
      entry.value = value;
      entry.expiresAt = expiresAt;
      if (entry.bucket !== bucket) {
        entry.bucket = bucket;
        file(key, bucket);
      }
      return true;
    }
    const scope = scopeOf(key);
    const held = perScope.get(scope);
    if ((held?.entries ?? 0) >= maxEntriesPerScope) throw new StoreFullError('scope', maxEntriesPerScope);
    if (entries.size >= maxEntries) throw new StoreFullError('store', maxEntries);
    checkBytes(held, bytes);
    entries.set(key, { value, expiresAt, scope, bytes, bucket });
    if (held === undefined) perScope.set(scope, { entries: 1, bytes });
    else {
      held.entries += 1;
      held.bytes += bytes;
    }
    bytesHeld += bytes;
    file(key, bucket);
    return true;
  };
  return {
    async setIfAbsent(key, value, ttlMs, op) {
      op?.signal?.throwIfAborted();
      return write(key, value, ttlMs, true);
    },
    async set(key, value, ttlMs, op) {
      op?.signal?.throwIfAborted();
      write(key, value, ttlMs, false);
    },
    async get(key, op) {
      op?.signal?.throwIfAborted();
      return live(key, now())?.value;
    },
    async delete(key, op) {
      op?.signal?.throwIfAborted();
      const entry = live(key, now());
      if (entry === undefined) return false;
      remove(key, entry);
      return true;
    },
    async deleteIfEquals(key, expected, op) {
      op?.signal?.throwIfAborted();
      // Checked as a write checks them: a value of another type never equals, and is a caller's bug.
      bytesOf(key, expected);
      const entry = live(key, now());
      if (entry === undefined || entry.value !== expected) return false;
      remove(key, entry);
      return true;
    },
    async close() {
      entries.clear();
      perScope.clear();
      bytesHeld = 0;
      buckets.clear();
      slots = 0;
    },
  };
}

/** A key's scope: its Redis Cluster hash tag, or '' (the scope of every key without one). */
function scopeOf(key: string): string {
  const open = key.indexOf('{');
  if (open < 0) return '';
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : '';
}

/**
 * An entry's size as JS may hold it: 2 bytes per UTF-16 code unit of key and value (V8 keeps Latin-1
 * text in 1; the map and entry objects around them are bounded by the entry limits instead).
 */
function bytesOf(key: string, value: string): number {
  // A value of another type would make the running totals NaN, and every byte limit with them.
  if (typeof key !== 'string' || typeof value !== 'string') {
    throw new TypeError('KeyValueStore: keys and values must be strings');
  }
  return 2 * (key.length + value.length);
}

function positiveCount(name: string, value: number): number {
  if (!(Number.isInteger(value) && value >= 1)) {
    throw new RangeError(`createMemoryStore: ${name} must be a positive integer`);
  }
  return value;
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
    // Only when the store has it: a policy tells a store with it from one without by its presence.
    ...(store.deleteIfEquals
      ? {
          deleteIfEquals: (key: string, expected: string, op?: StoreOperationOptions) =>
            withDeadline((signal) => store.deleteIfEquals!(key, expected, { signal }), {
              ...limit,
              signal: op?.signal,
            }),
        }
      : {}),
    ...(store.close ? { close: () => store.close!() } : {}),
  };
}
