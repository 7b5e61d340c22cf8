import { LRUCache } from 'lru-cache';
import type { MemoryRepeatStore, MemoryRepeatStoreOptions } from './types.js';

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
  const cache = new LRUCache<string, string>({
    max: maxEntries,
    maxSize,
    sizeCalculation: (value, key) => value.length + key.length,
  });
  return {
    get: (key) => cache.get(key),
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
}
