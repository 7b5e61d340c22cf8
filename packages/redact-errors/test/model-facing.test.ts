import { promises as fs } from 'node:fs';
import { connect } from 'node:net';
import { inspect } from 'node:util';
import { PGlite } from '@electric-sql/pglite';
import {
  defineTool,
  ERROR_META_KEY,
  fail,
  ToolError,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import { createTestContext, recordingLogger } from '@toolgate/core/testing';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRedactErrors, scrubErrorText } from '../src/index.js';
import { createScrubber } from '../src/scrub.js';
import { ERROR_SCRUB_PATTERNS } from '../src/scrub-patterns.js';
import { scrubErrorResult } from '../src/scrub-result.js';
import { closeAll, closedPort, rejection, serve } from './helpers.js';

// Issue 12: error text a handler copies into what the model reads. Every failure below is real
// (PGlite, PostgreSQL when TEST_DATABASE_URL is set, Node's net and fs), carried in each way a
// handler can carry it; the model must see none of the internals.
const BCRYPT = '$2b$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy';
const DATABASE_URL = process.env.TEST_DATABASE_URL;
if (DATABASE_URL === undefined && process.env.CI === 'true') {
  throw new Error('TEST_DATABASE_URL must be set in CI: real PostgreSQL errors are tested against it');
}

let db: PGlite;
const real: Record<string, unknown> = {};

beforeAll(async () => {
  db = new PGlite();
  await db.exec(
    'CREATE TABLE users (id int PRIMARY KEY, email text NOT NULL UNIQUE, password_hash text, age int CHECK (age > 0))',
  );
  await db.query('INSERT INTO users VALUES ($1, $2, $3, $4)', [1, 'ann@example.com', BCRYPT, 30]);
  real.notNull = await rejection(() => db.query('INSERT INTO users VALUES (2, NULL, $1, 3)', [BCRYPT]));
  real.unique = await rejection(() =>
    db.query('INSERT INTO users VALUES (3, $1, $2, 5)', ['ann@example.com', BCRYPT]),
  );
  real.check = await rejection(() =>
    db.query('INSERT INTO users VALUES (4, $1, $2, -1)', ['bob@example.com', BCRYPT]),
  );
  real.syntax = await rejection(() => db.query('SELEC email, password_hash FORM users'));
  real.undefinedTable = await rejection(() => db.query('SELECT email FROM customer_secrets'));
  const port = await closedPort();
  real.refused = await new Promise((resolve) => connect({ host: '127.0.0.1', port }).on('error', resolve));
  real.enoent = await rejection(() => fs.readFile('/nonexistent/toolgate/config/secrets.json'));
  if (DATABASE_URL !== undefined) {
    const url = new URL(DATABASE_URL);
    url.username = 'toolgate_no_such_role';
    const client = new pg.Client({ connectionString: url.toString() });
    real.noRole = await rejection(() => client.connect());
    await client.end().catch(() => {});
  } else {
    // Shaped exactly as node-postgres reports it (checked against PostgreSQL 15).
    real.noRole = Object.assign(new Error('role "toolgate_no_such_role" does not exist'), {
      name: 'error',
      code: '28000',
      severity: 'FATAL',
      file: 'miscinit.c',
      routine: 'InitializeSessionUserId',
    });
  }
}, 120_000);
afterAll(async () => {
  await db.close();
});
afterEach(closeAll);

// What must never reach the model, whichever failure and carrier.
const LEAKS = [
  'ann@example.com',
  'bob@example.com',
  BCRYPT,
  '$2b$',
  'users_email_key',
  'users_age_check',
  'customer_secrets',
  'password_hash',
  'execMain',
  'nbtinsert',
  'node_modules',
  '/nonexistent',
  'secrets.json',
  '127.0.0.1',
  'errno',
  'syscall',
  'routine',
  'wasm://',
  'FORM users',
  'toolgate_no_such_role',
  'hunter2',
  'sk_live_',
];

function expectNoLeak(seen: unknown): void {
  const text = JSON.stringify(seen);
  for (const leak of LEAKS) expect(text, `leaked ${leak}`).not.toContain(leak);
}

