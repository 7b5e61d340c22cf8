// Round 34 of the secret patterns: camelCase keys whose last word is `Pass` (a flag word or a small
// number under them stays), `.pgpass` lines whose host reads as a host (a Redis key stays), a `.pgpass`
// entry inside a sentence, and a password or token named in prose. Table rows (what goes, what stays),
// inputs a quadratic scan would not get through, and real tools/call round trips where the secret
// reaches the model through a failing tool's message and `_meta`. The boundary's redaction (core alone)
// must leave no `hunter2` for the model.
import { afterEach, describe, expect, it } from 'vitest';
import {
  createSecretKeyMatcher,
  REDACTED,
  redactSecrets,
  redactSecretsInText,
  SECRET_PATTERNS,
} from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';
import { upstreamFailure } from './fixtures/upstream-failure.js';

const R = REDACTED;
let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

describe('camelCase keys whose last word is Pass (as the key matcher for objects reads them)', () => {
  it.each([
    ['key=value', 'smtpPass=hunter2', `smtpPass=${R}`],
    ['JSON', '{"dbPass":"a b","host":"db"}', `{"dbPass":"${R}","host":"db"}`],
    ['key: value', 'mailPass: hunter2', `mailPass: ${R}`],
    [
      'among other settings',
      'host=cache; redisPass=hunter2; port=6379',
      `host=cache; redisPass=${R}; port=6379`,
    ],
    [
      'in capitals after the break',
      'redisPASS=hunter2 ftpPAss=x ldapPASs=y',
      `redisPASS=${R} ftpPAss=${R} ldapPASs=${R}`,
    ],
    ['a digit before it', 'db2Pass=hunter2', `db2Pass=${R}`],
    ['a dotted name', 'config.smtpPass = hunter2;', `config.smtpPass = ${R};`],
    ['URL-encoded', 'user=ann&smtpPass%3Dhunter2&x=1', `user=ann&smtpPass%3D${R}&x=1`],
    ['JSON inside a JSON string', '{"b":"{\\"ftpPass\\":\\"a b\\"}"}', `{"b":"{\\"ftpPass\\":\\"${R}\\"}"}`],
    ['an escaped quote (\\u0027)', 'smtpPass=\\u0027a b\\u0027', `smtpPass=\\u0027${R}\\u0027`],
    ['a number of four digits or more', 'vncPass=123456', `vncPass=${R}`],
    ['a number with letters after it', 'multiPass=3x9', `multiPass=${R}`],
    ['a word that is no flag', 'smtpPass=onion', `smtpPass=${R}`],
    ['a ticket code', 'boardingPass=ABC123', `boardingPass=${R}`],
  ])('%s: the value goes', (_name, text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected);
    expect(redactSecretsInText(expected)).toBe(expected);
    expect(redactSecrets({ message: text })).toEqual({ message: expected });
  });

  it.each([
    ['no word break before it', 'bypass=1 compass=north SMTPPASS=x smtppass=x DBPass=x'],
    ['Pass not the last word', 'passThrough=yes passCount=3 isPassed=true smtpPassFile=/etc/x'],
    ['a boolean', 'firstPass=true onePass: false isPass=TRUE'],
    ['a flag word', 'twoPass=on shadowPass: off lightPass=enabled "lintPass":"disabled" autoPass=none'],
    ['a small number', 'multiPass=3 renderPass: 12 maxPass=100 blurPass=1.5'],
    ['JSON with flags and numbers', '{"multiPass":3,"firstPass":true,"onePass":"no","isPass":null}'],
    ['a flag in an escaped quote', 'firstPass=\\u0027true\\u0027'],
    ['a break inside the word', 'smtpPasS=x'],
  ])('%s stays', (_name, text) => {
    expect(redactSecretsInText(text)).toBe(text);
  });

  it('the text rule names the same keys the object key matcher does', () => {
    const isSecretKey = createSecretKeyMatcher();
    const keys = [
      'smtpPass',
      'dbPass',
      'redisPASS',
      'ftpPAss',
      'ldapPASs',
      'db2Pass',
      'smtpPasS',
      'DBPass',
      'SMTPPASS',
      'smtppass',
      'bypass',
      'compass',
      'passThrough',
      'isPassed',
      'smtpPwd',
      'dbPWD',
    ];
    for (const key of keys) {
      const text = `${key}=hunter2`;
      expect(redactSecretsInText(text) !== text, key).toBe(isSecretKey(key));
    }
  });
});

