// Red-team tests: a hostile model chooses every argument and a hostile upstream chooses every byte it
// answers, so that a handler's failure echoes attacker-chosen text around real internals (hosts,
// ports, paths, SQL, row values, secrets) or stalls the scrubber. Each test states the attack and
// asserts what the attacker gets instead: the planted internals appear nowhere in the serialized
// result the client received (content, `_meta`, every envelope field), and the log keeps the whole
// error under the incident id the model sees.
import { promises as fs } from 'node:fs';
import { connect } from 'node:net';
import vm from 'node:vm';
import { PGlite } from '@electric-sql/pglite';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { defineTool, fail, type ToolDefinition, type ToolResult } from '@toolgate/core';
import {
  expectFailure,
  type LogEntry,
  recordingLogger,
  serveTools,
  type TestClient,
} from '@toolgate/core/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRedactErrors, ERROR_SCRUB_PATTERNS, type RedactErrorsOptions } from '../src/index.js';
import { closedPort, INCIDENT_ID, rejection } from './helpers.js';

const open: TestClient[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((client) => client.close()));
});

async function serve(tools: ToolDefinition[], options: RedactErrorsOptions = {}) {
  const entries: LogEntry[] = [];
  const redact = createRedactErrors({ logger: recordingLogger(entries), ...options });
  const client = await serveTools(tools, { middleware: [redact], logger: recordingLogger(entries) });
  open.push(client);
  return { client, entries, redact };
}

/** Everything the client received, as one string: what a model could ever be shown. */
const seen = (result: CallToolResult): string => JSON.stringify(result);

function expectNone(result: CallToolResult, planted: readonly string[]): void {
  const text = seen(result);
  for (const secret of planted) expect(text, `leaked ${secret}`).not.toContain(secret);
}

/** A careless handler's failure: `text` in the message, the hint, a field, `_meta` (key and value). */
function echoEverywhere(text: string): ToolResult {
  const result = fail('unavailable', `upstream said: ${text}`, {
    hint: `Retry later (${text}).`,
    fields: [{ path: 'note', expected: text }],
  });
  result._meta = { ...result._meta, 'acme/upstream': { body: text, [text.slice(0, 200)]: 1 } };
  return result;
}

/** A tool whose failure carries `make(note)` everywhere the model can read. */
function echoTool(make: (note: string) => string | Promise<string>): ToolDefinition {
  return defineTool({
    name: 'echo_failure',
    description: 'Fails with what the upstream said (test).',
    input: { note: z.string() },
    handler: async ({ note }) => echoEverywhere(await make(note)),
  }) as ToolDefinition;
}