const CARRIERS = ['fail', 'tool-error', 'raw', 'meta', 'part-meta'] as const;
const FAILURES = ['notNull', 'unique', 'check', 'syntax', 'undefinedTable', 'refused', 'enoent', 'noRole'];

// A handler that does what careless handlers do: copy the caught error into what the model reads.
const careless = defineTool({
  name: 'careless',
  description: 'Fails with a real error carried in the given way.',
  input: { failure: z.string(), carrier: z.enum(CARRIERS), form: z.enum(['message', 'inspect']) },
  handler: ({ failure, carrier, form }): ToolResult => {
    const error = real[failure] as Error & { detail?: string };
    const text =
      form === 'inspect' ? inspect(error) : `${error.message}${error.detail ? ` ${error.detail}` : ''}`;
    if (carrier === 'fail') return fail('invalid_argument', `Could not save: ${text}`);
    if (carrier === 'tool-error') throw new ToolError('unavailable', `Store failed: ${text}`);
    if (carrier === 'raw') return { isError: true, content: [{ type: 'text', text }] };
    const result = fail('not_found', 'Nothing matches.');
    if (carrier === 'meta') {
      result._meta = { ...result._meta, debug: { error: { text, stack: error.stack, list: [text] } } };
    } else {
      result.content = [
        ...result.content,
        {
          type: 'text',
          text: 'see details',
          _meta: { 'acme/detail': { text, nested: [{ at: error.stack }] } },
        },
      ];
    }
    return result;
  },
});

describe('real failures carried into what the model reads (through a real client)', () => {
  it('PGlite gives the real errors this suite expects', () => {
    expect(real.notNull).toMatchObject({
      code: '23502',
      detail: `Failing row contains (2, null, ${BCRYPT}, 3).`,
    });
    expect(real.unique).toMatchObject({
      code: '23505',
      detail: 'Key (email)=(ann@example.com) already exists.',
    });
    expect(real.check).toMatchObject({ code: '23514' });
    expect(real.syntax).toMatchObject({ code: '42601', message: 'syntax error at or near "SELEC"' });
    expect(real.undefinedTable).toMatchObject({
      code: '42P01',
      message: 'relation "customer_secrets" does not exist',
    });
    expect(real.refused).toMatchObject({ code: 'ECONNREFUSED', address: '127.0.0.1' });
    expect(real.enoent).toMatchObject({ code: 'ENOENT' });
  });

  for (const failure of FAILURES) {
    const source =
      failure === 'noRole' && DATABASE_URL === undefined ? ' [constructed: no TEST_DATABASE_URL]' : '';
    it(`${failure}${source}: message and util.inspect, in fail(), ToolError, raw isError, _meta and part _meta: nothing leaks`, async () => {
      const c = await serve([careless], [createRedactErrors()], recordingLogger([]));
      for (const carrier of CARRIERS) {
        for (const form of ['message', 'inspect'] as const) {
          const result = await c.callTool('careless', { failure, carrier, form });
          expect(result.isError).toBe(true);
          expectNoLeak(result);
        }
      }
    });
  }

  it('control: without createRedactErrors the same calls do leak (so the checks above mean something)', async () => {
    const c = await serve([careless], [], recordingLogger([]));
    const seen = JSON.stringify(
      await c.callTool('careless', { failure: 'unique', carrier: 'meta', form: 'inspect' }),
    );
    expect(seen).toContain('ann@example.com');
    expect(seen).toContain('users_email_key');
  });

  it('what remains of a real constraint violation is still useful to the model', async () => {
    const c = await serve([careless], [createRedactErrors()], recordingLogger([]));
    const seen = async (failure: string, form: 'message' | 'inspect'): Promise<unknown> =>
      JSON.parse(
        ((await c.callTool('careless', { failure, carrier: 'fail', form })).content[0] as { text: string })
          .text,
      ).message;
    expect(await seen('notNull', 'message')).toBe(
      'Could not save: null value in column [name] of relation [name] violates not-null constraint Failing row contains [row].',
    );
    expect(await seen('unique', 'message')).toBe(
      'Could not save: duplicate key value violates unique constraint [name] Key [row] already exists.',
    );
    expect(await seen('unique', 'inspect')).toBe(
      'Could not save: error: duplicate key value violates unique constraint [name]',
    );
    expect(await seen('syntax', 'message')).toBe('Could not save: syntax error at or near [sql]');
    expect(await seen('refused', 'inspect')).toBe('Could not save: Error: connect ECONNREFUSED [host]');
  });
});