describe('.pgpass lines: the host must read as a host, so a Redis key stays', () => {
  it.each([
    ['a Redis key', 'session:1234:user:profile:v1'],
    ['a Redis key in a JSON string', '{"key":"session:1234:user:profile:v1"}'],
    ['a Redis key with a hash tag', 'tg:rl:{abc}:daily:search_orders'],
    ['a Redis key per line', 'cache:42:orders:list:page2\nlock:7:job:run:owner'],
    ['a key with a hyphenated first word', 'rate-limit:1234:api:daily:v1'],
    ['a key whose second field is no port', 'user:99999:cart:items:v1\norder:0:lines:all:x'],
    ['a glob of keys', 'session:*:user:profile:v1'],
    ['a one-letter word before digits', 'v2:1234:user:profile:x'],
  ])('%s stays', (_name, text) => {
    expect(redactSecretsInText(text)).toBe(text);
  });

  it.each([
    ['the README examples', 'db.internal:5432:orders:app:x', `db.internal:5432:orders:app:${R}`],
    ['all wildcards', '*:*:*:backup:x', `*:*:*:backup:${R}`],
    ['a socket directory', '/var/run/postgresql:5432:app:app:x', `/var/run/postgresql:5432:app:app:${R}`],
    ['localhost on another port', 'localhost:15432:orders:app:hunter2', `localhost:15432:orders:app:${R}`],
    ['a bare name on the usual port', 'db:5432:orders:app:hunter2', `db:5432:orders:app:${R}`],
    ['a bare name on PgBouncer’s port', 'warehouse:6432:dw:etl:hunter2', `warehouse:6432:dw:etl:${R}`],
    ['a name ending in digits, any port', 'db01:15432:orders:app:hunter2', `db01:15432:orders:app:${R}`],
    ['an IPv6 address, colons escaped', '\\:\\:1:5432:app:app:hunter2', `\\:\\:1:5432:app:app:${R}`],
    ['the highest port', '10.0.0.7:65535:app:app:hunter2', `10.0.0.7:65535:app:app:${R}`],
  ])('%s: the password goes', (_name, text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected);
    expect(redactSecretsInText(expected)).toBe(expected);
  });

  it('a port out of range is no port', () => {
    expect(redactSecretsInText('db.internal:65536:orders:app:x')).toBe('db.internal:65536:orders:app:x');
  });
});

describe('a .pgpass entry inside a sentence', () => {
  it.each([
    [
      'a dotted host',
      'connect to db.internal:5432:orders:app:hunter2 failed',
      `connect to db.internal:5432:orders:app:${R} failed`,
    ],
    [
      'at the end of a sentence',
      'Using db.internal:5432:orders:app:hunter2.',
      `Using db.internal:5432:orders:app:${R}.`,
    ],
    [
      'in parentheses, before a comma',
      'retrying (10.0.0.7:6432:app:svc:hunter2), attempt 2',
      `retrying (10.0.0.7:6432:app:svc:${R}), attempt 2`,
    ],
    [
      'a bare name on the usual port',
      'connect to db:5432:o:app:hunter2 failed',
      `connect to db:5432:o:app:${R} failed`,
    ],
    ['localhost', 'entry=localhost:5432:*:app:hunter2 ignored', `entry=localhost:5432:*:app:${R} ignored`],
    [
      'in quotes',
      "line 'db.internal:5432:o:app:hunter2' skipped",
      `line 'db.internal:5432:o:app:${R}' skipped`,
    ],
    [
      'in a JSON string',
      '{"error":"connect to db.internal:5432:orders:app:hunter2 failed"}',
      `{"error":"connect to db.internal:5432:orders:app:${R} failed"}`,
    ],
    [
      'in JSON inside a JSON string',
      '{"b":"{\\"e\\":\\"bad line db.internal:5432:o:app:hunter2\\"}"}',
      `{"b":"{\\"e\\":\\"bad line db.internal:5432:o:app:${R}\\"}"}`,
    ],
    ['in an XML element', '<p>db.internal:5432:o:app:hunter2</p>', `<p>db.internal:5432:o:app:${R}</p>`],
    [
      'an escaped colon in it',
      'use db.internal:5432:o:app:hun\\:ter2 now',
      `use db.internal:5432:o:app:${R} now`,
    ],
  ])('%s: the password goes, the sentence stays', (_name, text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected);
    expect(redactSecretsInText(expected)).toBe(expected);
  });

  it.each([
    ['a Redis key in a sentence', 'key session:1234:user:profile:v1 expired'],
    ['a name ending in digits on another port', 'worker-1:5000:queue:jobs:retry failed'],
    ['four fields', 'connect to localhost:5432:orders:app failed'],
    ['a log prefix', 'got db.internal:5432:orders:app:error: connection refused'],
    ['six fields', 'saw db.internal:5432:orders:app:x:y there'],
    ['a stack frame and a compiler position', 'at f (/app/x.js:10:5) and main.go:42:7: undefined: x'],
    ['timestamps', 'tick at 12:30:45:123:456 ok, 2026-12-07T10:00:00Z'],
    ['Maven coordinates', 'pulled org.postgresql:postgresql:42.7.3:jar:sources today'],
    ['an ARN', 'role arn:aws:iam::123456789012:role/app denied'],
    ['an IPv6 address', 'from fe80::1:2:3 and 2001:db8:85a3:0:0:8a2e:370:7334'],
    ['inside a URL', 'open http://db.internal:5432:o:app:x now'],
  ])('%s stays', (_name, text) => {
    expect(redactSecretsInText(text)).toBe(text);
  });
});

