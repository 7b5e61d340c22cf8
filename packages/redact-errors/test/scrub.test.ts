import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { defineTool, ERROR_CODE_DEFAULTS, REDACTED, redactSecretsInText, ToolError } from '@toolgate/core';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRedactErrors, ERROR_SCRUB_PATTERNS, scrubErrorText } from '../src/index.js';
import { createScrubber, type RemovedCounts } from '../src/scrub.js';
import { closeAll, seenEnvelope, serve } from './helpers.js';

const JWT = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U';

// Text a model legitimately reads in an error: none of it may change.
const ORDINARY: readonly string[] = [
  // Backslashes that are not a path: a regular expression, a lone one, one without a file name.
  'must match ^\\d+\\.\\d+$',
  'a\\b and c\\d',
  'DOMAIN\\user is not allowed',
  'No order 1234567890123456.',
  'Delivered on 2024-05-12, 12/05/2024 or 31.12.2024.',
  'Opens at 14:30, closes 18:45:30.',
  'Requires version 1.2.3 or v2.10.0-beta.1.',
  'Order shipped. Call again.',
  'Acme Widget Pro 3000 is out of stock.',
  'Total: 12.50 EUR, 50% off.',
  'Please select a size from the list.',
  'Update your address and try again.',
  'Delete from the cart is not allowed.',
  'Use search_orders to find ids; not for lists. And/or 24/7, a 3:2 ratio, page 4/5.',
  'Fields items.0.id and address.city are required.',
  'Built with Node.js; see config.json.',
  'Write to support@acme.com for help.',
  'Status must be one of open, shipped, cancelled.',
  'days: expected an integer from 1 to 90 (got 120).',
  'The user "ann" has no orders; created 2026-11-30T10:00:00.000Z.',
  'No order 3f2b8c1e-9a4d-4c1b-8f5e-2d7a6b9c0e1f; order 4000123412341234 is open.',
  'Basic plan customers cannot use this; max_tokens: 1500.',
  'Café “Zürich” at ½ price, № 5™; the team 👩‍💻 says hi.',
  'Table 4 is reserved; column B is blank; no such luck.',
  'The host said the user left early.',
  // Slashes and dots that are not paths: alternatives, units, dates, fractions, media types, versions.
  'Pick one and/or both; max 30 km/h; due 12/05/2024; add 1/2.5 more.',
  'Send application/json or application/vnd.api+json, not text/html; charset=utf-8.',
  'Upload it as application/vnd.openxmlformats-officedocument.spreadsheetml.sheet over TCP/IP.',
  'Needs node/20.1.0 or v1.2/3.4; Node 18.x/20.x works.',
  // A command without a path is the tool's own word; base64 that is not a key body stays.
  'spawn git ENOENT: install git first.',
  'MIIx and MII are words; cursor dGhpcyBpcyBhIGN1cnNvciwgbm90IGEga2V5LCBvbmx5IGEgbG9uZyBpZCBmb3IgcGFnZSAy.',
  'ref eyxMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7aaaaaaaa is an id.',
  // Entities, escapes and hex that hide nothing; a drive's root; a JSON escape before a file name.
  'Tom &amp; Jerry; use &lt;b&gt; for bold, &copy; 2024.',
  'must match ^[\\x20-\\x7E]+$ or \\d+\\.\\w; and\\/or 24\\/7',
  'sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855, commit 9fceb02d0ae598e95dc970b74767f19372d61af8',
  'Free up space on drive C:\\ and retry.',
  'failed\\nconfig.json was not written; see\\n\\tREADME.md',
  ...Object.values(ERROR_CODE_DEFAULTS).map((defaults) => defaults.hint),
];

