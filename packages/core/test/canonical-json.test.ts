import { createHash } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import {
  callerScope,
  callerTag,
  callKey,
  canonicalJson,
  defineTool,
  ok,
  type ToolContext,
  type ToolMiddleware,
} from '../src/index.js';
import { expectFailure, serveTools } from '../src/testing.js';

describe('canonicalJson', () => {
  it('sorts keys at every depth so equal values give equal text', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: 'x' } })).toBe(
      '{"a":{"c":"x","d":[3,{"y":2,"z":1}]},"b":1}',
    );
    expect(canonicalJson({ x: 1, y: 2 })).toBe(canonicalJson({ y: 2, x: 1 }));
  });

  it('drops undefined members and writes non-finite numbers as null, like JSON', () => {
    expect(canonicalJson({ a: undefined, b: Number.NaN, c: [undefined] })).toBe('{"b":null,"c":[null]}');
  });

  it('uses toJSON (dates) and writes bigints as strings', () => {
    expect(canonicalJson({ at: new Date('2026-01-02T03:04:05.000Z'), n: 10n })).toBe(
      '{"at":"2026-01-02T03:04:05.000Z","n":"10"}',
    );
  });

  it('refuses a Map, a Set, a WeakMap or a WeakSet at any depth: JSON would write each as {}, one key for different values', () => {
    // Two bindings that differ only in a Map's entries would otherwise give one cache key.
    expect(JSON.stringify({ tenant: new Map([['id', 'a']]) })).toBe(
      JSON.stringify({ tenant: new Map([['id', 'b']]) }),
    );
    for (const value of [
      new Map([['id', 'a']]),
      { tenant: new Set(['a']) },
      [1, { deep: [new WeakMap()] }],
      { z: 1, a: new WeakSet() },
    ]) {
      expect(() => canonicalJson(value)).toThrow(TypeError);
    }
    expect(() => canonicalJson({ tenant: new Map() })).toThrow('cannot serialise a Map');
    expect(() => canonicalJson([new Set()])).toThrow('convert it to an array or a plain object first');
    // The plain forms an author converts to are written as usual
    expect(canonicalJson({ tenant: Object.fromEntries(new Map([['id', 'a']])) })).toBe(
      '{"tenant":{"id":"a"}}',
    );
    expect(canonicalJson([...new Set(['b', 'a'])])).toBe('["b","a"]');
  });

  it('refuses a value JSON writes as {} whatever it holds: a RegExp, a class instance with private state', () => {
    class Token {
      readonly #secret: string;
      constructor(secret: string) {
        this.#secret = secret;
      }
      get length(): number {
        return this.#secret.length;
      }
    }
    // Two different arguments a transform made (`z.string().transform((s) => new RegExp(s))`) gave the
    // same key ({}), so a cached answer for one was the answer for the other.
    for (const value of [/a/, { pattern: /b/g }, new Token('x'), [new Error('boom')], new ArrayBuffer(4)]) {
      expect(() => canonicalJson(value)).toThrow(TypeError);
    }
    expect(() => canonicalJson({ pattern: /a/ })).toThrow('cannot serialise a RegExp');
    expect(() => canonicalJson(new Token('y'))).toThrow('an instance of Token with no enumerable field');
    // What stays written: a class with fields of its own, one with toJSON, empty plain objects (also of
    // another realm and without a prototype), and a Date.
    class Money {
      constructor(
        readonly amount: number,
        readonly currency: string,
      ) {}
    }
    expect(canonicalJson(new Money(5, 'EUR'))).toBe('{"amount":5,"currency":"EUR"}');
    expect(canonicalJson({ a: {}, b: Object.create(null), c: runInNewContext('({})') })).toBe(
      '{"a":{},"b":{},"c":{}}',
    );
    expect(canonicalJson(new URL('https://example.com/x'))).toBe('"https://example.com/x"');
    expect(canonicalJson(new Date(0))).toBe('"1970-01-01T00:00:00.000Z"');
  });

  it('escapes keys and strings as JSON does', () => {
    expect(canonicalJson({ 'a"b': 'line\nbreak' })).toBe('{"a\\"b":"line\\nbreak"}');
  });

  it('throws on a cycle but accepts a shared (non-cyclic) reference', () => {
    const shared = { v: 1 };
    expect(canonicalJson({ a: shared, b: shared })).toBe('{"a":{"v":1},"b":{"v":1}}');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow('cyclic');
  });

  it('finds a cycle however deep it starts, and accepts deep values and shared references below it', () => {
    // 100 levels of nesting, a cycle at the bottom (a loop through three objects)
    const root: Record<string, unknown> = {};
    let node = root;
    for (let i = 0; i < 100; i += 1) {
      const child: Record<string, unknown> = {};
      node.n = child;
      node = child;
    }
    const a: Record<string, unknown> = { name: 'a' };
    const b: Record<string, unknown> = { name: 'b', next: a };
    a.next = { c: [b] };
    node.loop = a;
    expect(() => canonicalJson(root)).toThrow('cyclic');
    // The same depth without the cycle, with one object referenced twice on different branches
    const shared = { v: [1, 2] };
    node.loop = { left: shared, right: [shared, { shared }] };
    const text = canonicalJson(root);
    expect(text).toBe(JSON.stringify(root));
    // An array that contains itself, below the depth where tracking starts and above it
    const list: unknown[] = [1];
    list.push(list);
    expect(() => canonicalJson(list)).toThrow('cyclic');
    expect(() => canonicalJson({ deep: root, list })).toThrow('cyclic');
  });

  it('gives the text JSON.stringify gives for values whose keys are already sorted', () => {
    const values: unknown[] = [
      { a: 1, b: 'two', c: [true, false, null], d: { e: 'f' } },
      ['x', { y: 'z' }, [], {}],
      'plain',
      42,
      { é: 'unicode', '\u2028': 'line separator \u2028' },
    ];
    for (const value of values) expect(canonicalJson(value)).toBe(JSON.stringify(value));
  });

  it('equals an independent reference writer for any JSON value', () => {
    // Keys sorted by code unit at every depth, written by hand: no JSON.stringify of objects.
    const reference = (value: unknown): string => {
      if (Array.isArray(value)) return `[${value.map(reference).join(',')}]`;
      if (typeof value !== 'object' || value === null) return JSON.stringify(value);
      const record = value as Record<string, unknown>;
      return `{${Object.keys(record)
        .sort()
        .map((key) => `${JSON.stringify(key)}:${reference(record[key])}`)
        .join(',')}}`;
    };
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(canonicalJson(value)).toBe(reference(value));
      }),
      { numRuns: 1000 },
    );
    // Unsorted, integer-like and nested keys: the fast path must not take them as sorted
    expect(canonicalJson({ b: 1, a: 2 })).toBe('{"a":2,"b":1}');
    expect(canonicalJson({ 10: 'x', 9: 'y', a: { d: 1, c: 2 } })).toBe(
      '{"10":"x","9":"y","a":{"c":2,"d":1}}',
    );
    expect(canonicalJson([{ z: [{ y: 1, x: 2 }] }])).toBe('[{"z":[{"x":2,"y":1}]}]');
    expect(canonicalJson(Object.assign(Object.create({ inherited: 1 }), { own: 2 }))).toBe('{"own":2}');
  });
});