describe('every string of a failure is scrubbed with core’s walk', () => {
  const scrubber = createScrubber(ERROR_SCRUB_PATTERNS);

  it('structuredContent, the whole _meta and content parts’ _meta, keys and values at any depth', () => {
    const removed: Record<string, number> = {};
    const result: ToolResult = {
      isError: true,
      content: [
        {
          type: 'text',
          text: 'failed at /srv/app/x.js:1:2 with password=hunter2',
          _meta: { where: { deep: ['10.0.0.5:5432'] } },
        },
        { type: 'image', data: 'AAAA/srv/app/BBBB', mimeType: 'image/png' },
      ],
      structuredContent: {
        detail: { query: 'SELECT * FROM users WHERE id = 1', password: 'hunter2', '/srv/app/keys.json': 1 },
      },
      _meta: {
        trace: { when: new Date('2026-11-30T10:00:00.000Z'), cause: new Error('at db.internal:5432') },
      },
    };
    expect(scrubErrorResult(result, scrubber, removed)).toEqual({
      isError: true,
      content: [
        {
          type: 'text',
          text: 'failed at [path] with password=[REDACTED]',
          _meta: { where: { deep: ['[host]'] } },
        },
        // Base64 payloads are not text: left as they are.
        { type: 'image', data: 'AAAA/srv/app/BBBB', mimeType: 'image/png' },
      ],
      structuredContent: { detail: { query: '[sql]', password: '[REDACTED]', '[path]': 1 } },
      _meta: { trace: { when: '2026-11-30T10:00:00.000Z', cause: 'Error: at [host]' } },
    });
    expect(removed).toEqual({
      'posix-path': 2,
      'key-value-secret': 1,
      'secret-key': 1,
      sql: 1,
      ipv4: 1,
      hostname: 1,
    });
  });

  it('a value alone under a key that names it: hosts, ports, databases, a Node error’s paths and arguments', () => {
    const removed: Record<string, number> = {};
    const meta = {
      // A connection's settings copied into _meta: no value has a shape a text pattern knows.
      db: { host: 'orders-primary', port: 5432, database: 'orders', user_note: 'see host docs' },
      socket: { remoteAddress: 'cache-2', remotePort: '6379', localAddress: '[host]' },
      // `{ ...error }` of Node's fs and child_process errors.
      read: { errno: -2, code: 'ENOENT', syscall: 'open', path: 'secrets' },
      rename: { errno: -2, code: 'ENOENT', syscall: 'rename', path: 'a b', dest: 'archive' },
      spawn: { syscall: 'spawn bin/tool', path: 'bin/tool', spawnargs: ['--token', 'tok_live_4f9a'] },
      spawnSync: { syscall: 'spawnSync ./run', path: './run', spawnargs: [] },
      bare: { syscall: 'spawn git', path: 'git', spawnargs: [] },
      // Not a system error, not a host: left as they are.
      validation: { path: 'items.0.id', dest: 'warehouse B' },
      shipping: { address: '221B Baker Street', port: 'Port of Rotterdam' },
    };
    const out = scrubber.value(meta, removed);
    const expected = {
      db: { host: '[host]', port: '[host]', database: '[name]', user_note: 'see host docs' },
      socket: { remoteAddress: '[host]', remotePort: '[host]', localAddress: '[host]' },
      read: { errno: -2, code: 'ENOENT', syscall: 'open', path: '[path]' },
      rename: { errno: -2, code: 'ENOENT', syscall: 'rename', path: '[path]', dest: '[path]' },
      spawn: { syscall: 'spawn [path]', path: '[path]', spawnargs: '[REDACTED]' },
      spawnSync: { syscall: 'spawnSync [path]', path: '[path]', spawnargs: [] },
      bare: { syscall: 'spawn [path]', path: '[path]', spawnargs: [] },
      validation: { path: 'items.0.id', dest: 'warehouse B' },
      shipping: { address: '221B Baker Street', port: 'Port of Rotterdam' },
    };
    expect(out).toEqual(expected);
    expect(removed).toEqual({
      hostname: 4,
      'db-name': 1,
      'syscall-path': 9,
      'spawn-args': 1,
      // The token after `--token` in the argument array, cut before the array goes whole.
      'split-cli-option-secret': 1,
    });
    // A second pass (core's boundary scrubs again where the result leaves the chain) reads the same.
    const again: Record<string, number> = {};
    expect(scrubber.value(out, again)).toEqual(expected);
    expect(again).toEqual({});
  });

  it('spawnargs in JSON text (plain, and escaped inside a JSON string) go whole; an empty list stays', () => {
    expect(
      scrubErrorText('{"errno":-2,"syscall":"spawn git","path":"git","spawnargs":["--token","tok_4f9a"]}'),
    ).toBe('{"errno":-2,"syscall":"spawn [path]","path":"[path]","spawnargs":["[REDACTED]"]}');
    const escaped = JSON.stringify({ json: '{"spawnargs":["-c","cat customer-42.csv"],"code":"ENOENT"}' });
    expect(scrubErrorText(escaped)).toBe(
      JSON.stringify({ json: '{"spawnargs":["[REDACTED]"],"code":"ENOENT"}' }),
    );
    expect(scrubErrorText('{"code":"ENOENT","spawnargs":[]}')).toBe('{"code":"ENOENT","spawnargs":[]}');
  });

  it('a hostile "__proto__" key in _meta stays a key and never sets a prototype', async () => {
    const hostile = JSON.parse(
      '{"__proto__":{"polluted":"yes","path":"/srv/app/x.js"},"note":"see /srv/app/y.js"}',
    ) as Record<string, unknown>;
    const below: ToolMiddleware = async () => {
      const result = fail('not_found', 'Nothing matches.');
      result._meta = { ...hostile, ...result._meta };
      result.content = [...result.content, { type: 'text', text: 'x', _meta: hostile }];
      return result;
    };
    // A known tool with accepted arguments: unknown tools pass through untouched (core answers them).
    const ctx = createTestContext({ tool: careless, logger: recordingLogger([]) });
    const out = await createRedactErrors()(ctx, () => below(ctx, async () => fail('internal', 'unused')));
    for (const meta of [out._meta, (out.content[1] as { _meta?: object })._meta]) {
      expect(Object.getPrototypeOf(meta)).toBe(Object.prototype);
      expect((meta as { polluted?: unknown }).polluted).toBeUndefined();
      expect(Object.hasOwn(meta as object, '__proto__')).toBe(true);
      expect(JSON.stringify(Object.getOwnPropertyDescriptor(meta, '__proto__')?.value)).toBe(
        '{"polluted":"yes","path":"[path]"}',
      );
      expect((meta as Record<string, unknown>).note).toBe('see [path]');
    }
    expect(out._meta?.[ERROR_META_KEY]).toMatchObject({ error: 'not_found' });
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it('ordinary text in a failure is left alone', () => {
    for (const text of [
      'Order 4000123412341234 was placed on 2026-11-29 and shipped 2026-11-30T10:00:00.000Z.',
      'No order 3f2b8c1e-9a4d-4c1b-8f5e-2d7a6b9c0e1f for this customer.',
      'The user "ann" has no orders; try another date range.',
      'Basic plan customers cannot change the shipping address. Use max_tokens: 1500.',
      'The key must be 8 to 64 characters; the token expired at 10:30.',
    ]) {
      expect(scrubErrorText(text)).toBe(text);
    }
  });
});
