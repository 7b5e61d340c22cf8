// Secrets named beside their values: name/value objects (Kubernetes env, HAR and fetch header lists,
// AWS SSM and CloudFormation parameters, Postman variables) and flat arrays of header names and values
// (Node's `rawHeaders`, a Map's entries). Tables of what the walk redacts and what it leaves, inputs a
// per-key rescan would not get through, and a real tools/call whose failure `_meta` carries them: the
// boundary's redaction (core alone) must leave no `hunter2` for the model.
import { afterEach, describe, expect, it } from 'vitest';
import {
  createSecretPairTests,
  createSecretRedactor,
  isNameFieldKey,
  REDACTED,
  redactSecrets,
} from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';
import { upstreamFailure } from './fixtures/upstream-failure.js';

const R = REDACTED;
let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

describe('an object naming a secret beside its value', () => {
  it.each<[string, unknown, unknown]>([
    [
      'a Kubernetes env list',
      [
        { name: 'DB_PASSWORD', value: 'hunter2-k8s' },
        { name: 'STRIPE_SECRET_KEY', value: 'hunter2-stripe' },
        { name: 'LOG_LEVEL', value: 'debug' },
      ],
      [
        { name: 'DB_PASSWORD', value: R },
        { name: 'STRIPE_SECRET_KEY', value: R },
        { name: 'LOG_LEVEL', value: 'debug' },
      ],
    ],
    [
      'HAR request headers',
      {
        headers: [
          { name: 'Authorization', value: 'Basic aHVudGVyMg' },
          { name: 'Cookie', value: 'sid=1' },
        ],
      },
      {
        headers: [
          { name: 'Authorization', value: R },
          { name: 'Cookie', value: R },
        ],
      },
    ],
    [
      'AWS SSM parameters: a path whose last segment names a secret',
      {
        Parameters: [
          { Name: '/prod/db/password', Value: 'hunter2' },
          { Name: '/prod/db/pass', Value: 'x' },
        ],
      },
      {
        Parameters: [
          { Name: '/prod/db/password', Value: R },
          { Name: '/prod/db/pass', Value: R },
        ],
      },
    ],
    [
      'CloudFormation parameters',
      [
        { ParameterKey: 'DbPassword', ParameterValue: 'hunter2' },
        { ParameterKey: 'Env', ParameterValue: 'prod' },
      ],
      [
        { ParameterKey: 'DbPassword', ParameterValue: R },
        { ParameterKey: 'Env', ParameterValue: 'prod' },
      ],
    ],
    [
      'Postman variables',
      {
        values: [
          { key: 'api_key', value: 'hunter2', enabled: true },
          { key: 'host', value: 'h' },
        ],
      },
      {
        values: [
          { key: 'api_key', value: R, enabled: true },
          { key: 'host', value: 'h' },
        ],
      },
    ],
    [
      'a Cognito attribute',
      { Name: 'custom:api_key', Value: 'hunter2' },
      { Name: 'custom:api_key', Value: R },
    ],
    [
      'data beside a name, sorted first',
      { data: 'hunter2', name: 'GITHUB_TOKEN' },
      { data: R, name: 'GITHUB_TOKEN' },
    ],
    [
      'a value that is not a string goes whole, as under a secret key',
      { name: 'TLS_PRIVATE_KEY', value: { pem: 'x' }, pin: undefined },
      { name: 'TLS_PRIVATE_KEY', value: R },
    ],
    ['a number', { name: 'PIN', value: 4711 }, { name: 'PIN', value: R }],
    [
      'full-width field names, as the key matcher folds them',
      { ｎａｍｅ: 'db_password', ｖａｌｕｅ: 'hunter2' },
      { ｎａｍｅ: 'db_password', ｖａｌｕｅ: R },
    ],
    [
      'name fields spelled otherwise',
      [
        { header_name: 'X-Api-Key', val: 'h' },
        { 'Field-Name': 'client.secret', Data: 'h' },
        { VARIABLE: 'SMTP_PASS', VALUE: 'h' },
      ],
      [
        { header_name: 'X-Api-Key', val: R },
        { 'Field-Name': 'client.secret', Data: R },
        { VARIABLE: 'SMTP_PASS', VALUE: R },
      ],
    ],
    [
      // Decided: read as `{ 'password-reset': 'enabled' }` is read (a secret key by the matcher).
      'a setting whose name holds a secret word, as the same key would be',
      { name: 'password-reset', value: 'enabled' },
      { name: 'password-reset', value: R },
    ],
    [
      'several value fields',
      { name: 'db_password', value: 'a', SecretString: 'b', secretValue: 'c', note: 'rotated' },
      { name: 'db_password', value: R, SecretString: R, secretValue: R, note: 'rotated' },
    ],
  ])('%s', (_name, value, expected) => {
    expect(redactSecrets(value)).toEqual(expected);
    expect(redactSecrets(expected)).toEqual(expected);
  });

  it.each<[string, unknown]>([
    ['a setting that names no secret', { name: 'LOG_LEVEL', value: 'debug' }],
    ['a menu option: prose is no key name', { name: 'Reset password', value: 'reset' }],
    [
      'a label with a space',
      [
        { name: 'Forgot password?', value: 'forgot' },
        { name: 'API token', value: 'tok' },
      ],
    ],
    [
      'a schema naming a secret field, with no value field',
      { name: 'password', type: 'string', description: 'The user password', required: true },
    ],
    [
      'a Kubernetes reference (valueFrom is a reference, its key a name)',
      {
        name: 'DB_PASSWORD',
        valueFrom: { configMapKeyRef: { name: 'db', key: 'password', optional: false } },
      },
    ],
    ['a null value', { name: 'token', value: null }],
    ['a validation error', { field: 'password', message: 'must be 8 characters or more' }],
    [
      'an OpenAPI parameter',
      { name: 'Authorization', in: 'header', required: true, schema: { type: 'string' } },
    ],
    ['a path whose last segment names no secret', { Name: '/prod/db/host', Value: 'db.internal' }],
    ['a name that is not a string', { name: ['password'], value: 'x' }],
    ['a secret word in a field that is no name field', { label: 'password', value: 'x', path: '/secret' }],
  ])('%s stays', (_name, value) => {
    expect(redactSecrets(value)).toEqual(value);
  });

  it('the caller’s own replaceEntry decides first; the name/value rule reads what it leaves', () => {
    const seen: string[] = [];
    const redact = createSecretRedactor({
      replaceEntry: (key) => (key === 'note' ? '[note]' : undefined),
      onSplitSecret: (name) => seen.push(name),
    });
    expect(redact({ name: 'DB_PASSWORD', value: 'hunter2', note: 'n' })).toEqual({
      name: 'DB_PASSWORD',
      value: R,
      note: '[note]',
    });
    expect(seen).toEqual(['name-value-secret']);
  });

  it('custom secret keys name secrets in pairs too', () => {
    const redact = createSecretRedactor({ keys: ['ssn'] });
    expect(
      redact([
        { name: 'customer_ssn', value: '123' },
        { name: 'password', value: 'x' },
      ]),
    ).toEqual([
      { name: 'customer_ssn', value: R },
      { name: 'password', value: 'x' },
    ]);
  });

  it('the exported tests agree with the walk', () => {
    const tests = createSecretPairTests();
    expect(['name', 'Name', 'KEY', 'header_name', 'ParameterKey', 'Variable'].every(isNameFieldKey)).toBe(
      true,
    );
    expect(['value', 'label', 'title', 'id', 'path'].some(isNameFieldKey)).toBe(false);
    expect(tests.isSecretName('/prod/db/pass')).toBe(true);
    expect(tests.isSecretName('/prod/db/')).toBe(false);
    expect(tests.isSecretName('Reset password')).toBe(false);
    expect(tests.isSecretPair({ Name: 'x/api-token', Value: 'v' })).toBe(true);
    expect(tests.isSecretPair({ Name: 'x/api-token' })).toBe(false);
    expect(tests.hasSecretHeaderPair(['Authorization', 'x'])).toBe(true);
    expect(tests.hasSecretHeaderPair(['token', 'x'])).toBe(false);
  });
});