describe('regular-expression denial of service', () => {
  // Each input repeats a fragment that makes some pattern start a match at every repeat and fail late.
  const FRAGMENTS = [
    '\n  at f (x) {',
    '\n  at x:1 {',
    '  at f (x) {\n',
    'password=',
    'host=a ',
    'Server=a;',
    'Failing row contains (',
    "Duplicate entry '",
    "near '",
    '{errno: ',
    'Key (a)=(',
    'a.a.',
    'a://b:c',
    '\\"password\\":\\"',
    '%22password%22%3A',
    'select a, ',
    'SELECT ',
    '::',
    '1:',
    '10.0.0.',
    'a-b.',
    'C:\\a ',
    '/a',
    '\\n    at x (y',
    '-----BEGIN PRIVATE KEY-----',
    'Bearer ',
    'eyJaaaa.',
    'a/',
    'a/a.a',
    "ENOENT: x, open '",
    "ENOENT: x, rename 'a' -> '",
    "EACCES: x, open 'a'b",
    '"syscall":"a","path":"',
    '"syscall":"spawn ',
    '\\"syscall\\":\\"a\\",\\"path\\":\\"',
    'spawn a/',
    'spawn ',
    'MII',
    'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n',
    'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\\n',
    'a\\n',
    ':\\na\\',
    '\\nC:\\a',
    'C:\\',
    'a\n  ',
    'n\\',
    'a\n-----END PRIVATE KE',
    'connection to server at "a" (',
    'jdbc:a:',
    'file:/',
    'fe80::1%a:',
    // A path after a colon, a host after an `@`, libpq 13's host line.
    ':/a/',
    ':a/a.',
    '@a.',
    '@a-a.a:',
    'running on host "a" (',
    // A JWT that could start after each dash, a prefixed cookie after each `$` or quote.
    'eyJsk-',
    'eyJ-',
    '__Host-$',
    "'__Secure-",
  ];
  const SUFFIXES = ['', '!', ' x', '\n', ':1', ')'];
  // Runs every default pattern over `text` in a fresh context with a watchdog: a pattern that
  // backtracks catastrophically is interrupted and the test fails instead of hanging the worker.
  const context = vm.createContext({
    sources: ERROR_SCRUB_PATTERNS.map(({ pattern }) => [pattern.source, pattern.flags]),
  });
  const scrubAll = (text: string): void => {
    context.text = text;
    vm.runInContext(
      'for (const [source, flags] of sources) text.replace(new RegExp(source, flags), "");',
      context,
      { timeout: 4000 },
    );
  };

  it('every default pattern completes on short repeats of each adversarial fragment (no exponential blow-up)', () => {
    for (const fragment of FRAGMENTS) {
      for (const suffix of SUFFIXES) {
        expect(() => scrubAll(fragment.repeat(40) + suffix), JSON.stringify(fragment)).not.toThrow();
      }
    }
  });

  it('every default pattern completes on 200 KB of each adversarial fragment (no quadratic scan)', () => {
    for (const fragment of FRAGMENTS) {
      const text = `${fragment.repeat(Math.ceil(200_000 / fragment.length))} x`;
      expect(() => scrubAll(text), JSON.stringify(fragment)).not.toThrow();
    }
  }, 20_000);

  it('each default pattern alone completes on 4 MB of spaces (a frame pattern split each line of them 200 ways)', () => {
    // A linear scan with a constant of 200 is not quadratic, yet it held the event loop 3 s a megabyte.
    const texts = [`${' '.repeat(4_000_000)}x`, `${'\n'.padEnd(200, ' ').repeat(20_000)}x`];
    for (const [index, { name }] of ERROR_SCRUB_PATTERNS.entries()) {
      for (const text of texts) {
        context.text = text;
        const run = () =>
          vm.runInContext(`text.replace(new RegExp(...sources[${index}]), "")`, context, { timeout: 3000 });
        expect(run, name).not.toThrow();
      }
    }
  }, 30_000);

  it('a 26-line unclosed inspect-style dump from the model comes back scrubbed, not after minutes', async () => {
    const { client } = await serve([echoTool((note) => note)]);
    const result = await client.callTool('echo_failure', {
      note: `Error: x${'\n  at f (x) {'.repeat(26)} x`,
    });
    const envelope = expectFailure(result);
    // The frame lines and what follows them on their lines are gone; the text before them stays.
    expect(envelope.message).toBe('upstream said: Error: x');
  });
});