// Internals an error may carry, and exactly what the model sees instead.
const HOSTILE: readonly (readonly [string, string])[] = [
  [
    "ENOENT: no such file or directory, open '/srv/app/config/secrets.json'",
    "ENOENT: no such file or directory, open '[path]'",
  ],
  ['Cannot load C:\\Program Files\\Acme\\app\\db.js:10:5 now', 'Cannot load [path] now'],
  ['Share \\\\fileserver\\orders\\export.csv missing', 'Share [path] missing'],
  ['Module file:///home/deploy/app/index.mjs failed', 'Module [path] failed'],
  [
    'boom\n    at Object.<anonymous> (/srv/app/index.js:10:5)\n    at new Promise (<anonymous>)\n    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)',
    'boom',
  ],
  ['Traceback:\n  File "/srv/app/handler.py", line 10, in handle\nKeyError', 'Traceback:\nKeyError'],
  ['query failed: SELECT id, email FROM customers WHERE id = $1', 'query failed: [sql]'],
  ['query failed: select * from orders where customer_id = 7 limit 10', 'query failed: [sql]'],
  ['insert into orders (id, total) values (1, 2)', '[sql]'],
  ['UPDATE accounts SET balance = 0 WHERE id = 7', '[sql]'],
  ['delete from sessions where user_id = 3', '[sql]'],
  ['SELECT o.id\nFROM orders o\nWHERE o.note = 1; done', '[sql] done'],
  ['cannot reach postgres://admin:hunter2@db.internal:5432/orders', 'cannot reach [connection]'],
  ['mongodb+srv://user:pass@cluster0.abcde.mongodb.net/test?retryWrites=true', '[connection]'],
  ['jdbc:postgresql://db01:5432/orders', '[connection]'],
  ['conninfo host=db01 port=5432 dbname=orders user=app password=s3cret', 'conninfo [connection]'],
  ['Server=sql01;Database=orders;User Id=sa;Password=Pa55word;', '[connection]'],
  ['connect ECONNREFUSED 10.0.0.5:5432', 'connect ECONNREFUSED [host]'],
  ['host 192.168.1.10 down, 10.0.0.0/8 blocked', 'host [host] down, [host] blocked'],
  ['connect ECONNREFUSED ::1:5432', 'connect ECONNREFUSED [host]'],
  ['upstream [2001:db8::1]:8443 failed', 'upstream [host] failed'],
  ['link fe80::1ff:fe23:4567:890a%eth0 down', 'link [host] down'],
  ['mapped ::ffff:10.0.0.1 refused', 'mapped [host] refused'],
  // A subquery in the column list: the outer SELECT and its columns go too.
  ['query failed: SELECT id, (SELECT max(x) FROM t2) FROM customers WHERE id = $1', 'query failed: [sql]'],
  // Node's dual-stack sockets name a mapped address with its port after it.
  ['connect ECONNREFUSED ::ffff:10.0.0.5:5432', 'connect ECONNREFUSED [host]'],
  ['read ETIMEDOUT ::ffff:192.168.7.20:6379 (cache)', 'read ETIMEDOUT [host] (cache)'],
  ['keys in ~alice/.ssh and ~deploy/.config/app/env.json', 'keys in [path] and [path]'],
  ['full 2001:0db8:85a3:0000:0000:8a2e:0370:7334 ok', 'full [host] ok'],
  ['redis-cache.prod.svc.cluster.local:6379 timed out', '[host] timed out'],
  ['getaddrinfo ENOTFOUND orders-db.internal', 'getaddrinfo ENOTFOUND [host]'],
  ['orders-db:5432 refused; localhost:5432 refused', '[host] refused; [host] refused'],
  ['see api.stripe.com', 'see [host]'],
  ['GET https://internal-api.corp.example.com/v1/orders?token=abc failed', 'GET [url] failed'],
  ['Authorization: Bearer abc.def-ghi_jkl', `Authorization: Bearer ${REDACTED}`],
  [`token ${JWT} expired`, `token ${REDACTED} expired`],
  ['api key sk_live_abcdefghijklmnop rejected', `api key ${REDACTED} rejected`],
  ['key AKIAIOSFODNN7EXAMPLE', `key ${REDACTED}`],
  ['-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIB\n-----END RSA PRIVATE KEY-----', REDACTED],
  ['env DATABASE_URL=postgres://u:p@h/db PATH=/usr/bin:/bin HOME=/root', 'env [env] [env] [env]'],
  ['AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', '[env]'],
  ['read ~/.ssh/id_rsa or ./src/db.ts:4', 'read [path] or [path]'],
  // PostgreSQL's report as psql, the server log and node-postgres print it.
  [
    'ERROR:  syntax error at or near "FORM"\nLINE 1: SELEC email FORM users\n                    ^',
    'ERROR:  syntax error at or near [sql]',
  ],
  ['insert failed\nDETAIL:  Key (email)=(ann@example.com) already exists.', 'insert failed'],
  ['failed\nCONTEXT:  PL/pgSQL function audit_trigger() line 3 at RAISE', 'failed'],
  ['Failing row contains (2, ann@example.com, x, 3).', 'Failing row contains [row].'],
  ['role "reporting_ro" does not exist', 'role [name] does not exist'],
  ['password authentication failed for user "app"', 'password authentication failed for user [name]'],
  ['permission denied for table orders', 'permission denied for table [name]'],
  [
    'PostgreSQL 15.20 (Debian 15.20-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit',
    '[version]',
  ],
  ['behind nginx/1.22.1', 'behind [version]'],
  // util.inspect(error): the frames and the property dump after them.
  [
    "Error: connect ECONNREFUSED 127.0.0.1:1\n    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1611:16) {\n  errno: -111,\n  code: 'ECONNREFUSED',\n  syscall: 'connect',\n  address: '127.0.0.1',\n  port: 1\n}",
    'Error: connect ECONNREFUSED [host]',
  ],
  ["[Error: boom] { errno: -111, code: 'ECONNREFUSED', syscall: 'connect', port: 5432 }", '[Error: boom]'],
  ['err\n    at wasm://wasm/022c915e:wasm-function[9964]:0x4dd44f', 'err'],
  [
    'No file /srv/x/y. Open C:\\data\\x.csv. Host db.internal:5432/orders.',
    'No file [path]. Open [path]. Host [host].',
  ],
  // MySQL, SQLite, SQL Server and MongoDB name the same internals PostgreSQL does, in their own quoting.
  [
    "ER_DUP_ENTRY: Duplicate entry 'ann@example.com' for key 'users.email_unique'",
    'ER_DUP_ENTRY: Duplicate entry [row] for key [name]',
  ],
  ["ER_NO_SUCH_TABLE: Table 'shop.payroll' doesn't exist", "ER_NO_SUCH_TABLE: Table [name] doesn't exist"],
  [
    "ER_BAD_FIELD_ERROR: Unknown column 'ssn' in 'field list'",
    "ER_BAD_FIELD_ERROR: Unknown column [name] in 'field list'",
  ],
  [
    "ER_PARSE_ERROR: You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near 'FORM users WHERE id=1' at line 1",
    'ER_PARSE_ERROR: You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near [sql] at line 1',
  ],
  [
    "ER_ACCESS_DENIED_ERROR: Access denied for user 'app'@'10.0.0.4' (using password: YES)",
    `ER_ACCESS_DENIED_ERROR: Access denied for user [name] (using password: ${REDACTED})`,
  ],
  ["Login failed for user 'sa'.", 'Login failed for user [name].'],
  [
    'SQLITE_CONSTRAINT: UNIQUE constraint failed: users.email',
    'SQLITE_CONSTRAINT: UNIQUE constraint failed: [name]',
  ],
  ['SQLITE_ERROR: no such table: payroll', 'SQLITE_ERROR: no such table: [name]'],
  ['SQLITE_ERROR: no such column: ssn', 'SQLITE_ERROR: no such column: [name]'],
  [
    'SQLITE_ERROR: table users has no column named ssn',
    'SQLITE_ERROR: table [name] has no column named [name]',
  ],
  ['SQLITE_ERROR: near "FORM": syntax error', 'SQLITE_ERROR: near [sql]: syntax error'],
  [
    'MongoServerError: E11000 duplicate key error collection: shop.users index: email_1 dup key: { email: "ann@example.com" }',
    'MongoServerError: E11000 duplicate key error collection: [name] index: [name] dup key: [row]',
  ],
  // DDL quoted back by a migration or a query builder.
  ['DROP TABLE users', '[sql]'],
  ['failed: CREATE TABLE payroll (ssn text, salary int)', 'failed: [sql]'],
  ['ALTER TABLE users ADD COLUMN ssn text;', '[sql]'],
  ['TRUNCATE TABLE payroll', '[sql]'],
  // Host names the resolver, libpq and TLS name whatever their shape (a single label, any TLD).
  ['getaddrinfo ENOTFOUND orders-db-primary', 'getaddrinfo ENOTFOUND [host]'],
  ['getaddrinfo EAI_AGAIN payments.acme-internal', 'getaddrinfo EAI_AGAIN [host]'],
  ['querySrv ENOTFOUND _mongodb._tcp.cluster0.abcde.mongodb.net', 'querySrv ENOTFOUND [host]'],
  [
    'could not translate host name "db-primary" to address: Name or service not known',
    'could not translate host name [host] to address: Name or service not known',
  ],
  [
    'FATAL:  no pg_hba.conf entry for host "10.1.2.3", user "app", database "orders", SSL off',
    'FATAL:  no pg_hba.conf entry for host [host], user [name], database [name], SSL off',
  ],
  [
    "Hostname/IP does not match certificate's altnames: Host: payments.acme-internal. is not in the cert's altnames: DNS:orders-db.prod.acme-internal, DNS:*.acme-internal",
    "Hostname/IP does not match certificate's altnames: Host: [host]. is not in the cert's altnames: [host]",
  ],
  [
    "Hostname/IP does not match certificate's altnames: IP: 10.9.8.7 is not in the cert's list: IP Address:10.9.8.6",
    "Hostname/IP does not match certificate's altnames: IP: [host] is not in the cert's list: [host]",
  ],
  // Connection settings in a util.inspect or JSON dump, whatever the first key.
  [
    "{ host: 'db-prod-1', port: 5432, database: 'orders', user: 'admin' }",
    "{ host: '[host]', port: [host], database: '[name]', user: 'admin' }",
  ],
  ["{ code: 'ECONNREFUSED', address: 'pg-primary' }", "{ code: 'ECONNREFUSED', address: '[host]' }"],
  ['{"hostname":"billing-db","servername":"billing-db"}', '{"hostname":"[host]","servername":"[host]"}'],
  // Cloud resource names: account ids, roles, buckets.
  [
    'User: arn:aws:sts::123456789012:assumed-role/lambda-role/fn is not authorized to perform: s3:GetObject on resource: arn:aws:s3:::acme-private-bucket/secrets.txt',
    'User: [arn] is not authorized to perform: s3:GetObject on resource: [arn]',
  ],
  // Paths in the other spellings: forward slashes on Windows, a variable for the home directory.
  ['Cannot read C:/Users/alice/project/.env', 'Cannot read [path]'],
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell variable, not a template
  ['read $HOME/.ssh/id_rsa and ${HOME}/.aws/credentials', 'read [path] and [path]'],
  ['read %USERPROFILE%\\.ssh\\id_rsa', 'read [path]'],
  // Frames V8 prints for eval, JavaScriptCore/Firefox's `fn@file:line:col`, a stack inside JSON text.
  ['boom\n    at eval (eval at <anonymous> (/srv/app/x.js:1:1), <anonymous>:1:1)', 'boom'],
  ['boom\nhandler@/srv/app/x.js:1:1\n@/srv/app/y.js:2:2\nglobal code@/srv/app/z.js:3:3', 'boom'],
  [
    '{"stack":"Error: x\\n    at f (/srv/app/x.js:1:1)\\n    at g (node:internal/x:1:1)","id":7}',
    '{"stack":"Error: x","id":7}',
  ],
  // Invisible characters and fullwidth forms split a secret or a keyword so no pattern sees it.
  ['key sk_live_abc\u200bdefghijklmnopqrs', `key ${REDACTED}`],
  ['pass\u200bword=hunter2', `password=${REDACTED}`],
  ['cannot reach postgres\u200b://admin:hunter2@db.internal:5432/orders', 'cannot reach [connection]'],
  ['connect ECONNREFUSED 10.0.\u20603.7:5432', 'connect ECONNREFUSED [host]'],
  ['\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44\uff1dhunter2', `password=${REDACTED}`],
  ["open '\uff0fsrv\uff0fapp\uff0fx.js'", "open '[path]'"],
  // Node's fs errors quote every path whatever it looks like (relative, one segment, spaces, a quote),
  // and both paths of a two-path call; JSON.stringify(err) repeats them as fields.
  [
    "ENOENT: no such file or directory, open 'config/secrets.json'",
    "ENOENT: no such file or directory, open '[path]'",
  ],
  [
    "ENOENT: no such file or directory, open 'secrets.json'",
    "ENOENT: no such file or directory, open '[path]'",
  ],
  [
    "EACCES: permission denied, mkdir 'monthly uploads'. Retry.",
    "EACCES: permission denied, mkdir '[path]'. Retry.",
  ],
  [
    "ENOENT: no such file or directory, rename 'exports/a b.csv' -> 'archive'",
    "ENOENT: no such file or directory, rename '[path]' -> '[path]'",
  ],
  [
    "EEXIST: file already exists, symlink 'target' -> 'it's/link'",
    "EEXIST: file already exists, symlink '[path]' -> '[path]'",
  ],
  [
    "Error: ENOENT: no such file or directory, copyfile 'x/y.txt' -> 'z'",
    "Error: ENOENT: no such file or directory, copyfile '[path]' -> '[path]'",
  ],
  [
    '{"message":"ENOENT: no such file or directory, open \'data/orders.db\'"}',
    '{"message":"ENOENT: no such file or directory, open \'[path]\'"}',
  ],
  [
    '{"errno":-2,"code":"ENOENT","syscall":"rename","path":"a b/x.csv","dest":"archive"}',
    '{"errno":-2,"code":"ENOENT","syscall":"rename","path":"[path]","dest":"[path]"}',
  ],
  [
    '{"errno":-2,"code":"ENOENT","syscall":"spawn bin/tool","path":"bin/tool","spawnargs":[]}',
    '{"errno":-2,"code":"ENOENT","syscall":"spawn [path]","path":"[path]","spawnargs":[]}',
  ],
  // child_process: the command when it has a path.
  ['spawn bin/tool ENOENT', 'spawn [path] ENOENT'],
  ['spawnSync ./x EACCES', 'spawnSync [path] EACCES'],
  ['spawn ./my tools/run ENOENT', 'spawn [path] ENOENT'],
  ['spawn C:\\tools\\x.exe ENOENT', 'spawn [path] ENOENT'],
  // Relative paths ending in a file name outside quotes, with or without a line and column.
  ['failed to load config/secrets.json', 'failed to load [path]'],
  ['error in src/db/pool.ts:42:13', 'error in [path]'],
  ['at Object.<anonymous> (src/db/pool.ts:42:13)', ''],
  ['see docs/setup.md.', 'see [path].'],
  ['missing config/.env and ./x.ts', 'missing [path] and [path]'],
  ['loaded node_modules/.pnpm/pg@8.23.1/node_modules/pg/lib/client.js', 'loaded [path]'],
  // Windows' relative paths, also with JSON's doubled backslashes.
  ['error in src\\db\\pool.ts:42:13', 'error in [path]'],
  ['open .\\config\\secrets.json failed', 'open [path] failed'],
  ['see docs\\setup.md.', 'see [path].'],
  ['{"file":"src\\\\db\\\\pool.ts"}', '{"file":"[path]"}'],
  // A directory starting with an escape letter, a drive, `:line`: still paths. A JSON escape before a
  // path neither hides it nor is taken into it.
  ['open src\\node\\x.ts or C:\\new\\table.csv', 'open [path] or [path]'],
  ['failed\\nconfig.json:12', '[path]'],
  ['Error\\n/srv/app/config.json missing', 'Error\\n[path] missing'],
  ['failed\\nsrc/db/pool.ts', 'failed\\n[path]'],
  ['Error in:\\n\\tsrc\\db\\pool.ts:42:13', 'Error in:\\n\\t[path]'],
  ['Error\\nC:\\\\Users\\\\alice\\\\x.txt', 'Error\\n[path]'],
  // A host with a path after it is a host.
  ['fetch example.com/a/b.js failed', 'fetch [host] failed'],
];

