import { mirrorsStructuredContent } from '@toolgate/core';
import { type CallEntry, encodeCallEntry } from './call-entry.js';
import { Generations } from './generations.js';
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

/**
 * The default store: the most recently used entries, each with a time to live, bounded by count and by
 * total size (see `Generations`).
 */
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
  const cache = new Generations<string | CallEntry | TextEntry>(maxEntries, maxSize);
  const store: MemoryRepeatStore = {
    get(key) {
      const value = cache.get(key);
      // An entry the guard stored reads as the JSON a shared store would hold.
      return value === undefined || typeof value === 'string' ? value : encodeEntry(value);
    },
    set(key, value, ttlMs) {
      cache.set(key, value, ttlMs, value.length + key.length);
    },
    delete(key) {
      cache.delete(key);
    },
    get size() {
      return cache.size;
    },
    get totalSize() {
      return cache.totalSize;
    },
    clear() {
      cache.clear();
    },
  };
  entriesOf.set(store, {
    get(key) {
      const value = cache.get(key);
      return value === undefined || typeof value === 'string' ? value : expand(value);
    },
    set(key, entry, ttlMs, size) {
      cache.set(key, compact(entry), ttlMs, size + key.length);
    },
    delete(key) {
      cache.delete(key);
    },
  });
  return store;
}

/**
 * A remembered plain `ok()` result kept as its JSON text alone: one string instead of the result's
 * object graph (result, content list, text block, data object and its values). Up to `maxEntries`
 * results stay alive for a whole window, long enough for the garbage collector to promote them, so the
 * fewer objects each holds, the less every collection walks. Read back (only on a repeat) as the
 * result the client received: the same text, the data parsed from it.
 */
interface TextEntry {
  readonly count: number;
  readonly firstAt: number;
  readonly at: number;
  readonly text: string;
}

function compact(entry: CallEntry): CallEntry | TextEntry {
  const result = entry.result;
  if (
    result.isError === true ||
    result._meta !== undefined ||
    result.content.length !== 1 ||
    !mirrorsStructuredContent(result)
  ) {
    return entry;
  }
  const first = result.content[0] as { text: string };
  return { count: entry.count, firstAt: entry.firstAt, at: entry.at, text: first.text };
}

function expand(value: CallEntry | TextEntry): CallEntry {
  if (!('text' in value)) return value;
  return {
    count: value.count,
    firstAt: value.firstAt,
    at: value.at,
    result: {
      content: [{ type: 'text', text: value.text }],
      structuredContent: JSON.parse(value.text) as Record<string, unknown>,
    },
  };
}

/** An entry as a shared store holds it (a text entry as `encodeCallEntry` writes an `ok()` result). */
function encodeEntry(value: CallEntry | TextEntry): string {
  if (!('text' in value)) return encodeCallEntry(value);
  const { count: n, firstAt: f, at: t, text } = value;
  return JSON.stringify({ v: 1, n, f, t, r: { content: [{ type: 'text', text }] }, s: 1 });
}