describe('a password or token named in prose', () => {
  it.each([
    [
      'the password is',
      'The password is hunter2, the machine says.',
      `The password is ${R}, the machine says.`,
    ],
    [
      'lower case, mid-sentence',
      'login failed: password is hunter2 for ann',
      `login failed: password is ${R} for ann`,
    ],
    ['was, a symbol', 'Your new password was Xk92pq!', `Your new password was ${R}!`],
    ['passphrase, quoted', "the passphrase is 'p@ssw0rd'", `the passphrase is '${R}'`],
    ['passwd and a value', 'passwd s3cret!x', `passwd ${R}`],
    ['passwd, a digit', 'ran passwd hunter2 as root', `ran passwd ${R} as root`],
    ['the token is', 'the token is abc123xyz', `the token is ${R}`],
    ['a long token', 'invalid token 3f9a2c81d0e94b7f5a61 rejected', `invalid token ${R} rejected`],
    ['a UUID token', 'token 3f2b8c1e-9a4d-4c1b-8f5e-2d7a6b9c0e1f expired.', `token ${R} expired.`],
    ['a token ending a sentence', 'Refresh token AbC123dEf456GhI789.', `Refresh token ${R}.`],
    [
      'in a JSON string',
      '{"error":"login failed: the password is hunter2"}',
      `{"error":"login failed: the password is ${R}"}`,
    ],
    [
      'in JSON inside a JSON string',
      '{"b":"{\\"e\\":\\"password was hunter2\\"}"}',
      `{"b":"{\\"e\\":\\"password was ${R}\\"}"}`,
    ],
  ])('%s: the value goes', (_name, text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected);
    expect(redactSecretsInText(expected)).toBe(expected);
  });

  it.each([
    ['token expired', 'token expired; token refresh failed; token is invalid'],
    ['password reset', 'password reset sent; the password is incorrect.'],
    ['passwd file', 'passwd file is missing; passwd root; passwd -l ann; passwd --stdin user'],
    [
      'a length',
      'password must be 8 characters; the password is 8 characters long; password is 8-64 characters',
    ],
    [
      'a hash or an encoding',
      'the password is sha256 hashed; the token is base64-encoded; the token is HS256-signed',
    ],
    ['a compound word', 'The password is case-sensitive and re-used; the token is 2fa-only'],
    ['a short value', 'the token is v2; the password is abc12'],
    ['a short token', 'token abc123def456 and token 1500'],
    ['a date', 'the token was issued at 2026-12-07T10:00:00Z; token 2026-12-07T10:00:00Z'],
    ['a path', 'cat /etc/passwd file1234'],
    ['a token with no digit', 'the token is ABCDEFGHIJKLMNOPQRST'],
    ['a word that holds the keyword', 'xpassword is hunter2; tokens abc123def456ghi789'],
    ['a value with a space in quotes', "the passphrase is 'p@ss w0rd'"],
  ])('%s stays', (_name, text) => {
    expect(redactSecretsInText(text)).toBe(text);
  });
});