describe('scrubErrorText: the default patterns', () => {
  it.each(ORDINARY)('leaves ordinary text alone: %j', (text) => {
    expect(scrubErrorText(text)).toBe(text);
  });

  it.each(HOSTILE)('scrubs %j', (text, expected) => {
    expect(scrubErrorText(text)).toBe(expected);
  });

  it('with its own patterns, applies only those', () => {
    const patterns = [{ name: 'order-ref', pattern: /ORD-\d+/, replace: '[order]' }];
    expect(scrubErrorText('ORD-1 and ORD-2 at /srv/x/y', patterns)).toBe('[order] and [order] at /srv/x/y');
  });
});

describe('scrubErrorText: a private key body without its PEM header', () => {
  // Real keys from node:crypto, as base64 DER: RSA (PKCS#8 and PKCS#1), EC (PKCS#8 and SEC1), Ed25519.
  const der = (key: KeyObject, type: 'pkcs8' | 'pkcs1' | 'sec1'): string =>
    key.export({ format: 'der', type }).toString('base64');
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  const KEYS: readonly (readonly [string, string])[] = [
    ['RSA PKCS#8', der(rsa, 'pkcs8')],
    ['RSA PKCS#1', der(rsa, 'pkcs1')],
    ['EC PKCS#8', der(ec, 'pkcs8')],
    ['EC SEC1', der(ec, 'sec1')],
    ['Ed25519 PKCS#8', der(generateKeyPairSync('ed25519').privateKey, 'pkcs8')],
  ];
  /** PEM's 64-character lines. */
  const lines = (body: string): string[] => body.match(/.{1,64}/g) ?? [];

  it.each(KEYS)('%s: on one line, cut short in a message', (_kind, body) => {
    expect(scrubErrorText(`bad key ${body.slice(0, 60)}... (cut)`)).toBe(`bad key ${REDACTED}... (cut)`);
    expect(scrubErrorText(`bad key ${body}`)).toBe(`bad key ${REDACTED}`);
  });

  it.each(KEYS)('%s: in PEM lines, the text after it kept', (_kind, body) => {
    expect(scrubErrorText(`key:\n${lines(body).join('\n')}\nRetry later.`)).toBe(
      `key:\n${REDACTED}\nRetry later.`,
    );
    expect(scrubErrorText(`key:\r\n${lines(body).join('\r\n')}\r\n`)).toBe(`key:\r\n${REDACTED}\r\n`);
  });

  it.each(KEYS)(
    '%s: in a JSON field, its lines joined by \\n, also in JSON quoted in JSON',
    (_kind, body) => {
      const field = `${lines(body).join('\n')}\n`;
      expect(scrubErrorText(JSON.stringify({ signingKey: field, kid: 'k1' }))).toBe(
        JSON.stringify({ signingKey: `${REDACTED}\n`, kid: 'k1' }),
      );
      expect(scrubErrorText(JSON.stringify({ body: JSON.stringify({ der: lines(body).join('\n') }) }))).toBe(
        JSON.stringify({ body: JSON.stringify({ der: REDACTED }) }),
      );
      expect(scrubErrorText(JSON.stringify({ pem: `-----\n${field}` }))).toBe(
        JSON.stringify({ pem: `-----\n${REDACTED}\n` }),
      );
    },
  );

  it('short MII words, and base64 not starting with a key prefix, stay', () => {
    const inside = `xMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7${'a'.repeat(40)}`;
    for (const text of ['MII', 'MIIx is a word', `MII${'A'.repeat(50)}`, inside]) {
      expect(scrubErrorText(text)).toBe(text);
    }
  });
});