describe('a flat array of header names and values', () => {
  it.each<[string, unknown, unknown]>([
    [
      "Node's rawHeaders",
      { rawHeaders: ['Host', 'api.example.com', 'Authorization', 'Bearer-less hunter2', 'X-Api-Key', 'h2'] },
      { rawHeaders: ['Host', 'api.example.com', 'Authorization', R, 'X-Api-Key', R] },
    ],
    [
      'lower-case names, as HTTP/2 and fetch write them',
      ['cookie', 'sid=hunter2', 'set-cookie', 'a=b; Path=/', 'proxy-authorization', 'x', 'apikey', 'y'],
      ['cookie', R, 'set-cookie', R, 'proxy-authorization', R, 'apikey', R],
    ],
    [
      "a Map's entries (the walk writes a Map as pairs)",
      new Map([
        ['Private-Token', 'glpat-hunter2'],
        ['Accept', '*/*'],
      ]),
      [
        ['Private-Token', R],
        ['Accept', '*/*'],
      ],
    ],
    [
      'an array of entries',
      [
        ['X-Auth-Token', 'hunter2'],
        ['Content-Type', 'application/json'],
      ],
      [
        ['X-Auth-Token', R],
        ['Content-Type', 'application/json'],
      ],
    ],
  ])('%s', (_name, value, expected) => {
    expect(redactSecrets(value)).toEqual(expected);
    expect(redactSecrets(expected)).toEqual(expected);
  });

  it.each<[string, unknown]>([
    [
      'a list of words (no header is one word but Authorization, Cookie, apikey)',
      ['token', 'expired', 'password', 'reset'],
    ],
    ['tags', ['auth', 'login', 'sso', 'pin']],
    ['an option, no header name', ['--password-file', '/run/secrets/db']],
    ['an odd number of items', ['Authorization', 'x', 'Host']],
    ['an item that is not a string', ['Authorization', 1, 'Host', 'h']],
    ['a name with a space', ['X-Api-Key docs', 'see', 'Host', 'h']],
    ['headers naming no secret', ['Host', 'example.com', 'Accept', '*/*', 'X-Request-Id', 'r-1']],
    ['a secret header at a value position', ['Host', 'Authorization', 'Accept', 'x']],
  ])('%s stays', (_name, value) => {
    expect(redactSecrets(value)).toEqual(value);
  });
});

