import { describe, expect, it } from 'vitest';
import { createMemoryStore } from '../src/index.js';

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

  it('keeps at most maxEntries, dropping the oldest writes first', async () => {
    const store = createMemoryStore({ maxEntries: 2 });
    await store.set('a', '1', 1000);
    await store.set('b', '2', 1000);
    await store.set('c', '3', 1000);
    expect([await store.get('a'), await store.get('b'), await store.get('c')]).toEqual([undefined, '2', '3']);
  });

  it('refuses a ttl that is not a positive integer and follows an aborted signal', async () => {
    const store = createMemoryStore();
    await expect(store.set('k', 'v', 0)).rejects.toThrow('ttlMs must be a positive integer');
    await expect(store.set('k', 'v', 1.5)).rejects.toThrow('ttlMs must be a positive integer');
    await expect(store.get('k', { signal: AbortSignal.abort(new Error('gone')) })).rejects.toThrow('gone');
  });

  it('stays exact first-in-first-out through heavy churn: rewrites and deletes among 30,000 writes', async () => {
    const store = createMemoryStore({ maxEntries: 1000 });
    // The reference: a Map in write order, oldest evicted first.
    const model = new Map<string, string>();
    const write = async (key: string, value: string): Promise<void> => {
      await store.set(key, value, 60_000);
      model.delete(key);
      model.set(key, value);
      while (model.size > 1000) model.delete(model.keys().next().value as string);
    };
    for (let i = 0; i < 30_000; i += 1) {
      await write(`k${i}`, String(i));
      // Every 7th write also rewrites an older key (it becomes the newest) and deletes another.
      if (i % 7 === 0 && i >= 500) {
        await write(`k${i - 500}`, `rewritten ${i}`);
        await store.delete(`k${i - 300}`);
        model.delete(`k${i - 300}`);
      }
    }
    for (let i = 0; i < 30_000; i += 1) expect(await store.get(`k${i}`)).toBe(model.get(`k${i}`));
    expect(model.size).toBeGreaterThan(900);
  });
});