describe('scrubErrorText: percent-encoded and base64-encoded runs are decoded and scanned', () => {
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  const b64url = (text: string) => Buffer.from(text).toString('base64url');
  const HIDDEN: readonly (readonly [string, string])[] = [
    // A redirect target or query value, percent-encoded: the decoding is shown, scrubbed.
    [
      `upstream said: ${encodeURIComponent('postgres://app:hunter2@db.internal:5432/orders')}`,
      'upstream said: [connection]',
    ],
    [`next=${encodeURIComponent('https://user:hunter2@api.internal.example/v1')}`, 'next=[url]'],
    [`callback=${encodeURIComponent('http://10.0.0.5:8080/admin')}`, 'callback=[url]'],
    [`path ${encodeURIComponent('/srv/app/secrets.json')} not found`, 'path [path] not found'],
    ['q=select%20*%20from%20users%20where%20id%3D1', 'q=[sql]'],
    ['q=select+*+from+users+where+id%3D1', 'q=[sql]'],
    // Twice encoded, and an escape inside a provider key's prefix.
    [`r=${encodeURIComponent(encodeURIComponent('postgres://app:pw@db/x'))}`, 'r=[connection]'],
    ['AKIA%49OSFODNN7EXAMPLE', REDACTED],
    ['ghp%5F1234567890abcdefghijklmnopqrstuvwxyz', REDACTED],
    // Invalid UTF-8 in the escapes is read byte by byte, not given up on.
    ['x=%FF%2Fsrv%2Fapp%2Fdb.js', `x=\u00ff[path]`],
    // Base64 of text holding something: the whole run goes.
    [`state=${b64('postgres://app:hunter2@db.internal/orders')}`, `state=${REDACTED}`],
    [`{"blob":"${b64url('{"password":"hunter2","user":"app"}')}"}`, `{"blob":"${REDACTED}"}`],
    [`token: ${b64('ghp_1234567890abcdefghijklmnopqrstuvwxyz')}`, `token: ${REDACTED}`],
  ];
  const PLAIN: readonly string[] = [
    // Encoded, but nothing in it: kept exactly as it was.
    `name=Jos%C3%A9&city=M%C3%BCnchen`,
    'search?q=red%20shoes&page=2',
    '100%25 done',
    `id=${b64('this is not a secret at all, just words')}`,
    `nonce=${Buffer.from('00112233445566778899aabbccddeeff', 'hex').toString('base64')}`,
    'trace 7f3a9c2b4e1d8f6a0b5c3e7d9f1a2b4c',
    'abcdefghijklmnopqrstuvwxyzABCDEFGHIJ',
  ];

  it.each(HIDDEN)('scrubs %j', (text, expected) => {
    expect(scrubErrorText(text)).toBe(expected);
    // A second pass changes nothing.
    expect(scrubErrorText(scrubErrorText(text))).toBe(scrubErrorText(text));
  });

  it.each(PLAIN)('leaves %j as it was', (text) => {
    expect(scrubErrorText(text)).toBe(text);
  });
});

