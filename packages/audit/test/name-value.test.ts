// Secrets named beside their values (Kubernetes env, HAR headers, Node's rawHeaders, AWS SSM parameters)
// in audited arguments: audit's one-pass writer must give exactly core's walk (which redacts them), an
// object without a name field must not leave the fast path, and a real tools/call must leave the
// records on file holding [REDACTED].
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  canonicalJson,
  createSecretRedactor,
  DEFAULT_SECRET_KEYS,
  REDACTED,
  SECRET_PATTERNS,
} from '@toolgate/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createAudit, createFileSink } from '../src/index.js';
import { createRedactedJson } from '../src/redacted-json.js';
import { closeConnections, serve } from './helpers.js';

const R = REDACTED;

// Each with where a secret sits, as canonical JSON's text around [REDACTED].
const CAUGHT: [string, unknown, string][] = [
  [
    'a Kubernetes env list',
    [
      { name: 'DB_PASSWORD', value: 'hunter2-k8s-env' },
      { name: 'LOG_LEVEL', value: 'debug' },
    ],
    `[{"name":"DB_PASSWORD","value":"${R}"},{"name":"LOG_LEVEL","value":"debug"}]`,
  ],
  [
    'HAR headers',
    { headers: [{ name: 'Authorization', value: 'x' }] },
    `{"headers":[{"name":"Authorization","value":"${R}"}]}`,
  ],
  [
    "Node's rawHeaders",
    { rawHeaders: ['Authorization', 'x', 'X-Api-Key', 'y', 'Host', 'h'] },
    `{"rawHeaders":["Authorization","${R}","X-Api-Key","${R}","Host","h"]}`,
  ],
  [
    'AWS SSM',
    { Parameters: [{ Name: '/prod/db/password', Value: 'x' }] },
    `{"Parameters":[{"Name":"/prod/db/password","Value":"${R}"}]}`,
  ],
  [
    'a value field sorted before the name',
    { data: 'x', name: 'GITHUB_TOKEN' },
    `{"data":"${R}","name":"GITHUB_TOKEN"}`,
  ],
  [
    'a pair naming a secret by a path',
    { Name: '/prod/db/pass', Value: 7 },
    `{"Name":"/prod/db/pass","Value":"${R}"}`,
  ],
];
const LEFT: unknown[] = [
  { q: 'v123' },
  { name: 'bob', value: 'x' },
  { name: 'Reset password', value: 'reset' },
  { name: 'LOG_LEVEL', value: 'debug', key: 'level' },
  { field: 'password', message: 'too short' },
  ['token', 'expired'],
  ['Host', 'h', 'Accept', '*/*'],
  ['--password-file', '/run/secrets/db'],
  { name: 'token', value: null },
];