describe('real internals around attacker-chosen text', () => {
  let db: PGlite;
  let pgFailures: Record<string, Error & { where?: string; detail?: string }>;
  beforeAll(async () => {
    db = new PGlite();
    await db.exec(`
      CREATE TABLE vault (id int PRIMARY KEY, owner text UNIQUE, api_secret text CHECK (length(api_secret) > 3));
      CREATE FUNCTION vault_guard_fn() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN PERFORM 1/0 FROM vault WHERE owner = NEW.owner; RETURN NEW; END $$;
      CREATE TRIGGER vault_guard BEFORE UPDATE ON vault FOR EACH ROW EXECUTE FUNCTION vault_guard_fn();
      INSERT INTO vault VALUES (1, 'ann-rt@example.com', 'opaque-vault-value');`);
    pgFailures = {
      check: (await rejection(() => db.query("INSERT INTO vault VALUES (2, 'eve-rt', 'x')"))) as Error,
      unique: (await rejection(() =>
        db.query("INSERT INTO vault VALUES (3, 'ann-rt@example.com', 'long-enough')"),
      )) as Error,
      trigger: (await rejection(() => db.query("UPDATE vault SET owner = 'zed' WHERE id = 1"))) as Error,
    };
  });
  afterAll(async () => {
    await db.close();
  });

  it('a pg check violation with its detail (row values) and query: no row, constraint, table or SQL', async () => {
    const e = pgFailures.check as Error & { detail: string; query?: string };
    const { client } = await serve([echoTool((note) => `${note} ${e.message} ${e.detail} ${e.query}`)]);
    const result = await client.callTool('echo_failure', { note: 'why?' });
    expectFailure(result);
    expectNone(result, ['eve-rt', 'vault_api_secret_check', '"vault"', 'INSERT INTO', "'x'"]);
  });

  it('a pg unique violation: the duplicated e-mail never comes back', async () => {
    const e = pgFailures.unique as Error & { detail: string };
    const { client } = await serve([echoTool((note) => `${note}: ${e.message}. ${e.detail}`)]);
    const result = await client.callTool('echo_failure', { note: 'is ann-rt@example.com taken?' });
    // The model's own words are its own; the row value pg echoes in `detail` is removed.
    expect(seen(result).split('ann-rt@example.com').length - 1).toBeLessThanOrEqual(4 * 2);
    expectNone(result, ['vault_owner_key', 'Key (owner)']);
  });

  it('a PL/pgSQL failure with its `where`: no statement and no function name', async () => {
    const e = pgFailures.trigger as Error & { where: string };
    expect(e.where).toContain('SQL statement');
    const { client } = await serve([echoTool((note) => `${note} ${e.message} (${e.where})`)]);
    const result = await client.callTool('echo_failure', { note: 'why?' });
    expect(expectFailure(result).message).toBe(
      'upstream said: why? division by zero (SQL statement [sql]\nPL/pgSQL function [name] line 1 at PERFORM)',
    );
    expectNone(result, ['vault_guard_fn', '1/0', 'NEW.owner']);
  });
});

describe('hostile throwables: the model sees only the designed envelope, the log the whole error', () => {
  const SECRET = 'postgres://app:rt-hunter2@db-rt.internal:5432/orders';
  const throwing = (make: () => unknown): ToolDefinition =>
    defineTool({
      name: 'boom',
      description: 'Throws whatever the upstream made (test).',
      input: {},
      handler: async () => {
        throw make();
      },
    }) as ToolDefinition;

  const cases: Array<[string, () => unknown]> = [
    ['a string', () => SECRET],
    ['a number', () => 42],
    ['null', () => null],
    ['undefined', () => undefined],
    ['an object with a stack', () => ({ stack: `Error: ${SECRET}\n    at f (/srv/rt/x.js:1:1)` })],
    ['an error whose message is not a string', () => Object.assign(new Error('x'), { message: { SECRET } })],
    [
      'a circular error',
      () => {
        const e = new Error(SECRET) as Error & { self?: unknown };
        e.self = e;
        e.cause = e;
        return e;
      },
    ],
    [
      'an error with Symbol keys and a throwing toJSON/toString',
      () =>
        Object.assign(new Error(SECRET), {
          [Symbol('conn')]: SECRET,
          toJSON() {
            throw new Error('toJSON');
          },
          toString() {
            throw new Error('toString');
          },
        }),
    ],
    [
      'an AggregateError of causes',
      () => new AggregateError([new Error(SECRET), new Error('x', { cause: new Error(SECRET) })], SECRET),
    ],
  ];

  for (const [name, make] of cases) {
    it(`${name}: internal with an incident id the log has`, async () => {
      const { client, entries } = await serve([throwing(make)]);
      const result = await client.callTool('boom', {});
      const envelope = expectFailure(result);
      expect(envelope).toMatchObject({ error: 'internal', message: 'Internal error.', retryable: false });
      expect(envelope.incidentId).toMatch(INCIDENT_ID);
      expectNone(result, ['rt-hunter2', 'db-rt', '/srv/rt']);
      const line = entries.find((entry) => entry.fields.incidentId === envelope.incidentId);
      expect(line?.level).toBe('error');
      expect(line?.fields.error).toBeDefined();
    });
  }
});
describe('real Node errors echoed with the model’s text', () => {
  it('ECONNREFUSED with address and port, ENOENT with an absolute path', async () => {
    const port = await closedPort();
    const { client } = await serve([
      echoTool(async (note) => {
        const refused = await new Promise<Error>((resolve) =>
          connect({ host: '127.0.0.1', port }).on('error', resolve),
        );
        const missing = (await rejection(() => fs.readFile('/srv/rt-app/config/db.env'))) as Error;
        return `${note} ${refused.message} ${JSON.stringify(refused)} ${missing.message} ${refused.stack}`;
      }),
    ]);
    const result = await client.callTool('echo_failure', { note: 'ok?' });
    expectFailure(result);
    expectNone(result, ['127.0.0.1', `${port}`, '/srv/rt-app', 'db.env', 'node:net', 'redteam.test']);
  });
});