describe('scrubErrorText: HTML entities, backslash escapes, hex dumps and nested encodings', () => {
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  const hex = (text: string) => Buffer.from(text).toString('hex');
  const bytes = (text: string) => hex(text).match(/../g) ?? [];
  const CONNECTION = 'postgres://app:hunter2@db.internal:5432/orders';
  const HIDDEN: readonly (readonly [string, string])[] = [
    // Entities: numeric, named, without the `;`, twice encoded; a run spans the words of one stretch.
    [
      'could not connect: postgres&#x3A;&#x2F;&#x2F;app&#x3A;hunter2&#x40;db.internal&#x2F;orders',
      'could not connect: [connection]',
    ],
    ['redirect=https&#58;//10.0.0.5/admin', 'redirect=[url]'],
    ['postgres&colon;&sol;&sol;app&colon;pw&commat;db.internal&sol;x', '[connection]'],
    ['next=postgres&amp;#x3A;//app:pw@db.internal/x', 'next=[connection]'],
    ['at https&#58//10.0.0.5&#47admin', 'at [url]'],
    ['host&#61;db01 port&#61;5432 dbname&#61;orders', '[connection]'],
    ['key ghp&lowbar;1234567890abcdefghijklmnopqrstuvwxyz', `key ${REDACTED}`],
    ['pass&ZeroWidthSpace;word=hunter2', `password=${REDACTED}`],
    // What decoding made that would close a quote or open markup is written back encoded.
    [
      '&lt;p&gt;cannot open &sol;srv&sol;app&sol;secrets.json&lt;&sol;p&gt;',
      '&lt;p&gt;cannot open [path]&lt;/p&gt;',
    ],
    ['&quot;password&quot;: &quot;hunter2&quot;', `&quot;password&quot;: &quot;${REDACTED}&quot;`],
    // Escapes: `\x` (read as UTF-8 bytes), `\u`, `\u{}`, JSON's `\/` (PHP), Go's `\u003c`, also doubled.
    ['postgres\\x3a\\x2f\\x2fapp:pw@db.internal/x', '[connection]'],
    ['token ghp\\u005f1234567890abcdefghijklmnopqrstuvwxyz', `token ${REDACTED}`],
    ['key \\u{67}hp_1234567890abcdefghijklmnopqrstuvwxyz', `key ${REDACTED}`],
    ['key sk_live_abc\\xe2\\x80\\x8bdefghijklmnop', `key ${REDACTED}`],
    ['{"file":"\\/var\\/www\\/app\\/config.php","line":70}', '{"file":"[path]","line":70}'],
    [
      '{"error":"dial \\u003cpostgres://app:pw@db.internal/x\\u003e failed"}',
      '{"error":"dial \\u003c[connection]\\u003e failed"}',
    ],
    [
      '{"body":"{\\"url\\":\\"postgres\\\\u003a\\\\/\\\\/app:pw@db.internal\\\\/x\\"}"}',
      '{"body":"{\\"url\\":\\"[connection]\\"}"}',
    ],
    // Hex dumps of text: contiguous, by byte (Node's `<Buffer …>`), colons, `0x`, a C array, xxd.
    [`payload ${hex(CONNECTION)}`, `payload ${REDACTED}`],
    [`frame <Buffer ${bytes(CONNECTION).join(' ')}>`, `frame <Buffer ${REDACTED}>`],
    [`frame ${bytes(CONNECTION).join(':')}`, `frame ${REDACTED}`],
    [`frame 0x${hex('password=hunter2 in a frame')}`, `frame ${REDACTED}`],
    [
      `{ ${bytes(CONNECTION)
        .map((pair) => `0x${pair}`)
        .join(', ')} }`,
      `{ ${REDACTED} }`,
    ],
    [`00000000: ${(hex(CONNECTION).match(/.{4}/g) ?? []).join(' ')}`, `00000000: ${REDACTED}`],
    // Nested: base64 of base64 (three deep), of percent-encoded text, of JSON with a base64 field; the
    // other ways round.
    [`state=${b64(b64(CONNECTION))}`, `state=${REDACTED}`],
    [`state=${b64(b64(b64('{"password":"hunter2"}')))}`, `state=${REDACTED}`],
    [`state=${b64(encodeURIComponent(CONNECTION))}`, `state=${REDACTED}`],
    [`state=${b64(JSON.stringify({ data: b64('{"password":"hunter2"}') }))}`, `state=${REDACTED}`],
    [`next=${encodeURIComponent('postgres&#x3A;//app:pw@db.internal/x')}`, 'next=[connection]'],
    [`dump ${hex(b64(CONNECTION))}`, `dump ${REDACTED}`],
  ];
  const PLAIN: readonly string[] = [
    'Tom &amp; Jerry &amp;amp; friends',
    '&copy; 2024 Acme &mdash; price 12&#8364;, &nbsp;open &#x1F600;',
    '{"note":"caf\\u00e9 \\u2014 open","color":"\\u001b[31mred\\u001b[0m"}',
    'must match ^[\\x20-\\x7E]+$, 12\\/05\\/2024',
    `hello ${hex('Hello, world! How are you today?')}`,
    '<Buffer 89 50 4e 47 0d 0a 1a 0a 00 00 00 0d 49 48 44 52 00 00 01 00>',
    'SHA256:6b:86:b2:73:ff:34:fc:e1:9d:6b:80:4e:ff:5a:3f:57:47:ad:a4:ea:a2:2f:1d:49:c0:1e:52:dd:b7:87:5b:4b',
    'ids 3f2b8c1e-9a4d-4c1b-8f5e-2d7a6b9c0e1f, 507f1f77bcf86cd799439011, 0x7f3a9c2b4e1d8f6a',
    `cursor=${b64(b64('page 2 of the order list, sorted by date'))}`,
  ];

  it.each(HIDDEN)('scrubs %j', (text, expected) => {
    expect(scrubErrorText(text)).toBe(expected);
    expect(scrubErrorText(expected)).toBe(expected);
  });

  it.each(PLAIN)('leaves %j as it was', (text) => {
    expect(scrubErrorText(text)).toBe(text);
  });

  it('counts what a decoded run held as encoded-<pattern>, at any depth', () => {
    const scrubber = createScrubber(ERROR_SCRUB_PATTERNS);
    const removed: RemovedCounts = {};
    const text = `at postgres&#x3A;//app:pw@db.internal/x, state=${b64(b64('{"password":"hunter2"}'))}`;
    expect(scrubber.text(text, removed)).toBe(`at [connection], state=${REDACTED}`);
    expect(removed).toEqual({
      'encoded-url-credentials': 1,
      'encoded-connection-url': 1,
      'encoded-key-value-secret': 1,
    });
  });
});

