// The memory store bounds the bytes it holds as well as its entries: idempotency keeps results of up to
// 64 Ki characters, so 100,000 entries could hold ~13 GB of strings. Past `maxBytes` (or a scope's
// `maxBytesPerScope`) a write is refused with a StoreFullError, never by evicting a live entry. An entry
// counts 2 bytes per UTF-16 code unit of its key and value.
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import {
  callerTag,
  callKey,
  canonicalJson,
  createMemoryStore,
  defineTool,
  fail,
  isStoreFullError,
  ok,
  StoreFullError,
  type ToolMiddleware,
} from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';

/** A value that makes `key`'s entry count exactly `bytes`. */
const sized = (key: string, bytes: number, fill = 'v'): string => fill.repeat(bytes / 2 - key.length);

describe('createMemoryStore: the byte budget', () => {
  it('refuses a new key past maxBytes, never evicting: a write that reaches it exactly is stored', async () => {
    const store = createMemoryStore({ maxBytes: 200 });
    await store.set('{a}:1', sized('{a}:1', 100), 60_000);
    expect(await store.setIfAbsent('{b}:1', sized('{b}:1', 100), 60_000)).toBe(true);
    const refused = store.setIfAbsent('{c}:secret-digest', '', 60_000);
    await expect(refused).rejects.toThrow(StoreFullError);
    await expect(refused).rejects.toMatchObject({
      name: 'StoreFullError',
      reason: 'store',
      limit: 200,
      message: 'KeyValueStore: a write was refused: the store would hold more than maxBytes (200) bytes',
    });
    await expect(store.set('{c}:1', '', 60_000)).rejects.toMatchObject({ reason: 'store', limit: 200 });
    expect(await Promise.all(['{a}:1', '{b}:1', '{c}:1'].map((key) => store.get(key)))).toEqual([
      sized('{a}:1', 100),
      sized('{b}:1', 100),
      undefined,
    ]);
  });

  it('refuses past maxBytesPerScope in that scope only; untagged keys share one scope', async () => {
    const store = createMemoryStore({ maxBytesPerScope: 100, maxBytes: 1000 });
    await store.set('{a}:1', sized('{a}:1', 50), 60_000);
    await store.set('{a}:2', sized('{a}:2', 50), 60_000);
    const refused = store.setIfAbsent('{a}:3', '', 60_000);
    await expect(refused).rejects.toMatchObject({
      reason: 'scope',
      limit: 100,
      message:
        'KeyValueStore: a write was refused: its scope would hold more than maxBytesPerScope (100) bytes',
    });
    // Another scope has a budget of its own; one value larger than a scope's budget never fits.
    await store.set('{b}:1', sized('{b}:1', 100), 60_000);
    await expect(store.set('{c}:1', sized('{c}:1', 102), 60_000)).rejects.toMatchObject({ reason: 'scope' });
    await store.set('plain', sized('plain', 60), 60_000);
    await expect(store.set('k:{}:x', sized('k:{}:x', 42), 60_000)).rejects.toMatchObject({ reason: 'scope' });
    await store.set('k:{}:x', sized('k:{}:x', 40), 60_000);
    expect(
      await Promise.all(['{a}:1', '{a}:3', '{b}:1', 'plain', 'k:{}:x'].map((k) => store.get(k))),
    ).toEqual([sized('{a}:1', 50), undefined, sized('{b}:1', 100), sized('plain', 60), sized('k:{}:x', 40)]);
  });

  it('an expired entry frees its bytes without being read, in its scope and in the store', async () => {
    let clock = 1000;
    const store = createMemoryStore({ maxBytes: 300, maxBytesPerScope: 200, now: () => clock });
    await store.set('{a}:short', sized('{a}:short', 100), 100);
    await store.set('{a}:long', sized('{a}:long', 100), 10_000);
    await store.set('{b}:short', sized('{b}:short', 100), 100);
    await expect(store.set('{a}:new', 'x', 100)).rejects.toMatchObject({ reason: 'scope', limit: 200 });
    await expect(store.set('{c}:new', 'x', 100)).rejects.toMatchObject({ reason: 'store', limit: 300 });
    clock += 99;
    await expect(store.set('{c}:new', 'x', 100)).rejects.toMatchObject({ reason: 'store', limit: 300 });
    clock += 1;
    await store.set('{a}:new', sized('{a}:new', 100), 10_000);
    await store.set('{c}:new', sized('{c}:new', 100), 10_000);
    await expect(store.set('{d}:new', '', 100)).rejects.toMatchObject({ reason: 'store', limit: 300 });
    expect(await store.get('{a}:long')).toBe(sized('{a}:long', 100));
  });

  it('a held key always takes a value no larger; a larger one only within budget, else it stays as it was', async () => {
    let clock = 0;
    const store = createMemoryStore({ maxBytes: 200, maxBytesPerScope: 150, now: () => clock });
    await store.set('{a}:1', sized('{a}:1', 100), 1000);
    await store.set('{b}:1', sized('{b}:1', 100), 1000);
    // Full: an equal or smaller value is stored, and a held key still answers setIfAbsent false.
    await store.set('{b}:1', sized('{b}:1', 100, 'w'), 1000);
    expect(await store.setIfAbsent('{b}:1', 'x', 1000)).toBe(false);
    await store.set('{a}:1', 'small', 1000);
    // Growing back within the budget is stored; past it (store or scope) refused.
    await store.set('{a}:1', sized('{a}:1', 100), 1000);
    await expect(store.set('{a}:1', sized('{a}:1', 102), 60_000)).rejects.toMatchObject({
      reason: 'store',
      limit: 200,
    });
    expect(await store.delete('{b}:1')).toBe(true);
    await expect(store.set('{a}:1', sized('{a}:1', 152), 60_000)).rejects.toMatchObject({
      reason: 'scope',
      limit: 150,
    });
    // A refused write changed nothing: the old value, and the old expiry.
    expect(await store.get('{a}:1')).toBe(sized('{a}:1', 100));
    clock = 999;
    expect(await store.get('{a}:1')).toBe(sized('{a}:1', 100));
    clock = 1000;
    expect(await store.get('{a}:1')).toBeUndefined();
    await store.set('{a}:2', sized('{a}:2', 150), 1000);
  });

  it('delete, expiry on read, shrinking and close free the bytes exactly', async () => {
    let clock = 0;
    const store = createMemoryStore({ maxBytes: 200, now: () => clock });
    /** Whether a new key of `bytes` fits now (it is removed again). */
    const fits = async (bytes: number): Promise<boolean> => {
      try {
        await store.set('{p}:probe', sized('{p}:probe', bytes), 60_000);
      } catch (error) {
        expect(error).toMatchObject({ reason: 'store', limit: 200 });
        return false;
      }
      expect(await store.delete('{p}:probe')).toBe(true);
      return true;
    };
    await store.set('{a}:1', sized('{a}:1', 100), 60_000);
    await store.set('{b}:1', sized('{b}:1', 80), 250);
    expect([await fits(20), await fits(22)]).toEqual([true, false]);
    await store.set('{a}:1', sized('{a}:1', 40), 60_000);
    expect([await fits(80), await fits(82)]).toEqual([true, false]);
    expect(await store.delete('{a}:1')).toBe(true);
    expect(await store.delete('{a}:1')).toBe(false);
    expect([await fits(120), await fits(122)]).toEqual([true, false]);
    clock += 250;
    expect(await store.get('{b}:1')).toBeUndefined();
    expect([await fits(200), await fits(202)]).toEqual([true, false]);
    await store.set('{a}:1', sized('{a}:1', 200), 60_000);
    await store.close?.();
    expect([await fits(200), await fits(202)]).toEqual([true, false]);
  });

  it('by default a caller echoing 64 Ki-character values fills 8 MiB of its scope, and callers 64 MiB in all', async () => {
    const store = createMemoryStore();
    const value = 'x'.repeat(64 * 1024); // one string shared by every entry: the test holds 64 KiB
    let stored = 0;
    let refusal: unknown;
    const perScope: number[] = [];
    for (let caller = 0; refusal === undefined && caller < 20; caller += 1) {
      let inScope = 0;
      for (let call = 0; call < 100; call += 1) {
        const key = `idem:{c${String(caller).padStart(2, '0')}}:${String(call).padStart(2, '0')}`;
        try {
          await store.set(key, value, 600_000);
        } catch (error) {
          if ((error as StoreFullError).reason === 'store') refusal = error;
          else expect(error).toMatchObject({ reason: 'scope', limit: 8 * 1024 * 1024 });
          break;
        }
        inScope += 1;
        stored += 1;
      }
      perScope.push(inScope);
    }
    // Each entry counts 2 × (14 + 65,536) = 131,100 bytes: 63 fit in 8 MiB, 511 in 64 MiB.
    expect(perScope).toEqual([63, 63, 63, 63, 63, 63, 63, 63, 7]);
    expect(stored).toBe(511);
    expect(refusal).toMatchObject({ reason: 'store', limit: 64 * 1024 * 1024 });
  });

  it('refuses byte limits that are not positive integers', () => {
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => createMemoryStore({ maxBytes: bad })).toThrow(
        new RangeError('createMemoryStore: maxBytes must be a positive integer'),
      );
      expect(() => createMemoryStore({ maxBytesPerScope: bad })).toThrow(
        new RangeError('createMemoryStore: maxBytesPerScope must be a positive integer'),
      );
    }
  });

  it('refuses a value that is not a string, which it could not count, and stays exact', async () => {
    const store = createMemoryStore({ maxBytes: 100 });
    for (const bad of [{ length: -1000 }, 42, undefined]) {
      await expect(store.set('{a}:1', bad as unknown as string, 60_000)).rejects.toThrow(
        new TypeError('KeyValueStore: keys and values must be strings'),
      );
    }
    await store.set('{a}:1', sized('{a}:1', 100), 60_000);
    await expect(store.set('{b}:1', '', 60_000)).rejects.toMatchObject({ reason: 'store', limit: 100 });
  });

  it('matches a reference model through 20,000 random operations (entry and byte limits, expiry, rewrites)', async () => {
    let clock = 0;
    const limits = { maxEntries: 40, maxEntriesPerScope: 12, maxBytes: 1600, maxBytesPerScope: 500 };
    const store = createMemoryStore({ ...limits, now: () => clock });
    const model = new Map<string, { value: string; expiresAt: number; scope: number; bytes: number }>();
    let seed = 11;
    const random = (n: number): number => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) % n;
    };
    const refusals = new Map<number, number>();
    const outcomes = { stored: 0, kept: 0, grown: 0, shrunk: 0 };
    for (let step = 0; step < 20_000; step += 1) {
      if (random(10) === 0) clock += 100 * random(4);
      for (const [key, entry] of model) if (entry.expiresAt <= clock) model.delete(key);
      const scope = random(3) === 0 ? 0 : random(6);
      const key = scope === 5 ? `plain:${random(20)}` : `k:{s${scope}}:${random(20)}`;
      const op = random(4);
      if (op === 0) {
        expect(await store.get(key)).toBe(model.get(key)?.value);
      } else if (op === 1) {
        expect(await store.delete(key)).toBe(model.delete(key));
      } else {
        const value = 'v'.repeat(random(4) === 0 ? random(80) : random(6));
        const bytes = 2 * (key.length + value.length);
        const ttlMs = 100 * (1 + random(30));
        const held = model.get(key);
        const inScope = [...model.values()].filter((entry) => entry.scope === scope);
        const scopeBytes = inScope.reduce((sum, entry) => sum + entry.bytes, 0);
        const storeBytes = [...model.values()].reduce((sum, entry) => sum + entry.bytes, 0);
        const more = bytes - (held?.bytes ?? 0);
        let limit: number | undefined;
        if (held !== undefined && op === 2) limit = undefined;
        else if (held === undefined && inScope.length >= limits.maxEntriesPerScope)
          limit = limits.maxEntriesPerScope;
        else if (held === undefined && model.size >= limits.maxEntries) limit = limits.maxEntries;
        else if (more > 0 && scopeBytes + more > limits.maxBytesPerScope) limit = limits.maxBytesPerScope;
        else if (more > 0 && storeBytes + more > limits.maxBytes) limit = limits.maxBytes;
        const write =
          op === 2 ? store.setIfAbsent(key, value, ttlMs) : store.set(key, value, ttlMs).then(() => true);
        if (limit !== undefined) {
          const reason = limit === limits.maxEntries || limit === limits.maxBytes ? 'store' : 'scope';
          await expect(write).rejects.toMatchObject({ reason, limit });
          refusals.set(limit, (refusals.get(limit) ?? 0) + 1);
        } else if (held !== undefined && op === 2) {
          expect(await write).toBe(false);
          outcomes.kept += 1;
        } else {
          expect(await write).toBe(true);
          model.set(key, { value, expiresAt: clock + ttlMs, scope, bytes });
          if (held === undefined) outcomes.stored += 1;
          else if (more > 0) outcomes.grown += 1;
          else outcomes.shrunk += 1;
        }
      }
    }
    for (const [key, entry] of model) expect(await store.get(key)).toBe(entry.value);
    for (const limit of Object.values(limits)) expect(refusals.get(limit)).toBeGreaterThan(50);
    for (const count of Object.values(outcomes)) expect(count).toBeGreaterThan(100);
  });
});

