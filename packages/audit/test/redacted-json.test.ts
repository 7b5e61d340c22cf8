import {
  canonicalJson,
  createSecretRedactor,
  DEFAULT_SECRET_KEYS,
  SECRET_PATTERNS,
  type SecretPattern,
  SPLIT_SECRET_OPENER,
} from '@toolgate/core';
import { describe, expect, it } from 'vitest';
import { isPlainValue } from '../src/plain-text.js';
import { createPatternPretest, createRedactedJson } from '../src/redacted-json.js';

// Strings that hold a secret of each kind core knows, and ordinary text that holds none.
const SECRET_TEXTS = [
  'Authorization: Bearer abcdefghijklmnop',
  'use Bearer abc.def-ghi please',
  'Basic dXNlcjpwYXNzd29yZA==',
  'token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl here',
  'key AKIAABCDEFGHIJKLMNOP end',
  'postgres://app:s3cret@db.internal:5432/orders',
  'password=hunter2',
  'db_password: "hunter2"',
  '{"api_key":"abc123","x":1}',
  "{'clientSecret': 'zzz'}",
  'cookie: session=abc; other=1',
  'set-cookie: __Host-session=abcdef; Path=/',
  '-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----',
  'sk_live_0123456789abcdef',
  'ghp_0123456789abcdefghijABCDEFGHIJ0123456789',
  'AccountKey=abcdefghijklmnop==;EndpointSuffix=core.windows.net',
  '$2b$12$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234',
];
const PLAIN_TEXTS = [
  '',
  'customer42@example.com',
  'max_tokens: 1500',
  'token_count=3',
  'passwordless sign-in',
  'ünïcode "quotes" \\ back\u2028slash \u0000 nul',
  'https://example.com/path?q=1',
  'A'.repeat(5000),
];

const KEY_LINES = [
  '-----BEGIN PRIVATE KEY-----',
  'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj',
  'MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu',
  'NMoSfm76oqFvAp8Gy0iz5sxjZmSnXyCdPEovGhLa0VzMaQ8s+CLOyS56YyCFGeJZ',
  '-----END PRIVATE KEY-----',
];