describe('the new rules on hostile inputs (each read once: a quadratic scan would time out)', () => {
  const size = 200_000;
  const repeat = (unit: string): string => unit.repeat(Math.ceil(size / unit.length));
  it.each([
    ['a camelCase Pass name with no separator', `${repeat('aPass')}b`, undefined],
    ['camelCase Pass keys with flag values', repeat('aPass=true;'), undefined],
    ['camelCase Pass keys with small numbers', repeat('aPass=3 '), undefined],
    ['pgpass words with no password', repeat(' db.internal:5432:o:a:'), undefined],
    [
      'a pgpass word whose password is all punctuation before a colon',
      `a.b:5432:o:u:x${'.'.repeat(size)}:`,
      undefined,
    ],
    ['pgpass words one after another', repeat('(a.b:1:o:u:p:'), undefined],
    ['a long dotted host', `${repeat('a.')}b:5432:o:u`, undefined],
    ['escaped colons', repeat('\\:'), undefined],
    ['a long bare host on the usual port', `${repeat('a')}:5432:o:u:`, undefined],
    ['password is, over and over', repeat('password is '), undefined],
    ['a long compound after password is', `password is ${repeat('ab-')}ab`, undefined],
    ['a long compound ending in a digit', `password is ${repeat('ab-')}ab1`, `password is ${R}`],
    ['a long value after passwd', `passwd ${repeat('a')}1`, `passwd ${R}`],
    ['token and a long run without a digit', `token ${repeat('a')}`, undefined],
    ['token and a long run ending in a symbol', `token ${repeat('a1')}@`, undefined],
    ['token, over and over', repeat('token a1 '), undefined],
  ])('%s', (_name, text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected ?? text);
  });

  it('ordinary argument strings pass no new pattern’s cheaper test', () => {
    const names = new Set(['prose-password', 'pgpass-password']);
    const camel = SECRET_PATTERNS.filter((pattern) => pattern.pattern.source.includes('P(?:[wW][dD]'));
    const gates = [...SECRET_PATTERNS.filter((pattern) => names.has(pattern.name)), ...camel].map(
      (pattern) => pattern.requires,
    );
    expect(camel).toHaveLength(3);
    for (const text of [
      'ord_123',
      'alice@example.com',
      'search',
      '2026-12-07T10:00:00Z',
      'Compass 12:30:45',
    ]) {
      for (const gate of gates) expect(gate?.test(text), `${gate}: ${text}`).toBe(false);
    }
  });
});

describe('through a real tools/call', () => {
  it('a mailer’s failure: camelCase Pass values go in message and _meta, flags and counts stay', async () => {
    const settings = '{"smtpHost":"mx.acme.test","smtpPass":"hunter2 x","multiPass":3,"firstPass":true}';
    const message = `SMTP auth failed (smtpUser=ann smtpPass=hunter2); settings: ${settings}`;
    client = await serveTools([
      upstreamFailure('send_mail', 'Sends a mail.', message, { settings, line: 'redisPASS: hunter2' }),
    ]);
    const result = await client.callTool('send_mail', {});
    const envelope = expectFailure(result);
    const clean = `{"smtpHost":"mx.acme.test","smtpPass":"${R}","multiPass":3,"firstPass":true}`;
    expect(envelope.message).toBe(`SMTP auth failed (smtpUser=ann smtpPass=${R}); settings: ${clean}`);
    expect(result._meta?.['acme/upstream']).toEqual({ settings: clean, line: `redisPASS: ${R}` });
    expect(JSON.parse(clean)).toBeTruthy();
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });

  it('a database error naming its .pgpass entry in a sentence and a password in prose; a Redis key stays', async () => {
    const message =
      'connect to db.internal:5432:orders:app:hunter2 failed: timeout. ' +
      'The password is hunter2-X9, reset it; invalid token 3f9a2c81d0e94b7f5a61hunter2.';
    const meta = {
      entry: 'replica:5433:orders:ro:hunter2',
      note: 'retrying (10.0.0.7:6432:app:svc:hunter2), attempt 2',
      cacheKey: 'session:1234:user:profile:v1',
    };
    client = await serveTools([upstreamFailure('load_orders', 'Loads orders.', message, meta)]);
    const result = await client.callTool('load_orders', {});
    const envelope = expectFailure(result);
    expect(envelope.message).toBe(
      `connect to db.internal:5432:orders:app:${R} failed: timeout. ` +
        `The password is ${R}, reset it; invalid token ${R}.`,
    );
    expect(result._meta?.['acme/upstream']).toEqual({
      entry: `replica:5433:orders:ro:${R}`,
      note: `retrying (10.0.0.7:6432:app:svc:${R}), attempt 2`,
      cacheKey: 'session:1234:user:profile:v1',
    });
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });
});
