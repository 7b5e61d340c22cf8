import { mirrorsStructuredContent, type ToolContext } from '@toolgate/core';
import { type CallEntry, encodeCallEntry, isBareResult, isBareText } from './call-entry.js';
import { Generations } from './generations.js';
import { CallerNumbers } from './key.js';
import type { MemoryRepeatStore, MemoryRepeatStoreOptions } from './types.js';

/**
 * The guard's own, synchronous access to a memory store: call entries kept as objects (no JSON, no
 * hash, no promise per call). The result is stored once and never changed: every answer built from it
 * is a fresh copy (`withNote`, `refusedFailure`).
 */
export interface MemoryEntries {
  /**
   * The key of a call in this store (see `CallerNumbers`): one table per store, so guards that share a
   * store share its keys, and two callers never meet under one.
   */
  keyOf(ctx: ToolContext, scope: string | undefined): string;
  get(key: string): CallEntry | string | undefined;
  /** Changes whenever an entry is added: read right after a `get` that found nothing. */
  version(): number;
  /**
   * `size`: the characters the entry counts against `maxSize`. `absentSince`: the `version` read
   * after a `get` of this key found nothing (the write then skips looking for it when no entry was
   * added since), or -1.
   */
  set(key: string, entry: CallEntry, ttlMs: number, size: number, absentSince: number): void;
  delete(key: string): void;
  /** Summed characters of the caller scopes the store numbers (see `CallerNumbers`). */
  callerSize(): number;
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
  // Times are kept in ms since the store was made, as small integers (`smallTime`), which V8 keeps
  // inside the entry, where epoch milliseconds would each be a number object of their own (three more
  // objects per remembered call for the garbage collector to copy and walk).
  const origin = Date.now();
  const clock = (): number => smallTime(Date.now() - origin);
  // Strings come from the public `set`; entries from the guard, with their size given on `set`.
  const cache = new Generations<Stored>(maxEntries, maxSize, clock);
  const store: MemoryRepeatStore = {
    get(key) {
      const stored = cache.get(key);
      // An entry the guard stored reads as the JSON a shared store would hold.
      return stored === undefined
        ? undefined
        : stored.kind === STRING
          ? stored.value
          : encodeEntry(stored, origin);
    },
    set(key, value, ttlMs) {
      const stored: StringStored = {
        kind: STRING,
        value,
        expiresAt: cache.now() + ttlMs,
        size: value.length + key.length,
      };
      cache.set(key, stored);
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
  const callers = new CallerNumbers(maxEntries, maxSize);
  entriesOf.set(store, {
    keyOf: (ctx, scope) => callers.keyOf(ctx, scope),
    callerSize: () => callers.size,
    get(key) {
      const stored = cache.get(key);
      return stored === undefined
        ? undefined
        : stored.kind === STRING
          ? stored.value
          : expand(stored, origin);
    },
    version: () => cache.version,
    set(key, entry, ttlMs, size, absentSince) {
      cache.setAbsent(key, compact(entry, origin, cache.now() + ttlMs, size + key.length), absentSince);
    },
    delete(key) {
      cache.delete(key);
    },
  });
  return store;
}

// What the store holds, each one object carrying its own expiry and size (see `Generations`):
// - a remembered plain `ok()` result as its JSON text alone: one string instead of the result's object
//   graph (result, content list, text block, data object and its values). Up to `maxEntries` results
//   stay alive for a whole window, long enough for the garbage collector to promote them, so the fewer
//   objects each holds, the less every collection walks (measured: the entries' retention was most of
//   the guard's cost per call). Read back, only on a repeat, as the result the client received: the
//   same text, the data parsed from it;
// - any other result, as the guard's entry;
// - a string put through the store's public `set`.
const TEXT = 0;
const ENTRY = 1;
const STRING = 2;

interface TextStored {
  readonly kind: typeof TEXT;
  readonly count: number;
  /** `CallEntry.firstAt` and `.at` less the store's origin (see `createMemoryRepeatStore`). */
  readonly firstAt: number;
  readonly at: number;
  readonly text: string;
  readonly expiresAt: number;
  readonly size: number;
}

interface EntryStored {
  readonly kind: typeof ENTRY;
  readonly entry: CallEntry;
  readonly expiresAt: number;
  readonly size: number;
}

interface StringStored {
  readonly kind: typeof STRING;
  readonly value: string;
  readonly expiresAt: number;
  readonly size: number;
}

type Stored = TextStored | EntryStored | StringStored;

function compact(
  entry: CallEntry,
  origin: number,
  expiresAt: number,
  size: number,
): TextStored | EntryStored {
  const result = entry.result;
  // Kept as its text alone only when that is all the client received: a field beside it (a part's
  // `_meta` or `annotations`, the result's own) would be lost from the replay, and was not counted in
  // `size` either (`measureCallEntry` counts such a result by its whole JSON, and it is kept whole).
  const first = result.content[0];
  if (
    result.isError === true ||
    result.content.length !== 1 ||
    first === undefined ||
    !isBareResult(result) ||
    !isBareText(first) ||
    !mirrorsStructuredContent(result)
  ) {
    return { kind: ENTRY, entry, expiresAt, size };
  }
  return {
    kind: TEXT,
    count: entry.count,
    firstAt: smallTime(entry.firstAt - origin),
    at: smallTime(entry.at - origin),
    text: first.text,
    expiresAt,
    size,
  };
}

/**
 * A time since the store's origin as a small integer while it is one (the first 12 days): the
 * difference of two epoch times is a double, which V8 keeps in a number object of its own per field
 * (measured: three per remembered call) unless it is made an int32 first. Later times stay plain
 * numbers: exact, just boxed.
 */
function smallTime(ms: number): number {
  return ms <= SMALL_TIME_MAX ? ms | 0 : ms;
}

const SMALL_TIME_MAX = 2 ** 30 - 1;

function expand(stored: TextStored | EntryStored, origin: number): CallEntry {
  if (stored.kind === ENTRY) return stored.entry;
  return {
    count: stored.count,
    firstAt: stored.firstAt + origin,
    at: stored.at + origin,
    result: {
      content: [{ type: 'text', text: stored.text }],
      structuredContent: JSON.parse(stored.text) as Record<string, unknown>,
    },
  };
}

/** An entry as a shared store holds it (a text entry as `encodeCallEntry` writes an `ok()` result). */
function encodeEntry(stored: TextStored | EntryStored, origin: number): string {
  if (stored.kind === ENTRY) return encodeCallEntry(stored.entry);
  const { count: n, text } = stored;
  const f = stored.firstAt + origin;
  const t = stored.at + origin;
  return JSON.stringify({ v: 1, n, f, t, r: { content: [{ type: 'text', text }] }, s: 1 });
}
