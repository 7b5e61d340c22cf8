import { describe, expect, it } from 'vitest';
import { REDACTED, redactSecrets, redactSecretsInText } from '../src/index.js';

describe('redactSecrets', () => {
  it('replaces values under secret-looking keys at any depth', () => {
    expect(
      redactSecrets({
        user: 'ann',
        password: 'hunter2',
        nested: { 'X-Api-Key': 'abc', list: [{ refreshToken: 't' }, { ok: 'keep' }] },
      }),
    ).toEqual({
      user: 'ann',
      password: REDACTED,
      nested: { 'X-Api-Key': REDACTED, list: [{ refreshToken: REDACTED }, { ok: 'keep' }] },
    });
  });

  it('finds secret patterns inside ordinary values', () => {
    const jwt =
      'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U';
    expect(redactSecretsInText(`Authorization: Bearer abc.def-123`)).toBe(
      `Authorization: Bearer ${REDACTED}`,
    );
    expect(redactSecretsInText(`token ${jwt} end`)).toBe(`token ${REDACTED} end`);
    expect(redactSecretsInText('key AKIAIOSFODNN7EXAMPLE here')).toBe(`key ${REDACTED} here`);
    expect(redactSecretsInText('postgres://app:s3cret@db.internal:5432/orders')).toBe(
      `postgres://${REDACTED}@db.internal:5432/orders`,
    );
    expect(redactSecretsInText('-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----')).toBe(
      REDACTED,
    );
    expect(redactSecretsInText('DB_PASSWORD=hunter2 other=1')).toBe(`DB_PASSWORD=${REDACTED} other=1`);
    expect(redactSecretsInText('use sk-abcdefghijklmnopqrstuvwx now')).toBe(`use ${REDACTED} now`);
  });

  it('leaves ordinary text alone', () => {
    const text = 'Order 4921000012345678 shipped on 2026-11-29. See https://example.com/track?id=7.';
    expect(redactSecretsInText(text)).toBe(text);
  });

  it('keeps a hostile __proto__ key as a key and never touches the prototype', () => {
    const input = JSON.parse('{"__proto__":{"polluted":true,"token":"t"},"a":1}') as Record<string, unknown>;
    const out = redactSecrets(input) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out)).toEqual(['__proto__', 'a']);
    expect(JSON.stringify(out)).toBe('{"__proto__":{"polluted":true,"token":"[REDACTED]"},"a":1}');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('takes configured keys and does not change its input', () => {
    const input = { pin: '1234', password: 'x' };
    expect(redactSecrets(input, { keys: ['pin'] })).toEqual({ pin: REDACTED, password: 'x' });
    expect(input).toEqual({ pin: '1234', password: 'x' });
  });
});
