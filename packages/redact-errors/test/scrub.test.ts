import { defineTool, ERROR_CODE_DEFAULTS, REDACTED, redactSecretsInText, ToolError } from '@toolgate/core';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRedactErrors, scrubErrorText } from '../src/index.js';
import { closeAll, seenEnvelope, serve } from './helpers.js';

const JWT = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U';

// Text a model legitimately reads in an error: none of it may change.
const ORDINARY: readonly string[] = [
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