/** Far above a linear scan of the long texts below (milliseconds), far below a backtracking one (tens of seconds). */
const LONG_TEXT_TIMEOUT_MS = 5_000;

describe('scrubErrorText: long text', () => {
  // A response body or a dump can be large; a pattern that rescans from every position of a long run
  // took 5 to 11 s on 50 KB (an event loop stalled by one failure). No speed is asserted (speed lives in
  // the benches): a linear scan of 100 KB takes milliseconds, a backtracking one tens of seconds, and
  // the test's own timeout (LONG_TEXT_TIMEOUT_MS) stops that one as a failure. What is asserted is that
  // the scrub is done in one pass: scrubbing its output again changes nothing.
  it.each([
    ['a long line after a frame', `boom\n    at ${'a'.repeat(100_000)}`],
    ['a long line of colons after a frame', `boom\n    at ${'a:'.repeat(50_000)}`],
    ['a run of spaces', `x${' '.repeat(100_000)}y`],
    ['a run of tabs', `x${'\t'.repeat(100_000)}y`],
    ['a line starting with at and spaces', `at ${' '.repeat(100_000)}`],
    ['a long run before a percent escape after a space', `${'a'.repeat(100_000)} %41`],
    ['a long run of percent escapes', `x=${'%41'.repeat(40_000)}`],
    ['a long run of base64 letters', `${'QUJD'.repeat(25_000)}`],
    ['a long run of backslashed segments', `x${'a\\'.repeat(50_000)}b`],
    ['base64-looking runs split by a space', `${'Zm9vYmFy '.repeat(12_000)}`],
    ['a run of HTML entities', '&#x41;'.repeat(16_667)],
    ['entities between words on one line', 'a &amp; b '.repeat(10_000)],
    ['ampersands that start no entity', `${'&a'.repeat(50_000)};`],
    ['a run of \\x escapes', '\\x41'.repeat(25_000)],
    ['a run of backslashes', '\\'.repeat(100_000)],
    ['a run of hex digits', '0123456789abcdef'.repeat(6_250)],
    ['hex digits of odd length', `${'0123456789abcdef'.repeat(6_250)}ag`],
    ['hex bytes split by spaces', '41 '.repeat(33_334)],
    [
      'base64 of base64 of entities',
      Buffer.from(Buffer.from('&#x41;'.repeat(8_000)).toString('base64')).toString('base64'),
    ],
    ['words between JSON escapes', 'a\\n'.repeat(33_334)],
  ])(
    '%s (100 KB) is scrubbed in one pass',
    (_name, text) => {
      const scrubbed = scrubErrorText(text);
      expect(scrubErrorText(scrubbed)).toBe(scrubbed);
    },
    LONG_TEXT_TIMEOUT_MS,
  );

  it('a secret at the end of 1 MB of text is replaced whole, nothing cut', () => {
    const text = `${'word '.repeat(200_000)}then password=hunter2 and sk_live_abcdefghijklmnop`;
    expect(scrubErrorText(text)).toBe(`${'word '.repeat(200_000)}then password=${REDACTED} and ${REDACTED}`);
  });
});

