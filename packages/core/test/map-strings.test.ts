import { describe, expect, it } from 'vitest';
import { CIRCULAR, mapStrings, TRUNCATED } from '../src/index.js';

const upper = (s: string): string => s.toUpperCase();

describe('mapStrings', () => {
  it('maps every string in objects and arrays at any depth and keeps other scalars', () => {
    const input = { a: 'x', n: 1, b: true, z: null, list: ['y', 2, { c: 'z' }], deep: { e: { f: 'w' } } };
    expect(mapStrings(input, upper)).toEqual({
      a: 'X',
      n: 1,
      b: true,
      z: null,
      list: ['Y', 2, { c: 'Z' }],
      deep: { e: { f: 'W' } },
    });
    expect(input.a).toBe('x');
  });

  it('keeps a hostile __proto__ key as an own key and never sets the prototype', () => {
    const input = JSON.parse('{"__proto__":{"polluted":"yes"},"ok":"v"}') as object;
    const out = mapStrings(input, upper) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out)).toEqual(['__proto__', 'ok']);
    expect(JSON.stringify(out)).toBe('{"__proto__":{"polluted":"YES"},"ok":"V"}');
    expect((out as { polluted?: unknown }).polluted).toBeUndefined();
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it('bounds cycles and depth', () => {
    const cyclic: Record<string, unknown> = { name: 'a' };
    cyclic.self = cyclic;
    expect(mapStrings(cyclic, upper)).toEqual({ name: 'A', self: CIRCULAR });
    const shared = { s: 'x' };
    expect(mapStrings({ one: shared, two: shared }, upper)).toEqual({ one: { s: 'X' }, two: { s: 'X' } });
    expect(mapStrings({ a: { b: { c: 'd' } } }, upper, { maxDepth: 2 })).toEqual({ a: { b: TRUNCATED } });
  });

  it('turns non-plain values into what JSON would carry, mapped, never raw bytes', () => {
    class Account {
      owner = 'ann';
      #hidden = 'h';
      get hidden(): string {
        return this.#hidden;
      }
    }
    class Money {
      toJSON(): string {
        return 'ten eur';
      }
    }
    const out = mapStrings(
      {
        date: new Date('2026-11-30T10:00:00.000Z'),
        bad: new Date(Number.NaN),
        error: new TypeError('boom'),
        big: 12n,
        bytes: Buffer.from('secret-bytes'),
        map: new Map([['k', 'v']]),
        set: new Set(['s']),
        account: new Account(),
        money: new Money(),
        fn: () => 1,
        sym: Symbol('s'),
      },
      upper,
    );
    expect(out).toEqual({
      date: '2026-11-30T10:00:00.000Z',
      bad: null,
      error: 'TYPEERROR: BOOM',
      big: '12',
      bytes: '[12 bytes]',
      map: [['K', 'V']],
      set: ['S'],
      account: { owner: 'ANN' },
      money: 'TEN EUR',
    });
  });

  it('survives a throwing getter or proxy', () => {
    const hostile = new Proxy(
      {},
      {
        ownKeys() {
          throw new Error('trap');
        },
      },
    );
    const getter = Object.defineProperty({}, 'x', {
      enumerable: true,
      get() {
        throw new Error('getter');
      },
    });
    expect(mapStrings({ hostile, getter, fine: 'f' }, upper)).toEqual({
      hostile: '[Unreadable]',
      getter: '[Unreadable]',
      fine: 'F',
    });
  });

  it('replaces a value wholesale when replaceEntry says so', () => {
    const out = mapStrings({ password: { nested: 'x' }, other: 'y' }, upper, {
      replaceEntry: (key) => (key === 'password' ? '[gone]' : undefined),
    });
    expect(out).toEqual({ password: '[gone]', other: 'Y' });
  });

  it('maps keys only when asked, and a mapped "__proto__" key stays a key', () => {
    const input = JSON.parse('{"__proto__":"p","/srv/app":"x"}') as object;
    expect(Object.keys(mapStrings(input, upper) as object)).toEqual(['__proto__', '/srv/app']);
    const out = mapStrings(input, upper, { mapKey: (key) => key.replace(/\/srv\/\w+/, '[path]') }) as object;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(JSON.stringify(out)).toBe('{"__proto__":"P","[path]":"X"}');
  });

  it('keeps both values when two keys map to one name, however the keys are spelled', () => {
    const hide = (key: string): string => key.replace(/sk_live_\w+/, '[REDACTED]');
    const out = mapStrings(
      {
        sk_live_aaaaaaaaaaaa1: 'drop table orders',
        sk_live_aaaaaaaaaaaa2: 'benign',
        '[REDACTED]': 'literal',
      },
      (text) => text,
      { mapKey: hide },
    );
    expect(out).toEqual({
      '[REDACTED]': 'drop table orders',
      '[REDACTED] (2)': 'benign',
      '[REDACTED] (3)': 'literal',
    });
    // A key spelled like the suffix already given is not overwritten either.
    const spelled = mapStrings(
      { sk_live_a1b2c3d4e5f6: 1, sk_live_b1b2c3d4e5f6: 2, '[REDACTED] (2)': 3 },
      (text) => text,
      {
        mapKey: hide,
      },
    );
    expect(Object.values(spelled as object).sort()).toEqual([1, 2, 3]);
  });

  it('numbers many colliding keys in one pass over them (no rescan per key)', () => {
    const input: Record<string, number> = {};
    // No time bound: renaming that tried every number from 2 again for each key would take minutes on
    // 60,000 keys and outlast the test's timeout, where one pass takes milliseconds.
    for (let index = 0; index < 60_000; index += 1)
      input[`sk_live_key${String(index).padStart(8, '0')}`] = index;
    const out = mapStrings(input, (text) => text, { mapKey: () => '[REDACTED]' }) as Record<string, number>;
    expect(Object.keys(out)).toHaveLength(60_000);
    expect(out['[REDACTED] (60000)']).toBe(59_999);
  });
});