describe('callKey and callerScope', () => {
  it('are exactly the canonical JSON of their parts (keys stored before this release stay valid)', () => {
    const caller = { id: 'client:portal#"quoted"\\', kind: 'client' as const };
    for (const bindings of [
      Object.freeze({}),
      Object.freeze({ z: 1, customerId: 42, nested: { b: 2, a: 1 } }),
    ]) {
      for (const args of [
        {},
        { q: 'v1' },
        { status: 'open', days: 30, tags: ['b', 'a'], range: { to: 2, from: 1 } },
      ]) {
        const parts = { caller, bindings, toolName: 'search.orders', args };
        expect(callKey(parts)).toBe(canonicalJson([caller.id, bindings, 'search.orders', args]));
        expect(callerScope(parts)).toBe(canonicalJson([caller.id, bindings]));
      }
    }
  });

  it('callerTag is a short digest of callerScope: one per caller and bindings, never holding a brace', () => {
    const bound = (id: string, bindings: Record<string, unknown>) => ({
      caller: { id, kind: 'client' as const },
      bindings: Object.freeze(bindings),
    });
    // A caller id crafted to close a hash tag early, and one bound customer against another.
    const parts = [
      bound('client:a}', {}),
      bound('client:a', {}),
      bound('client:a', { customerId: 'C-1' }),
      bound('client:a', { customerId: 'C-2' }),
    ];
    const tags = parts.map((part) => callerTag(part));
    expect(new Set(tags).size).toBe(parts.length);
    for (const [i, tag] of tags.entries()) {
      expect(tag).toMatch(/^[A-Za-z0-9_-]{22}$/);
      expect(tag).toBe(createHash('sha256').update(callerScope(parts[i]!)).digest('base64url').slice(0, 22));
      // The same caller again (a new context object) gets the same tag.
      expect(callerTag(bound(parts[i]!.caller.id, { ...parts[i]!.bindings }))).toBe(tag);
    }
  });

  it('callerTag keeps no long scope alive: callers with 16 kB ids cost the heap nothing once tagged', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const heap = (): number => {
      gc();
      gc();
      return process.memoryUsage().heapUsed;
    };
    const padding = 'x'.repeat(16_000);
    const before = heap();
    const seen = new Set<string>();
    for (let i = 0; i < 3000; i += 1) {
      // A subject as long as a 16 KiB token allows, distinct per caller (flat strings, as parsed JSON gives).
      const id = `sub:https://issuer|${i}-${padding}`.split('').join('');
      seen.add(callerTag({ caller: { id, kind: 'subject' }, bindings: Object.freeze({}) }));
    }
    expect(seen.size).toBe(3000);
    // Held as cache keys, the scopes were 48 MB; tags alone are a few hundred kB.
    expect(heap() - before).toBeLessThan(8 * 2 ** 20);
  });
});