describe('the log side: every incident id the model sees has a record', () => {
  const hostileTool = (make: () => unknown): ToolDefinition =>
    defineTool({
      name: 'hostile',
      description: 'Throws an error object an upstream library built (test).',
      input: {},
      handler: async () => {
        throw make();
      },
    }) as ToolDefinition;

  const trap = () => {
    throw new Error('trap');
  };
  const cases: Array<[string, () => unknown]> = [
    [
      'an error whose message, name, stack and code getters throw',
      () => {
        const e = new Error('x');
        for (const key of ['message', 'name', 'stack', 'code']) Object.defineProperty(e, key, { get: trap });
        return e;
      },
    ],
    [
      'an error with an enumerable throwing getter',
      () => Object.defineProperty(new Error('db-rt down'), 'detail', { get: trap, enumerable: true }),
    ],
    ['a Proxy whose every trap throws', () => new Proxy({}, { get: trap, ownKeys: trap, has: trap })],
  ];
  for (const [name, make] of cases) {
    it(`${name}: internal, and the log line under its incident id is written`, async () => {
      const { client, entries } = await serve([hostileTool(make)]);
      const envelope = expectFailure(await client.callTool('hostile', {}));
      expect(envelope).toMatchObject({ error: 'internal', message: 'Internal error.' });
      expect(envelope.incidentId).toMatch(INCIDENT_ID);
      const line = entries.find(
        (entry) => entry.fields.incidentId === envelope.incidentId && entry.level === 'error',
      );
      expect(line?.fields.error).toBeDefined();
    });
  }

  it('an upstream that picks a new error code per call cannot push a real incident out of the log', async () => {
    let calls = 0;
    const flaky = defineTool({
      name: 'flaky',
      description: 'Calls an upstream whose error codes the attacker chooses (test).',
      input: { code: z.string() },
      handler: async ({ code }) => {
        calls += 1;
        throw Object.assign(new Error(`upstream failed (${calls})`), { code });
      },
    }) as ToolDefinition;
    const { client, entries, redact } = await serve([flaky], { logIntervalMs: 3_600_000 });
    // The real incident: the same failure twice; the second is only counted until the summary.
    await client.callTool('flaky', { code: 'EREAL' });
    const real = expectFailure(await client.callTool('flaky', { code: 'EREAL' })).incidentId;
    // The flood: 1,100 distinct classes within one interval.
    for (let i = 0; i < 1_100; i += 1) await client.callTool('flaky', { code: `EFLOOD${i}` });
    redact.close();
    const logged = JSON.stringify(entries.filter((entry) => entry.level !== 'debug'));
    expect(logged).toContain(real);
  }, 20_000);
});
