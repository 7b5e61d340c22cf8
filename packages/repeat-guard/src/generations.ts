/** What a generation holds: the caller's own object, with its expiry and size on it. */
export interface Expiring {
  /** When it expires, in the clock's milliseconds (`Date.now()` unless another clock is given). */
  readonly expiresAt: number;
  /** What it counts against `maxSize`. */
  readonly size: number;
}

/**
 * A bounded map with a time to live per entry, evicting by generations: new and recently read entries
 * go into the young generation; when it holds half the entries (or half the characters) allowed, the
 * old generation is dropped whole and the young one becomes old. Reading an old entry moves it back to
 * the young one. So what survives is always the most recently used, as with an LRU, give or take half
 * the capacity, and no read or write pays for bookkeeping per entry: two Map operations at most.
 *
 * Measured on the repeat guard's path (a fresh key per call, a full store), an LRU list cost about a
 * microsecond per call more than this. Bounds hold at every moment: at most `maxEntries` entries and
 * `maxSize` in summed sizes (an entry larger than `maxSize` is not kept).
 */
export class Generations<V extends Expiring> {
  #young = new Map<string, V>();
  #old = new Map<string, V>();
  #youngSize = 0;
  #oldSize = 0;
  readonly #maxEntries: number;
  readonly #maxSize: number;
  /** Entries (and summed size) of one generation before it is retired. */
  readonly #entriesPerGeneration: number;
  readonly #sizePerGeneration: number;
  readonly #now: () => number;
  /** Counts the entries added (see `version`). */
  #version = 0;

  constructor(maxEntries: number, maxSize: number, now: () => number = Date.now) {
    this.#maxEntries = maxEntries;
    this.#maxSize = maxSize;
    this.#entriesPerGeneration = Math.max(1, Math.floor(maxEntries / 2));
    this.#sizePerGeneration = Math.max(1, Math.floor(maxSize / 2));
    this.#now = now;
  }

  /** Entries held now (expired ones are dropped when read or retired). */
  get size(): number {
    return this.#young.size + this.#old.size;
  }

  /** Summed sizes of the entries held now. */
  get totalSize(): number {
    return this.#youngSize + this.#oldSize;
  }

  /**
   * A number that changes whenever an entry is added (a write, or a read that moves an old entry back
   * among the young): equal at two moments, no key became present in between. Deletes, expiry and
   * retirement only take keys away, so they leave it be.
   */
  get version(): number {
    return this.#version;
  }

  get(key: string): V | undefined {
    const young = this.#young.get(key);
    if (young !== undefined) {
      if (young.expiresAt > this.#now()) return young;
      this.#young.delete(key);
      this.#youngSize -= young.size;
      return undefined;
    }
    const old = this.#old.get(key);
    if (old === undefined) return undefined;
    this.#old.delete(key);
    this.#oldSize -= old.size;
    if (old.expiresAt <= this.#now()) return undefined;
    // Read again: it belongs with the recently used.
    this.#admit(key, old);
    return old;
  }

  /** Keeps `entry` until its `expiresAt`; its `size` counts against `maxSize`. */
  set(key: string, entry: V): void {
    this.delete(key);
    if (entry.size > this.#maxSize) return;
    this.#admit(key, entry);
  }

  /**
   * `set` for a key that `get` found in neither generation when `version` read `absentSince`: if no
   * entry was added since, the key is still in neither, so it is added without being looked up again
   * (two Map lookups fewer; a sequential caller's every write). Else exactly `set`.
   */
  setAbsent(key: string, entry: V, absentSince: number): void {
    if (absentSince !== this.#version) {
      this.set(key, entry);
      return;
    }
    if (entry.size > this.#maxSize) return;
    this.#admit(key, entry);
  }

  /** The clock entries' `expiresAt` is read against. */
  now(): number {
    return this.#now();
  }

  delete(key: string): boolean {
    const young = this.#young.get(key);
    if (young !== undefined) {
      this.#young.delete(key);
      this.#youngSize -= young.size;
      return true;
    }
    const old = this.#old.get(key);
    if (old === undefined) return false;
    this.#old.delete(key);
    this.#oldSize -= old.size;
    return true;
  }

  clear(): void {
    this.#young = new Map();
    this.#old = new Map();
    this.#youngSize = 0;
    this.#oldSize = 0;
  }

  /** Adds an entry that is in neither generation. */
  #admit(key: string, held: V): void {
    this.#version += 1;
    if (
      this.#young.size >= this.#entriesPerGeneration ||
      (this.#youngSize > 0 && this.#youngSize + held.size > this.#sizePerGeneration)
    ) {
      this.#retire();
    }
    // The bounds themselves, for the cases halves do not cover (an odd or tiny maxEntries, one
    // entry larger than half of maxSize): the old generation goes first, then the young.
    if (this.size + 1 > this.#maxEntries || this.totalSize + held.size > this.#maxSize) this.#dropOld();
    if (this.size + 1 > this.#maxEntries || this.totalSize + held.size > this.#maxSize) {
      this.#retire();
      this.#dropOld();
    }
    this.#young.set(key, held);
    this.#youngSize += held.size;
  }

  /** The old generation is dropped; the young one becomes old. */
  #retire(): void {
    this.#old = this.#young;
    this.#oldSize = this.#youngSize;
    this.#young = new Map();
    this.#youngSize = 0;
  }

  #dropOld(): void {
    this.#old = new Map();
    this.#oldSize = 0;
  }
}