describe('the byte budget through a real tools/call round trip', () => {
  let clients: TestClient[] = [];
  afterEach(async () => {
    await Promise.all(clients.map((client) => client.close()));
    clients = [];
  });

  it('a policy that keeps each call’s arguments refuses large echoes rate_limited once the budget is spent', async () => {
    // Each 64 Ki-character argument is kept as ~131 KB: two fit in a caller's 300 KB, three in the store.
    const store = createMemoryStore({ maxBytesPerScope: 300_000, maxBytes: 400_000 });
    const ran: string[] = [];
    const keepArgs: ToolMiddleware = async (ctx, next) => {
      const digest = createHash('sha256').update(callKey(ctx)).digest('base64url');
      try {
        await store.setIfAbsent(`kept:{${callerTag(ctx)}}:${digest}`, canonicalJson(ctx.args), 60_000);
      } catch (error) {
        if (!isStoreFullError(error)) throw error;
        return fail('rate_limited', 'The server is keeping too much for you right now.', {
          hint: 'Nothing was done. Retry later.',
          retryable: true,
        });
      }
      return next();
    };
    const echo = defineTool({
      name: 'echo',
      description: 'Echoes a text back by its length.',
      input: { text: z.string() },
      handler: async ({ text }, ctx) => {
        ran.push(`${ctx.caller.id}:${text[0]}`);
        return ok({ length: text.length });
      },
    });
    const as = (sub: string) => ({
      middleware: [keepArgs],
      authInfo: { token: `${sub}-token`, clientId: 'app', scopes: [], extra: { sub } },
    });
    const alice = await serveTools([echo], as('alice'));
    const bob = await serveTools([echo], as('bob'));
    clients.push(alice, bob);
    const text = (letter: string): string => letter.repeat(64 * 1024);
    const refusal = {
      ok: false,
      error: 'rate_limited',
      message: 'The server is keeping too much for you right now.',
      hint: 'Nothing was done. Retry later.',
      retryable: true,
    };
    expect(await alice.callToolJson('echo', { text: text('a') })).toEqual({ ok: true, length: 65_536 });
    expect(await alice.callToolJson('echo', { text: text('b') })).toEqual({ ok: true, length: 65_536 });
    expect(expectFailure(await alice.callTool('echo', { text: text('c') }))).toEqual(refusal);
    expect(await bob.callToolJson('echo', { text: text('d') })).toEqual({ ok: true, length: 65_536 });
    expect(expectFailure(await bob.callTool('echo', { text: text('e') }))).toEqual(refusal);
    // Small calls still fit in what is left.
    expect(await bob.callToolJson('echo', { text: 'f' })).toEqual({ ok: true, length: 1 });
    expect(ran).toEqual(['sub:|alice:a', 'sub:|alice:b', 'sub:|bob:d', 'sub:|bob:f']);
  });
});
