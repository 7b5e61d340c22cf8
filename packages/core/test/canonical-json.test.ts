import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../src/index.js';

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
});
