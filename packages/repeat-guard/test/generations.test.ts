import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Generations } from '../src/generations.js';

interface Item {
  readonly value: string | number;
  readonly expiresAt: number;
  readonly size: number;
}

/** An entry living `ttlMs` from the cache's clock, of `size`. */
const item = (cache: Generations<Item>, value: string | number, ttlMs: number, size: number): Item => ({
  value,
  expiresAt: cache.now() + ttlMs,
  size,
});

describe('Generations (the memory store underneath)', () => {
  it('keeps the most recently used: the newest half survives any run of new keys', () => {
    const cache = new Generations<Item>(100, 1_000_000);
    for (let i = 0; i < 10_000; i += 1) cache.set(`k${i}`, item(cache, i, 60_000, 1));
    expect(cache.size).toBeLessThanOrEqual(100);
    for (let i = 9_950; i < 10_000; i += 1) expect(cache.get(`k${i}`)?.value).toBe(i);
    expect(cache.get('k0')).toBeUndefined();
  });

  it('a read moves an old entry back among the recent ones, so a key read often is never dropped', () => {
    const cache = new Generations<Item>(10, 1_000_000);
    cache.set('hot', item(cache, 'kept', 60_000, 1));
    for (let i = 0; i < 1_000; i += 1) {
      cache.set(`cold${i}`, item(cache, 'x', 60_000, 1));
      expect(cache.get('hot')?.value).toBe('kept');
    }
  });

  it('expires entries after their time to live, in either generation', () => {
    let now = 1_000;
    const cache = new Generations<Item>(4, 1_000, () => now);
    cache.set('a', item(cache, 'A', 100, 1));
    cache.set('b', item(cache, 'B', 500, 1));
    cache.set('c', item(cache, 'C', 500, 1)); // a and b are now old
    now += 200;
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('b')?.value).toBe('B');
    expect(cache.get('c')?.value).toBe('C');
    now += 400;
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('c')).toBeUndefined();
    expect(cache.size).toBe(0);
    expect(cache.totalSize).toBe(0);
  });

  it('counts sizes, refuses an entry larger than maxSize, and keeps size and totalSize exact', () => {
    const cache = new Generations<Item>(100, 100);
    cache.set('big', item(cache, 'x', 60_000, 101));
    expect(cache.get('big')).toBeUndefined();
    cache.set('a', item(cache, 'x', 60_000, 60));
    cache.set('b', item(cache, 'y', 60_000, 60)); // 120 > 100: a goes
    expect(cache.totalSize).toBeLessThanOrEqual(100);
    expect(cache.get('b')?.value).toBe('y');
    cache.set('b', item(cache, 'z', 60_000, 10)); // a replacement counts once
    expect(cache.get('b')?.value).toBe('z');
    expect(cache.delete('b')).toBe(true);
    expect(cache.delete('b')).toBe(false);
    cache.clear();
    expect([cache.size, cache.totalSize]).toEqual([0, 0]);
  });

  it('never holds more than maxEntries or maxSize, whatever the operations (model-checked)', () => {
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('set' as const),
        key: fc.integer({ min: 0, max: 30 }),
        size: fc.integer({ min: 1, max: 60 }),
      }),
      fc.record({ kind: fc.constant('get' as const), key: fc.integer({ min: 0, max: 30 }) }),
      fc.record({ kind: fc.constant('delete' as const), key: fc.integer({ min: 0, max: 30 }) }),
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 200 }),
        fc.array(op, { maxLength: 200 }),
        (maxEntries, maxSize, ops) => {
          const cache = new Generations<Item>(maxEntries, maxSize);
          // What a value read back may be: the last one set for that key (never a stale or foreign one).
          const last = new Map<number, number>();
          ops.forEach((step, index) => {
            if (step.kind === 'set') {
              cache.set(`k${step.key}`, item(cache, index, 60_000, step.size));
              // An entry just set is there, unless it alone is larger than maxSize
              expect(cache.get(`k${step.key}`)?.value).toBe(step.size <= maxSize ? index : undefined);
              if (step.size <= maxSize) last.set(step.key, index);
              else last.delete(step.key);
            } else if (step.kind === 'get') {
              const value = cache.get(`k${step.key}`)?.value;
              if (value !== undefined) expect(value).toBe(last.get(step.key));
            } else {
              cache.delete(`k${step.key}`);
              last.delete(step.key);
            }
            expect(cache.size).toBeLessThanOrEqual(maxEntries);
            expect(cache.totalSize).toBeLessThanOrEqual(maxSize);
            expect(cache.totalSize).toBeGreaterThanOrEqual(0);
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it('setAbsent after a read that found nothing: the same as set whatever happened in between (model-checked)', () => {
    // A write that skips looking for its key must never leave a second copy or a stale value: every
    // read gives the last value written, and a deleted key reads as absent.
    const op = fc.oneof(
      fc.record({ kind: fc.constant('probe' as const), key: fc.integer({ min: 0, max: 12 }) }),
      fc.record({
        kind: fc.constant('setAbsent' as const),
        key: fc.integer({ min: 0, max: 12 }),
        size: fc.integer({ min: 1, max: 40 }),
      }),
      fc.record({
        kind: fc.constant('set' as const),
        key: fc.integer({ min: 0, max: 12 }),
        size: fc.integer({ min: 1, max: 40 }),
      }),
      fc.record({ kind: fc.constant('get' as const), key: fc.integer({ min: 0, max: 12 }) }),
      fc.record({ kind: fc.constant('delete' as const), key: fc.integer({ min: 0, max: 12 }) }),
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 120 }),
        fc.array(op, { maxLength: 200 }),
        (maxEntries, maxSize, ops) => {
          const cache = new Generations<Item>(maxEntries, maxSize);
          const last = new Map<number, number>();
          // The version each key was last read absent at (what the guard carries to its write).
          const absentAt = new Map<number, number>();
          ops.forEach((step, index) => {
            const key = `k${step.key}`;
            if (step.kind === 'probe') {
              const value = cache.get(key)?.value;
              if (value === undefined) absentAt.set(step.key, cache.version);
              else expect(value).toBe(last.get(step.key));
            } else if (step.kind === 'set' || step.kind === 'setAbsent') {
              const entry = item(cache, index, 60_000, step.size);
              if (step.kind === 'set') cache.set(key, entry);
              else cache.setAbsent(key, entry, absentAt.get(step.key) ?? -1);
              expect(cache.get(key)?.value).toBe(step.size <= maxSize ? index : undefined);
              if (step.size <= maxSize) last.set(step.key, index);
              else last.delete(step.key);
            } else if (step.kind === 'get') {
              const value = cache.get(key)?.value;
              if (value !== undefined) expect(value).toBe(last.get(step.key));
            } else {
              cache.delete(key);
              last.delete(step.key);
              expect(cache.get(key)).toBeUndefined();
            }
            expect(cache.size).toBeLessThanOrEqual(maxEntries);
            expect(cache.totalSize).toBeLessThanOrEqual(maxSize);
            expect(cache.totalSize).toBeGreaterThanOrEqual(0);
          });
          // Emptied key by key, the counts come back to exactly zero: no copy was left behind.
          for (let key = 0; key <= 12; key += 1) cache.delete(`k${key}`);
          expect([cache.size, cache.totalSize]).toEqual([0, 0]);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('setAbsent with the version of a read that found nothing, nothing changed since: no lookup, the entry is there', () => {
    const cache = new Generations<Item>(4, 1_000);
    expect(cache.get('a')).toBeUndefined();
    const version = cache.version;
    cache.setAbsent('a', item(cache, 'A', 60_000, 1), version);
    expect(cache.version).not.toBe(version);
    expect(cache.get('a')?.value).toBe('A');
    // A stale version (the store changed since): a full set, which replaces rather than duplicates.
    cache.setAbsent('a', item(cache, 'B', 60_000, 1), version);
    expect([cache.get('a')?.value, cache.size, cache.totalSize]).toEqual(['B', 1, 1]);
  });
});
