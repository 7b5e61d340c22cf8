// deleteIfEquals: a release that deletes only its own claim. A policy's release may land after its claim
// expired and another call claimed the key (a partition that heals, a lost reply): a plain delete would
// then remove the other call's claim, and a third call would run beside it. deleteIfEquals deletes the
// key only while it holds exactly the value given, in one step, and leaves anything else where it is.
import { describe, expect, it } from 'vitest';
import { boundStore, createMemoryStore, type KeyValueStore, limitStore } from '../src/index.js';

/** A value that makes `key`'s entry count exactly `bytes` (2 per UTF-16 code unit of key and value). */
const sized = (key: string, bytes: number, fill = 'v'): string => fill.repeat(bytes / 2 - key.length);

describe('createMemoryStore: deleteIfEquals', () => {
  it('deletes a key that holds exactly the value given, and says so', async () => {
    const store = createMemoryStore();
    await store.set('{a}:claim', 'mine', 60_000);
    expect(await store.deleteIfEquals!('{a}:claim', 'mine')).toBe(true);
    expect(await store.get('{a}:claim')).toBeUndefined();
    // The key is free again: a new claim is won.
    expect(await store.setIfAbsent('{a}:claim', 'next', 60_000)).toBe(true);
  });

  it('leaves a key that holds another value as it is (its value and its expiry)', async () => {
    let time = 1_000_000;
    const store = createMemoryStore({ now: () => time });
    await store.set('{a}:claim', 'theirs', 500);
    expect(await store.deleteIfEquals!('{a}:claim', 'mine')).toBe(false);
    // A prefix, a longer value, another case: none is the value held.
    expect(await store.deleteIfEquals!('{a}:claim', 'their')).toBe(false);
    expect(await store.deleteIfEquals!('{a}:claim', 'theirs ')).toBe(false);
    expect(await store.deleteIfEquals!('{a}:claim', 'THEIRS')).toBe(false);
    expect(await store.get('{a}:claim')).toBe('theirs');
    time += 499;
    expect(await store.get('{a}:claim')).toBe('theirs');
    time += 1;
    expect(await store.get('{a}:claim')).toBeUndefined();
  });

  it('answers false for a key that is absent, or whose value expired (even when it was the value given)', async () => {
    let time = 1_000_000;
    const store = createMemoryStore({ now: () => time });
    expect(await store.deleteIfEquals!('{a}:never', 'mine')).toBe(false);
    await store.set('{a}:claim', 'mine', 100);
    time += 100;
    expect(await store.deleteIfEquals!('{a}:claim', 'mine')).toBe(false);
    // Another call claims the key once it expired: the late release leaves that claim in place.
    expect(await store.setIfAbsent('{a}:claim', 'theirs', 60_000)).toBe(true);
    expect(await store.deleteIfEquals!('{a}:claim', 'mine')).toBe(false);
    expect(await store.get('{a}:claim')).toBe('theirs');
  });

  it('frees the bytes and the entry of what it deleted, and nothing of what it left', async () => {
    const store = createMemoryStore({ maxBytes: 200, maxEntriesPerScope: 2 });
    await store.set('{a}:1', sized('{a}:1', 100), 60_000);
    await store.set('{a}:2', sized('{a}:2', 100), 60_000);
    // Full by both bytes and the scope's entries.
    await expect(store.setIfAbsent('{b}:1', '', 60_000)).rejects.toMatchObject({ reason: 'store' });
    await expect(store.setIfAbsent('{a}:3', '', 60_000)).rejects.toMatchObject({ reason: 'scope' });
    // A value that is not the one held frees nothing.
    expect(await store.deleteIfEquals!('{a}:1', sized('{a}:1', 100, 'w'))).toBe(false);
    await expect(store.setIfAbsent('{b}:1', '', 60_000)).rejects.toMatchObject({ reason: 'store' });
    // The value held: its 100 bytes and its place in the scope are free again, exactly.
    expect(await store.deleteIfEquals!('{a}:1', sized('{a}:1', 100))).toBe(true);
    expect(await store.setIfAbsent('{a}:3', sized('{a}:3', 100), 60_000)).toBe(true);
    await expect(store.setIfAbsent('{b}:1', '', 60_000)).rejects.toMatchObject({ reason: 'store' });
    expect(await store.deleteIfEquals!('{a}:3', sized('{a}:3', 100))).toBe(true);
    expect(await store.deleteIfEquals!('{a}:2', sized('{a}:2', 100))).toBe(true);
    expect(await store.setIfAbsent('{b}:1', sized('{b}:1', 200), 60_000)).toBe(true);
  });

  it('refuses a key or an expected value that is not a string, and an aborted signal, changing nothing', async () => {
    const store = createMemoryStore();
    await store.set('{a}:claim', 'mine', 60_000);
    await expect(store.deleteIfEquals!('{a}:claim', 42 as never)).rejects.toThrow(
      new TypeError('KeyValueStore: keys and values must be strings'),
    );
    await expect(store.deleteIfEquals!(42 as never, 'mine')).rejects.toThrow(TypeError);
    await expect(
      store.deleteIfEquals!('{a}:claim', 'mine', { signal: AbortSignal.abort(new Error('gone')) }),
    ).rejects.toThrow('gone');
    expect(await store.get('{a}:claim')).toBe('mine');
  });
});

describe('store wrappers pass deleteIfEquals through, only when the store has it', () => {
  /** A store of another kind: the four required operations and no deleteIfEquals. */
  const withoutIt = (): KeyValueStore => {
    const { deleteIfEquals: _compareAndDelete, ...plain } = createMemoryStore();
    return plain;
  };

  it('boundStore', async () => {
    const bounded = boundStore(createMemoryStore(), 200, 'test');
    await bounded.set('k', 'mine', 60_000);
    expect(await bounded.deleteIfEquals!('k', 'theirs')).toBe(false);
    expect(await bounded.get('k')).toBe('mine');
    expect(await bounded.deleteIfEquals!('k', 'mine', new AbortController().signal)).toBe(true);
    expect(await bounded.get('k')).toBeUndefined();
    await expect(bounded.deleteIfEquals!('k', 'mine', AbortSignal.abort(new Error('gone')))).rejects.toThrow(
      'gone',
    );
    expect(boundStore(withoutIt(), 200, 'test').deleteIfEquals).toBeUndefined();
  });

  it('boundStore bounds it by its time limit like every operation', async () => {
    const hanging: KeyValueStore = {
      ...withoutIt(),
      deleteIfEquals: () => new Promise<never>(() => {}),
    };
    const failure = await boundStore(hanging, 30, 'idempotency').deleteIfEquals!('k', 'v').catch(
      (error: unknown) => error,
    );
    expect(failure).toMatchObject({
      name: 'TimeoutError',
      message: 'idempotency: the store did not answer within 30 ms',
    });
  });

  it('limitStore', async () => {
    const limited = limitStore(createMemoryStore(), { timeoutMs: 200 });
    await limited.set('k', 'mine', 60_000);
    expect(await limited.deleteIfEquals!('k', 'theirs')).toBe(false);
    expect(await limited.deleteIfEquals!('k', 'mine')).toBe(true);
    expect(await limited.get('k')).toBeUndefined();
    expect(limitStore(withoutIt(), { timeoutMs: 200 }).deleteIfEquals).toBeUndefined();
  });
});
