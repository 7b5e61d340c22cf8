import { describe, expect, it } from 'vitest';
import { createMemoryStore, isStoreFullError, StoreFullError } from '../src/index.js';

describe('createMemoryStore', () => {
  it('setIfAbsent stores once until the entry expires', async () => {
    let clock = 1000;
    const store = createMemoryStore({ now: () => clock });
    expect(await store.setIfAbsent('k', 'first', 100)).toBe(true);
    expect(await store.setIfAbsent('k', 'second', 100)).toBe(false);
    expect(await store.get('k')).toBe('first');
    clock += 100;
    expect(await store.get('k')).toBeUndefined();
    expect(await store.setIfAbsent('k', 'third', 100)).toBe(true);
    expect(await store.get('k')).toBe('third');
  });

  it('set replaces, delete says whether something was there', async () => {
    const store = createMemoryStore();
    await store.set('k', 'a', 1000);
    await store.set('k', 'b', 1000);
    expect(await store.get('k')).toBe('b');
    expect(await store.delete('k')).toBe(true);
    expect(await store.delete('k')).toBe(false);
  });

  it('refuses a ttl that is not a positive integer and follows an aborted signal', async () => {
    const store = createMemoryStore();
    await expect(store.set('k', 'v', 0)).rejects.toThrow('ttlMs must be a positive integer');
    await expect(store.set('k', 'v', 1.5)).rejects.toThrow('ttlMs must be a positive integer');
    await expect(store.get('k', { signal: AbortSignal.abort(new Error('gone')) })).rejects.toThrow('gone');
  });

  it('refuses a new key past maxEntriesPerScope, never evicting: other scopes and replacements go on', async () => {
    const store = createMemoryStore({ maxEntriesPerScope: 2 });
    await store.set('idem:{alice}:1', 'a1', 60_000);
    expect(await store.setIfAbsent('confirm:used:{alice}:n', 'a2', 60_000)).toBe(true);
    const refused = store.setIfAbsent('idem:{alice}:3', 'a3', 60_000);
    await expect(refused).rejects.toThrow(StoreFullError);
    await expect(refused).rejects.toMatchObject({
      name: 'StoreFullError',
      reason: 'scope',
      limit: 2,
      message: 'KeyValueStore: a new key was refused: its scope holds maxEntriesPerScope (2) live entries',
    });
    await expect(store.set('idem:{alice}:3', 'a3', 60_000)).rejects.toMatchObject({ reason: 'scope' });
    // Replacing a held key is always allowed; a held key answers setIfAbsent false, not a refusal.
    await store.set('idem:{alice}:1', 'a1 again', 60_000);
    expect(await store.setIfAbsent('confirm:used:{alice}:n', 'other', 60_000)).toBe(false);
    // Another scope has room of its own; the tag is the text up to the first '}' after the first '{'.
    await store.set('idem:{bob}:1', 'b1', 60_000);
    await store.set('idem:{bob}:{alice}', 'b2', 60_000);
    await expect(store.set('idem:{bob}:3', 'b3', 60_000)).rejects.toMatchObject({ reason: 'scope' });
    expect(
      await Promise.all(
        [
          'idem:{alice}:1',
          'confirm:used:{alice}:n',
          'idem:{alice}:3',
          'idem:{bob}:1',
          'idem:{bob}:{alice}',
        ].map((key) => store.get(key)),
      ),
    ).toEqual(['a1 again', 'a2', undefined, 'b1', 'b2']);
  });

  it('keys without a tag, or with an empty or unclosed one, share one scope', async () => {
    const store = createMemoryStore({ maxEntriesPerScope: 3 });
    await store.set('plain', '1', 60_000);
    await store.set('k:{}:x', '2', 60_000);
    await store.set('k:}{x', '3', 60_000);
    await expect(store.set('k:{:x', '4', 60_000)).rejects.toMatchObject({ reason: 'scope' });
    await store.set('k:{x}', 'tagged', 60_000);
    expect(await store.get('k:{x}')).toBe('tagged');
  });

  it('refuses a new key once the store holds maxEntries live entries, and never names the key', async () => {
    const store = createMemoryStore({ maxEntries: 3 });
    for (const caller of ['a', 'b', 'c']) await store.set(`idem:{${caller}}:1`, caller, 60_000);
    const refused = store.setIfAbsent('idem:{d-secret-digest}:1', 'd', 60_000);
    await expect(refused).rejects.toMatchObject({
      reason: 'store',
      limit: 3,
      message: 'KeyValueStore: a new key was refused: the store holds maxEntries (3) live entries',
    });
    await store.set('idem:{b}:1', 'b again', 60_000);
    expect(
      await Promise.all(['a', 'b', 'c', 'd-secret-digest'].map((caller) => store.get(`idem:{${caller}}:1`))),
    ).toEqual(['a', 'b again', 'c', undefined]);
  });

  it('an expired entry frees its room without being read, in its scope and in the store', async () => {
    let clock = 1000;
    const store = createMemoryStore({ maxEntries: 3, maxEntriesPerScope: 2, now: () => clock });
    await store.set('{a}:short', '1', 100);
    await store.set('{a}:long', '2', 10_000);
    await store.set('{b}:short', '3', 100);
    await expect(store.set('{a}:new', 'x', 100)).rejects.toMatchObject({ reason: 'scope' });
    await expect(store.set('{c}:new', 'x', 100)).rejects.toMatchObject({ reason: 'store' });
    clock += 99;
    await expect(store.set('{c}:new', 'x', 100)).rejects.toMatchObject({ reason: 'store' });
    clock += 1;
    await store.set('{a}:new', 'a', 10_000);
    await store.set('{c}:new', 'c', 10_000);
    await expect(store.set('{d}:new', 'x', 100)).rejects.toMatchObject({ reason: 'store' });
    expect(await store.get('{a}:long')).toBe('2');
  });

  it('counts stay exact through overwrite, delete, expiry on read and close', async () => {
    let clock = 0;
    const store = createMemoryStore({ maxEntriesPerScope: 3, now: () => clock });
    const room = async (): Promise<number> => {
      // How many new keys the scope still takes (each taken one is deleted again).
      let taken = 0;
      for (;;) {
        const key = `{s}:probe${taken}`;
        try {
          await store.set(key, 'p', 60_000);
        } catch (error) {
          expect(error).toMatchObject({ reason: 'scope' });
          for (let i = 0; i < taken; i += 1) expect(await store.delete(`{s}:probe${i}`)).toBe(true);
          return taken;
        }
        taken += 1;
      }
    };
    await store.set('{s}:1', 'v', 60_000);
    await store.set('{s}:2', 'v', 60_000);
    await store.set('{s}:3', 'v', 500);
    expect(await room()).toBe(0);
    await store.set('{s}:1', 'w', 60_000);
    expect(await store.setIfAbsent('{s}:2', 'w', 60_000)).toBe(false);
    expect(await room()).toBe(0);
    expect(await store.delete('{s}:1')).toBe(true);
    expect(await store.delete('{s}:1')).toBe(false);
    expect(await room()).toBe(1);
    clock += 250; // not yet expired: '{s}:3' still counts
    expect(await room()).toBe(1);
    clock += 250;
    expect(await store.get('{s}:3')).toBeUndefined();
    expect(await store.delete('{s}:3')).toBe(false);
    expect(await room()).toBe(2);
    await store.close?.();
    expect(await room()).toBe(3);
  });

  it('a key rewritten thousands of times into ever later expiries still frees its room exactly once', async () => {
    let clock = 0;
    const store = createMemoryStore({ maxEntriesPerScope: 2, now: () => clock });
    for (let i = 1; i <= 5000; i += 1) await store.set('{s}:hot', String(i), 100 * i);
    await store.set('{s}:brief', 'b', 100);
    await expect(store.set('{s}:new', 'n', 100)).rejects.toMatchObject({ reason: 'scope' });
    clock = 100;
    await store.set('{s}:new', 'n', 1000);
    await expect(store.set('{s}:more', 'm', 100)).rejects.toMatchObject({ reason: 'scope' });
    clock = 100 * 5000 - 1;
    expect(await store.get('{s}:hot')).toBe('5000');
    clock += 1;
    await store.set('{s}:one', '1', 100);
    await store.set('{s}:two', '2', 100);
    await expect(store.set('{s}:three', '3', 100)).rejects.toMatchObject({ reason: 'scope' });
  });

  it('matches a reference model through 20,000 random operations (limits, expiry, rewrites, deletes)', async () => {
    // Clock and TTLs in steps of 100 ms, so an entry stops counting exactly when it expires.
    let clock = 0;
    const store = createMemoryStore({ maxEntries: 40, maxEntriesPerScope: 12, now: () => clock });
    const model = new Map<string, { value: string; expiresAt: number; scope: number }>();
    let seed = 7;
    const random = (n: number): number => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) % n;
    };
    const outcomes = { stored: 0, kept: 0, scope: 0, store: 0 };
    for (let step = 0; step < 20_000; step += 1) {
      if (random(10) === 0) clock += 100 * random(4);
      for (const [key, entry] of model) if (entry.expiresAt <= clock) model.delete(key);
      // Scope 0 is the busiest (it meets its own limit), 5 the untagged one.
      const scope = random(3) === 0 ? 0 : random(6);
      const key = scope === 5 ? `plain:${random(20)}` : `k:{s${scope}}:${random(20)}`;
      const op = random(4);
      if (op === 0) {
        expect(await store.get(key)).toBe(model.get(key)?.value);
      } else if (op === 1) {
        expect(await store.delete(key)).toBe(model.delete(key));
      } else {
        const value = String(step);
        const ttlMs = 100 * (1 + random(30));
        const held = model.get(key);
        let expected: keyof typeof outcomes = 'stored';
        if (held !== undefined && op === 2) expected = 'kept';
        else if (held === undefined) {
          const inScope = [...model.values()].filter((entry) => entry.scope === scope).length;
          if (inScope >= 12) expected = 'scope';
          else if (model.size >= 40) expected = 'store';
        }
        const write =
          op === 2 ? store.setIfAbsent(key, value, ttlMs) : store.set(key, value, ttlMs).then(() => true);
        if (expected === 'scope' || expected === 'store') {
          await expect(write).rejects.toMatchObject({ reason: expected });
        } else {
          expect(await write).toBe(expected === 'stored');
          if (expected === 'stored') model.set(key, { value, expiresAt: clock + ttlMs, scope });
        }
        outcomes[expected] += 1;
      }
    }
    for (const [key, entry] of model) expect(await store.get(key)).toBe(entry.value);
    expect(outcomes.scope).toBeGreaterThan(100);
    expect(outcomes.store).toBeGreaterThan(100);
    expect(outcomes.kept).toBeGreaterThan(100);
  });

  it('refuses limits that are not positive integers', () => {
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => createMemoryStore({ maxEntriesPerScope: bad })).toThrow(
        new RangeError('createMemoryStore: maxEntriesPerScope must be a positive integer'),
      );
      expect(() => createMemoryStore({ maxEntries: bad })).toThrow(
        new RangeError('createMemoryStore: maxEntries must be a positive integer'),
      );
    }
  });

  it('isStoreFullError recognises the refusal by its brand, not by name or shape', async () => {
    const store = createMemoryStore({ maxEntriesPerScope: 1 });
    await store.set('{a}:1', 'v', 1000);
    const refusal = await store.set('{a}:2', 'v', 1000).catch((error: unknown) => error);
    expect(isStoreFullError(refusal)).toBe(true);
    expect(isStoreFullError(new StoreFullError('store', 5))).toBe(true);
    const lookalike = Object.assign(new Error('full'), { name: 'StoreFullError', reason: 'scope' });
    expect([isStoreFullError(lookalike), isStoreFullError(undefined), isStoreFullError('full')]).toEqual([
      false,
      false,
      false,
    ]);
  });
});