function splitSecrets(): unknown[] {
  return [
    { tls: KEY_LINES, host: 'db' },
    { lines: ['log start', ...KEY_LINES, 'log end'] },
    { a: KEY_LINES[0], b: KEY_LINES[1], c: KEY_LINES[2], d: KEY_LINES[4] },
    { headers: ['Authorization: Bearer', 'abcdefghijklmnopqrstuvwxyz012345'] },
    [['AKIAABCDEFGHIJKLMNOP', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY']],
    // One opener and no sibling string: nothing split, the same text either way.
    { only: KEY_LINES[0], n: 1 },
  ];
}

class Money {
  constructor(readonly cents: number) {}
}
const cyclic: Record<string, unknown> = { name: 'loop' };
cyclic.self = cyclic;
let deep: unknown = 'bottom';
for (let level = 0; level < 40; level += 1) deep = { level, next: deep };
const hostile = Object.defineProperty({}, 'boom', {
  enumerable: true,
  get() {
    throw new Error('getter');
  },
});

const VALUES: unknown[] = [
  undefined,
  null,
  0,
  -0,
  1e21,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  true,
  'plain',
  ...SECRET_TEXTS,
  ...PLAIN_TEXTS,
  { id: 'A-1', password: 'hunter2', note: 'use Bearer abc.def-ghi please' },
  { nested: { items: [{ apiKey: 'k-123', sku: 'postgres://app:s3cret@db:5432/o' }, { apiKey: null }] } },
  { 'X-Api-Key': 'k', token: undefined, secret: 0, list: [undefined, 1, 'password=x'] },
  JSON.parse('{"__proto__":{"password":"p"},"constructor":"c","b":1,"a":2}'),
  Object.assign(Object.create(null), { z: 1, a: 'Bearer abcdefghijkl' }),
  { toJSON: 'data, not a method', when: 'now' },
  { fn: () => 1, kept: 'yes' },
  [1, 'two', [3, [4, { five: 'password=5' }]]],
  // biome-ignore lint/suspicious/noSparseArray: a sparse array takes the general path
  [1, , 3],
  { when: new Date('2026-01-02T03:04:05.006Z') },
  { map: new Map([['token', 'abc']]) },
  { money: new Money(5) },
  { big: 10n },
  cyclic,
  deep,
  { hostile },
  Array.from({ length: 50 }, (_, index) => ({ [`k${index}`]: SECRET_TEXTS[index % SECRET_TEXTS.length] })),
  // Secrets in keys: the redacted key sorts elsewhere, and two keys may become one.
  { 'postgres://app:s3cret@db:5432/o': 1, a: 2, 'postgres://app:other@db:5432/o': 3 },
  { outer: [{ 'Bearer abcdefghijkl': 'v', b: 'w' }] },
  // Secrets split over sibling strings: the general walk reads an array's items (an object's values)
  // together, so these take it.
  ...splitSecrets(),
];

describe('createRedactedJson: exactly canonicalJson of core redaction, in one pass', () => {
  const extraKeys = ['ssn'];
  const extraPatterns: SecretPattern[] = [
    { name: 'order-secret', pattern: /ORD-SECRET-\d+/g, replace: '[ORDER]' },
  ];
  for (const [name, keys, patterns] of [
    ['core defaults', DEFAULT_SECRET_KEYS, SECRET_PATTERNS],
    [
      'with extra keys and patterns',
      [...DEFAULT_SECRET_KEYS, ...extraKeys],
      [...SECRET_PATTERNS, ...extraPatterns],
    ],
  ] as const) {
    it(`every value gives the same text (${name})`, () => {
      const fast = createRedactedJson(keys, patterns);
      const general = createSecretRedactor({ keys, patterns });
      const values = [...VALUES, { ssn: '123-45-6789', ref: 'ORD-SECRET-42' }];
      for (const value of values) {
        expect(fast(value)).toBe(canonicalJson(general(value)));
        // A second time: the key cache gives the same verdicts.
        expect(fast(value)).toBe(canonicalJson(general(value)));
      }
    });
  }

  it('no line of a private key given as array items or object values is kept', () => {
    const fast = createRedactedJson(DEFAULT_SECRET_KEYS, SECRET_PATTERNS);
    for (const value of splitSecrets().slice(0, 3)) {
      const text = fast(value);
      for (const line of KEY_LINES.slice(1, 4)) expect(text).not.toContain(line.slice(0, 24));
    }
    expect(fast({ lines: ['log start', ...KEY_LINES, 'log end'] })).toContain('log end');
  });

  it('a command’s argument array keeps no password (the plain-string shortcut hands it to the walk)', () => {
    const fast = createRedactedJson(DEFAULT_SECRET_KEYS, SECRET_PATTERNS);
    const general = createSecretRedactor({ keys: DEFAULT_SECRET_KEYS, patterns: SECRET_PATTERNS });
    const argvs = [
      { argv: ['mysql', '--password', 'hunter2'] },
      { argv: ['mysql', '-phunter2', '-u', 'root'] },
      { spawnargs: ['-u', 'admin:hunter2', 'https://x'] },
      { argv: ['curl', '-u', 'admin:hunter2', 'https://x'] },
      { argv: ['sshpass', '-p', 'hunter2', 'ssh', 'host'] },
      { argv: ['vault', 'login', '--token', 'hunter2'] },
    ];
    for (const value of argvs) {
      const text = fast(value);
      expect(text, JSON.stringify(value)).not.toContain('hunter2');
      expect(text).toBe(canonicalJson(general(value)));
    }
  });

  it('a secret written with escaped characters is redacted as the general walk redacts it', () => {
    const fast = createRedactedJson(DEFAULT_SECRET_KEYS, SECRET_PATTERNS);
    const general = createSecretRedactor({ keys: DEFAULT_SECRET_KEYS, patterns: SECRET_PATTERNS });
    const bodies = [
      // Only the decoded text shows the secret: no pattern matches these as written.
      '{"\\u0070assword":"hunter2"}',
      'pwd&#61;hunter2',
      '\\u003cpassword\\u003ehunter2\\u003c/password\\u003e',
      '&lt;password&gt;hunter2&lt;/password&gt;',
    ];
    for (const body of bodies) {
      for (const value of [{ body }, { upstream: [body, 'status 500'] }]) {
        const text = fast(value);
        expect(text, body).not.toContain('hunter2');
        expect(text).toBe(canonicalJson(general(value)));
      }
    }
  });

  it('redacts secrets inside keys', () => {
    const fast = createRedactedJson(DEFAULT_SECRET_KEYS, SECRET_PATTERNS);
    const text = fast({ order: { 'postgres://app:s3cret@db:5432/o': 'down' } });
    expect(text).not.toContain('s3cret');
    expect(text).toContain('down');
  });

  it('the pretest is true for every string any single pattern matches, false for ordinary text', () => {
    const pretest = createPatternPretest(SECRET_PATTERNS);
    for (const text of [...SECRET_TEXTS, ...PLAIN_TEXTS]) {
      const matches = SECRET_PATTERNS.some(({ pattern }) =>
        new RegExp(pattern.source, pattern.flags).test(text),
      );
      if (matches) expect(pretest(text), text).toBe(true);
    }
    for (const text of SECRET_TEXTS) expect(pretest(text), text).toBe(true);
    expect(PLAIN_TEXTS.filter((text) => pretest(text))).toEqual([]);
  });

  it('the gates joined into one test never turn away a text a gated pattern matches (seeded fuzz)', () => {
    const pretest = createPatternPretest(SECRET_PATTERNS);
    // Pieces of secrets of every kind, the words and marks the gates look for, and plain words: joined
    // at random, most texts hit some gates and miss their patterns, and some hit both.
    const pieces = [
      ...SECRET_TEXTS,
      ...SECRET_PATTERNS.flatMap(({ requires }) =>
        requires === undefined ? [] : (requires.source.match(/[A-Za-z_]{3,}/g) ?? []),
      ),
      ...[
        'password',
        'Password ',
        'token ',
        'api key ',
        ': ',
        '=',
        ':',
        '"',
        "'",
        ' ',
        '\n',
        '$6$',
        '$apr1$',
      ],
      ...[
        'mysql -p',
        'sshpass -p ',
        'curl -u ',
        'sudo -S <<<',
        'otp=123456',
        'cvv: 123',
        'auth=',
        '--password ',
      ],
      ...[
        'hunter2',
        'S3cretPw9',
        'abcdefghijklmnop',
        '0123456789abcdef',
        'bob',
        '5432',
        '/srv/app',
        '{',
        '}',
      ],
    ];
    let seed = 0x2545f491;
    const next = (): number => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) / 0x100000000;
    };
    let matched = 0;
    for (let round = 0; round < 4000; round += 1) {
      let text = '';
      for (let count = 1 + Math.floor(next() * 5); count > 0; count -= 1) {
        text += pieces[Math.floor(next() * pieces.length)];
      }
      const matches = SECRET_PATTERNS.some(({ pattern }) =>
        new RegExp(pattern.source, pattern.flags).test(text),
      );
      if (matches) {
        matched += 1;
        expect(pretest(text), text).toBe(true);
      }
    }
    // The fuzz reached the gated patterns, not only the plain secrets.
    expect(matched).toBeGreaterThan(500);
  });

  it('patterns with back-references or named groups are tested on their own, not renumbered', () => {
    const patterns: SecretPattern[] = [
      { name: 'quoted', pattern: /(["'])secret-\d+\1/g, replace: 'X' },
      { name: 'named', pattern: /(?<word>pin)=\k<word>/g, replace: 'X' },
      { name: 'plain', pattern: /zzz/g, replace: 'X' },
    ];
    const pretest = createPatternPretest(patterns);
    expect(['"secret-1"', "'secret-2'", 'pin=pin', 'a zzz b'].map(pretest)).toEqual([true, true, true, true]);
    expect(['"secret-1\'', 'pin=pan', 'zz'].map(pretest)).toEqual([false, false, false]);
  });
});

describe('plain values skip the patterns only where no pattern of core matches them', () => {
  // Texts `isPlainValue` accepts are quoted as they are when core's patterns alone apply: each must
  // be text no pattern and no split-secret opener matches, and the writer's JSON must be the general
  // walk's. Built from the plain characters, the secret shapes' own prefixes and the opener's words.
  const pieces = [
    'eyJ',
    'AKIA',
    'ASIA',
    'sk-',
    'sk_live_',
    'ghp_',
    'MII',
    'xox',
    'npm_',
    'hf_',
    'SG.',
    'dapi',
  ];
  const chars = 'abcdefxyzABCXYZ0189_.-';
  const words = ['basic', 'Basic', 'BASIC', 'bearer', 'Bearer', 'BEARER', 'bAsIc'];
  // Whole texts that open a secret in an argument array: an option or a program whose options carry one.
  const argvWords = [
    '-u',
    '-U',
    '--user',
    '--auth',
    '--password',
    '--db-token',
    'curl',
    'CURL',
    'wget.exe',
    'http',
  ];
  argvWords.push('https', 'sshpass', 'mysql', 'mysqldump', 'mariadb-dump', 'MySQLAdmin');
  const texts: string[] = [
    ...words,
    ...words.map((word) => `x${word}`),
    ...argvWords,
    'v123',
    'req-42',
    '2026-01-02',
  ];
  let state = 0x2545f491;
  const next = (bound: number): number => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state % bound;
  };
  for (let index = 0; index < 20_000; index += 1) {
    let text = next(3) === 0 ? pieces[next(pieces.length)]! : '';
    const length = next(4) === 0 ? 13 + next(52) : next(13);
    const alphabet = length > 12 ? '0123456789abcdef-' : chars;
    while (text.length < length) text += alphabet[next(alphabet.length)];
    if (next(5) === 0) text += words[next(words.length)];
    texts.push(text);
  }

  it('no pattern or opener matches an accepted text, and its JSON is the general walk’s', () => {
    const fast = createRedactedJson(DEFAULT_SECRET_KEYS, SECRET_PATTERNS);
    const general = createSecretRedactor({ keys: DEFAULT_SECRET_KEYS, patterns: SECRET_PATTERNS });
    const patterns = SECRET_PATTERNS.map(
      ({ pattern }) => new RegExp(pattern.source, pattern.flags.replace('g', '')),
    );
    let accepted = 0;
    for (const text of texts) {
      if (!isPlainValue(text)) continue;
      accepted += 1;
      expect(patterns.filter((pattern) => pattern.test(text)).map(String), text).toEqual([]);
      expect(SPLIT_SECRET_OPENER.test(text), text).toBe(false);
      expect(fast(text)).toBe(JSON.stringify(text));
      expect(fast({ a: text, b: [text, text] })).toBe(canonicalJson(general({ a: text, b: [text, text] })));
    }
    expect(accepted).toBeGreaterThan(5_000);
  });

  it('texts ending in an opener word are not accepted', () => {
    for (const word of words) {
      expect(isPlainValue(word)).toBe(false);
      expect(isPlainValue(`x${word}`)).toBe(false);
    }
    expect(isPlainValue('basics')).toBe(true);
  });

  it('an argument that may take a secret as the next one is not accepted', () => {
    for (const word of [
      '-u',
      '--password',
      '--user',
      'curl',
      'Curl',
      'sshpass',
      'mysqldump',
      'wget.exe',
      '-1',
    ]) {
      expect(isPlainValue(word), word).toBe(false);
    }
    for (const word of ['curly', 'mysql_x.y', 'shell', 'u', 'cwd', 'http2', 'req-42']) {
      expect(isPlainValue(word), word).toBe(true);
    }
  });

  it('with a custom pattern, plain text still runs the patterns', () => {
    const patterns: SecretPattern[] = [
      ...SECRET_PATTERNS,
      { name: 'code', pattern: /v\d+/g, replace: '[CODE]' },
    ];
    expect(createRedactedJson(DEFAULT_SECRET_KEYS, patterns)({ q: 'v123' })).toBe('{"q":"[CODE]"}');
  });
});