describe('createRedactErrors through a real client: what the model reads', () => {
  afterEach(closeAll);

  const explain = defineTool({
    name: 'explain',
    description: 'Fails with the given text.',
    input: { text: z.string() },
    handler: ({ text }) => {
      throw new ToolError('not_found', text, { hint: 'Check the id.' });
    },
  });

  it('every hostile message arrives scrubbed, every ordinary one unchanged, code and hint kept', async () => {
    const entries: LogEntry[] = [];
    const c = await serve([explain], [createRedactErrors()], recordingLogger(entries));
    for (const [text, expected] of [...HOSTILE, ...ORDINARY.map((line) => [line, line] as const)]) {
      const envelope = seenEnvelope(await c.callTool('explain', { text }));
      expect(envelope).toEqual({
        ok: false,
        error: 'not_found',
        message: expected,
        hint: 'Check the id.',
        retryable: false,
      });
    }
    // Each scrubbed message left one debug entry saying what was removed; ordinary ones none. Where
    // core's boundary already ran its secret patterns over the ToolError's message, the messages
    // holding only a secret reach this middleware clean and leave no entry.
    const cleanAfterCore = HOSTILE.filter(
      ([text, expected]) => redactSecretsInText(text) === expected,
    ).length;
    expect([HOSTILE.length, HOSTILE.length - cleanAfterCore]).toContain(
      entries.filter((entry) => entry.level === 'debug').length,
    );
    expect(entries.every((entry) => entry.level === 'debug')).toBe(true);
  });
});