describe('hostile inputs (each read once)', () => {
  const size = 200_000;

  it('an object with thousands of value-field spellings reads its keys a bounded number of times', () => {
    const target: Record<string, unknown> = { name: 'hello' };
    // `v_a_l_u_e`, `V.a.l.u.e`, ...: each normalises to `value`.
    const spellings = ['value', 'Value', 'VALUE', 'vAlUe', 'valuE', 'vaLue', 'VaLuE', 'vALUE'];
    let count = 0;
    for (const word of spellings) {
      for (let cut = 0; cut < 400 && count < 3000; cut += 1) {
        target[`${word}${'_'.repeat(cut)}`] = { nested: cut };
        count += 1;
      }
    }
    let reads = 0;
    const value = new Proxy(target, {
      ownKeys: (object) => {
        reads += 1;
        return Reflect.ownKeys(object);
      },
    });
    const out = redactSecrets(value) as Record<string, unknown>;
    expect(Object.keys(out)).toHaveLength(count + 1);
    // The walk's own reads and one verdict; a rescan per value field would read it ~3000 times.
    expect(reads).toBeLessThan(10);
  });

  it.each<[string, unknown]>([
    ['a 200 KB name', { name: `${'a'.repeat(size)}_password`, value: 'x' }],
    ['a 200 KB path', { Name: `${'/a'.repeat(size / 2)}/password`, Value: 'x' }],
    ['a 200 KB header name', [`X-${'a'.repeat(size)}-Token`, 'x']],
    // 200 KB of header names and values.
    [
      'rawHeaders of 40,000 items',
      Array.from({ length: 40_000 }, (_, i) => (i % 2 === 0 ? 'X-Api-Key' : 'v')),
    ],
  ])('%s', (_name, value) => {
    expect(() => redactSecrets(value)).not.toThrow();
  });

  it('the long shapes are read, not skipped', () => {
    // A name over 256 characters is no key name; a header name over 128 characters no header.
    expect(redactSecrets({ name: `${'a'.repeat(300)}_password`, value: 'x' })).toEqual({
      name: `${'a'.repeat(300)}_password`,
      value: 'x',
    });
    const raw = redactSecrets(
      Array.from({ length: 40_000 }, (_, i) => (i % 2 === 0 ? 'X-Api-Key' : 'v')),
    ) as string[];
    expect(raw.filter((item) => item === R)).toHaveLength(20_000);
  });
});

describe('through a real tools/call', () => {
  it('a deploy failure carrying the pod spec, a HAR entry and rawHeaders in _meta: the model sees [REDACTED]', async () => {
    const meta = {
      env: [
        { name: 'DB_PASSWORD', value: 'hunter2-env' },
        { name: 'LOG_LEVEL', value: 'debug' },
      ],
      har: {
        request: {
          headers: [
            { name: 'Authorization', value: 'hunter2-har' },
            { name: 'Host', value: 'h' },
          ],
        },
      },
      rawHeaders: ['Host', 'h', 'X-Api-Key', 'hunter2-raw'],
      ssm: { Parameter: { Name: '/prod/db/pass', Type: 'SecureString', Value: 'hunter2-ssm' } },
      menu: [{ name: 'Reset password', value: 'reset' }],
    };
    client = await serveTools([upstreamFailure('deploy', 'Deploys.', 'deploy failed', meta)]);
    const result = await client.callTool('deploy', {});
    expectFailure(result);
    expect(result._meta?.['acme/upstream']).toEqual({
      env: [
        { name: 'DB_PASSWORD', value: R },
        { name: 'LOG_LEVEL', value: 'debug' },
      ],
      har: {
        request: {
          headers: [
            { name: 'Authorization', value: R },
            { name: 'Host', value: 'h' },
          ],
        },
      },
      rawHeaders: ['Host', 'h', 'X-Api-Key', R],
      ssm: { Parameter: { Name: '/prod/db/pass', Type: 'SecureString', Value: R } },
      menu: [{ name: 'Reset password', value: 'reset' }],
    });
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });
});