describe('callerScope of a call that binds nothing (core shares one frozen bindings object)', () => {
  it('is the canonical JSON of the id and {}, whoever called before', async () => {
    const seen: { ctx: ToolContext; scope: string }[] = [];
    // The scope as a policy reads it, while the call runs (the order calls arrive in matters).
    const recorder: ToolMiddleware = (ctx, next) => {
      seen.push({ ctx, scope: callerScope(ctx) });
      return next();
    };
    const echo = defineTool({ name: 'echo', description: 'Echo.', input: {}, handler: () => ok({}) });
    const ids = ['anonymous', 'sub:https://issuer.example|"quoted"\\', 'sub:|\u{1F600}\uD800', 'local'];
    const clients = [];
    for (const id of ids) {
      clients.push(
        await serveTools([echo], { middleware: [recorder], identify: () => ({ id, kind: 'subject' }) }),
      );
    }
    // Alternating callers, and the same caller twice in a row: each scope is its own caller's.
    for (const index of [0, 1, 1, 2, 0, 3, 3, 1]) await clients[index]!.callTool('echo', {});
    for (const client of clients) await client.close();
    expect(seen.map(({ ctx }) => ctx.caller.id)).toEqual([0, 1, 1, 2, 0, 3, 3, 1].map((index) => ids[index]));
    for (const { ctx, scope } of seen) {
      expect(Object.keys(ctx.bindings)).toEqual([]);
      expect(scope).toBe(canonicalJson([ctx.caller.id, {}]));
      expect(callerScope({ caller: ctx.caller, bindings: {} })).toBe(scope);
    }
    expect(new Set(seen.map(({ scope }) => scope)).size).toBe(ids.length);
  });
});

describe('a key derived from bindings that hold a Map', () => {
  it('fails the call closed (internal error, incident id) instead of giving two tenants one key', async () => {
    const keys: string[] = [];
    const keyed: ToolMiddleware = (ctx, next) => {
      keys.push(callKey(ctx));
      return next();
    };
    let runs = 0;
    const tool = defineTool({
      name: 'tenant_report',
      description: 'Report.',
      input: { tenant: z.string() },
      bind: (request) => ({ settings: new Map([['request', String(request.id)]]) }),
      handler: () => {
        runs += 1;
        return ok({ done: true });
      },
    });
    const client = await serveTools([tool], { middleware: [keyed] });
    try {
      for (const tenant of ['acme', 'globex']) {
        const failure = expectFailure(await client.callTool('tenant_report', { tenant }));
        expect(failure.error).toBe('internal');
        expect(failure.incidentId).toMatch(/\S/);
        expect(JSON.stringify(failure)).not.toContain('Map');
      }
    } finally {
      await client.close();
    }
    expect(keys).toEqual([]);
    expect(runs).toBe(0);
  });
});
