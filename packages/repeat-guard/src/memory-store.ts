import { LRUCache } from 'lru-cache';
import { type CallEntry, encodeCallEntry } from './call-entry.js';
import type { MemoryRepeatStore, MemoryRepeatStoreOptions } from './types.js';

/**
 * The guard's own, synchronous access to a memory store: call entries kept as objects (no JSON, no
 * hash, no promise per call). The result is stored once and never changed: every answer built from it
 * is a fresh copy (`withNote`, `refusedFailure`).
 */
export interface MemoryEntries {
  get(key: string): CallEntry | string | undefined;
  /** `size`: the characters the entry counts against `maxSize`. */
  set(key: string, entry: CallEntry, ttlMs: number, size: number): void;
  delete(key: string): void;
}

// Not a property of the store: the public face stays the string `RepeatStore`.
const entriesOf = new WeakMap<object, MemoryEntries>();

/** The entry access of a store made by `createMemoryRepeatStore`, or undefined for any other store. */
export function memoryEntriesOf(store: object): MemoryEntries | undefined {
  return entriesOf.get(store);
}

/** The default store: an LRU with a time to live per entry, bounded by count and by total size. */
export function createMemoryRepeatStore(options: MemoryRepeatStoreOptions = {}): MemoryRepeatStore {
  const maxEntries = options.maxEntries ?? 10_000;
  const maxSize = options.maxSize ?? 64_000_000;
  if (!Number.isInteger(maxEntries) || maxEntries < 1) {
    throw new RangeError('createMemoryRepeatStore: maxEntries must be a positive integer');
  }
  if (!Number.isInteger(maxSize) || maxSize < 1) {
    throw new RangeError('createMemoryRepeatStore: maxSize must be a positive integer');
  }
  // Strings come from the public `set`; entries from the guard, with their size given on `set`.
  const cache = new LRUCache<string, string | CallEntry>({
    max: maxEntries,
    maxSize,
    sizeCalculation: (value, key) => (typeof value === 'string' ? value.length : 1) + key.length,
  });
  const store: MemoryRepeatStore = {
    get(key) {
      const value = cache.get(key);
      // An entry the guard stored reads as the JSON a shared store would hold.
      return value === undefined || typeof value === 'string' ? value : encodeCallEntry(value);
    },
    set(key, value, ttlMs) {
      cache.set(key, value, { ttl: ttlMs });
    },
    delete(key) {
      cache.delete(key);
    },
    get size() {
      return cache.size;
    },
    get totalSize() {
      return cache.calculatedSize;
    },
    clear() {
      cache.clear();
    },
  };
  entriesOf.set(store, {
    get: (key) => cache.get(key),
    set(key, entry, ttlMs, size) {
      cache.set(key, entry, { ttl: ttlMs, size: size + key.length });
    },
    delete(key) {
      cache.delete(key);
    },
  });
  return store;
}