describe("audit's writer and core's walk agree on name/value pairs", () => {
  for (const [label, keys] of [
    ['core defaults', DEFAULT_SECRET_KEYS],
    // `name` itself a secret key: its value goes, and the pair rule still reads the object.
    ['with `name` and `ssn` as secret keys', [...DEFAULT_SECRET_KEYS, 'name', 'ssn']],
  ] as const) {
    it(`the same text for every value (${label})`, () => {
      const fast = createRedactedJson(keys, SECRET_PATTERNS);
      const general = createSecretRedactor({ keys, patterns: SECRET_PATTERNS });
      const extra = [{ key: 'customer_ssn', value: '123-45-6789' }];
      for (const value of [...CAUGHT.map(([, value]) => value), ...LEFT, ...extra]) {
        expect(fast(value)).toBe(canonicalJson(general(value)));
        // Again: the cached key verdicts give the same text.
        expect(fast(value)).toBe(canonicalJson(general(value)));
      }
    });
  }

  it.each(CAUGHT)('%s: the secret goes', (_label, value, expected) => {
    expect(createRedactedJson(DEFAULT_SECRET_KEYS, SECRET_PATTERNS)(value)).toBe(expected);
  });

  it.each(LEFT.map((value) => [JSON.stringify(value), value]))('%s stays', (_label, value) => {
    expect(createRedactedJson(DEFAULT_SECRET_KEYS, SECRET_PATTERNS)(value)).toBe(canonicalJson(value));
  });

  it('an object without a name field has its keys read once, one with a plain name twice (no general walk)', () => {
    const fast = createRedactedJson(DEFAULT_SECRET_KEYS, SECRET_PATTERNS);
    const count = (target: object): number => {
      let reads = 0;
      const value = new Proxy(target, {
        ownKeys: (object) => {
          reads += 1;
          return Reflect.ownKeys(object);
        },
      });
      fast(value);
      return reads;
    };
    expect(count({ q: 'v123' })).toBe(1);
    expect(count({ name: 'bob', value: 'x' })).toBeLessThanOrEqual(2);
    // A secret pair takes core's walk, which reads the object again.
    expect(count({ name: 'DB_PASSWORD', value: 'x' })).toBeGreaterThan(2);
  });

  it('200 KB names and header arrays give the same text as the walk', () => {
    const fast = createRedactedJson(DEFAULT_SECRET_KEYS, SECRET_PATTERNS);
    const general = createSecretRedactor({ keys: DEFAULT_SECRET_KEYS, patterns: SECRET_PATTERNS });
    for (const value of [
      { name: `${'a'.repeat(200_000)}_password`, value: 'x' },
      { Name: `${'/a'.repeat(100_000)}/pass`, Value: 'x' },
      Array.from({ length: 40_000 }, (_, i) => (i % 2 === 0 ? 'X-Api-Key' : 'v')),
      Array.from({ length: 40_000 }, (_, i) => (i % 2 === 0 ? 'X-Api-Kez' : 'v')),
    ]) {
      expect(fast(value)).toBe(canonicalJson(general(value)));
    }
  });
});

describe('through a real tools/call into the audit file', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'audit-name-value-'));
  });
  afterEach(async () => {
    await closeConnections();
    await rm(dir, { recursive: true, force: true });
  });

  it('records on file hold [REDACTED] for each shape, and ordinary pairs as sent', async () => {
    const path = join(dir, 'audit.jsonl');
    const audit = createAudit({ sink: createFileSink(path), chainId: 'name-value' });
    const client = await serve([audit]);
    const sent = [
      [
        { name: 'DB_PASSWORD', value: 'hunter2-k8s-env' },
        { name: 'STRIPE_SECRET_KEY', value: 'hunter2-k8s-env2' },
      ],
      {
        headers: [
          { name: 'Authorization', value: 'hunter2-har' },
          { name: 'Cookie', value: 'sid=hunter2-cookie' },
        ],
      },
      { rawHeaders: ['Authorization', 'hunter2-raw', 'X-Api-Key', 'hunter2-raw2'] },
      { Parameters: [{ Name: '/prod/db/password', Value: 'hunter2-ssm' }] },
      [{ name: 'LOG_LEVEL', value: 'debug' }],
    ];
    for (const value of sent) await client.callTool('echo', { value });
    await audit.close();
    const text = await readFile(path, 'utf8');
    expect(text).not.toContain('hunter2');
    const args = text
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => (JSON.parse(line) as { args: { value: unknown } }).args.value);
    expect(args).toEqual([
      [
        { name: 'DB_PASSWORD', value: R },
        { name: 'STRIPE_SECRET_KEY', value: R },
      ],
      {
        headers: [
          { name: 'Authorization', value: R },
          { name: 'Cookie', value: R },
        ],
      },
      { rawHeaders: ['Authorization', R, 'X-Api-Key', R] },
      { Parameters: [{ Name: '/prod/db/password', Value: R }] },
      [{ name: 'LOG_LEVEL', value: 'debug' }],
    ]);
  });
});
