// Red-team tests: a hostile model fills a declared SQL tool with every argument it controls and tries to
// change the statement, read rows or columns the declaration does not expose, escape the read-only
// transaction or its statement timeout, learn the schema or other callers' rows from what comes back, or
// leave a connection behind that hurts the next caller (a cancel, a timeout, a refused value). Each test
// drives real tools/call round trips on embedded PGlite (and on PostgreSQL when TEST_DATABASE_URL is set)
// and asserts what the attacker gets instead; after every attack the table is checked intact, and after
// every fault the connection it ran on is checked out of any transaction with its own settings.
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { createSilentLogger, type ToolDefinition } from '@toolgate/core';
import { expectFailure, serveTools, type TestClient } from '@toolgate/core/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Queryable, sqlTool } from '../src/index.js';
import {
  exploreOrdersDeclaration,
  myOrdersDeclaration,
  searchOrdersDeclaration,
  searchOrdersOptions,
} from './declarations.js';
import {
  ENGINES,
  type OneConnection,
  type RecordingQueryable,
  recording,
  SCHEMA,
  type TestDatabase,
} from './engines.js';

const INJECTIONS = [
  "x' OR '1'='1",
  "'; DROP TABLE orders; --",
  "alice%' UNION SELECT customer_email, status, 1, 1, now() FROM orders --",
  '$1); DELETE FROM orders; --',
  "E'\\\\x27 OR 1=1",
  '/**/OR/**/1=1',
  "') OR pg_sleep(5) IS NULL --",
  '$$; SET default_transaction_read_only = off; $$',
  'COMMIT; DELETE FROM orders',
];

describe.each(ENGINES)('red team: sqlTool on $name', (engine) => {
  let database: TestDatabase;
  let db: RecordingQueryable;
  let client: TestClient | undefined;
  const clients: TestClient[] = [];
  const connections: OneConnection[] = [];

  beforeAll(async () => {
    database = await engine.open();
  });
  afterAll(async () => {
    await database.close();
  });
  afterEach(async () => {
    await client?.close();
    client = undefined;
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await Promise.all(connections.splice(0).map((c) => c.close()));
    // Whatever the attack, the table holds its eight rows afterwards.
    const rows = await database.db.readOnly({ timeoutMs: 2000 }, (runner) =>
      runner.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.orders`, []),
    );
    expect(rows.rows).toEqual([{ n: 8 }]);
  });

  async function serve(tools: ToolDefinition[], authInfo?: AuthInfo): Promise<TestClient> {
    client = await serveTools(tools, {
      logger: createSilentLogger(),
      ...(authInfo === undefined ? {} : { authInfo }),
    });
    return client;
  }

  /** Another client of its own (another caller), closed after the test. */
  async function serveAnother(tools: ToolDefinition[], authInfo: AuthInfo): Promise<TestClient> {
    const other = await serveTools(tools, { logger: createSilentLogger(), authInfo });
    clients.push(other);
    return other;
  }

  async function oneConnection(options?: Parameters<TestDatabase['oneConnection']>[0]) {
    const one = await database.oneConnection(options);
    connections.push(one);
    return one;
  }

  const ordersOn = (on: Queryable, table = 'orders', timeoutMs?: number): ToolDefinition =>
    sqlTool({
      ...searchOrdersDeclaration,
      from: { schema: SCHEMA, table },
      name: `search_${table}`,
      description: `Search ${table}.`,
      db: on,
      noun: 'orders',
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
    }) as ToolDefinition;

  const customer = (customerId: unknown): AuthInfo => ({
    token: `t-${String(customerId)}`,
    clientId: 'desk',
    scopes: [],
    extra: { sub: `customer-${String(customerId)}`, customerId },
  });

  const itemIds = (result: { structuredContent?: unknown }): number[] =>
    (result.structuredContent as { items: { id: number }[] }).items.map((item) => item.id);

  function search(): ToolDefinition {
    db = recording(database.db);
    return sqlTool(searchOrdersOptions(db)) as ToolDefinition;
  }

  function explore(): ToolDefinition {
    db = recording(database.db);
    return sqlTool({
      ...exploreOrdersDeclaration,
      name: 'explore_orders',
      description: 'Explore orders.',
      db,
    }) as ToolDefinition;
  }

  it('injection strings in prefix, contains and equals filters are values: matched literally, nothing else runs', async () => {
    const c = await serve([search(), explore()]);
    for (const text of INJECTIONS) {
      for (const [tool, args] of [
        ['search_orders', { customer_email: text, days: 365 }],
        ['explore_orders', { note: text }],
        ['explore_orders', { note_ci: text }],
        ['explore_orders', { email: text }],
      ] as const) {
        const result = await c.callTool(tool, args);
        expect([text, tool, result.isError]).toEqual([text, tool, undefined]);
        expect((result.structuredContent as { items: unknown[]; total: number }).total).toBe(0);
      }
    }
    // Every statement sent was one of the declared shapes (one per filter tried): the texts never held
    // the input, which travelled as a parameter value.
    expect(new Set(db.statements.map(({ text }) => text)).size).toBeLessThanOrEqual(4);
    for (const { text, values } of db.statements) {
      for (const injection of INJECTIONS) expect(text).not.toContain(injection);
      // The value as sent: the text itself, or (LIKE) with `\`, `%` and `_` escaped and wildcards around it.
      const sent = values
        .filter((value): value is string => typeof value === 'string')
        .flatMap((value) => [value, value.replace(/^%|%$/g, '').replace(/\\([\\%_])/g, '$1')]);
      expect([values, sent.some((value) => INJECTIONS.includes(value))]).toEqual([values, true]);
    }
  });

  it('LIKE wildcards and escapes in the model’s text match only themselves', async () => {
    const c = await serve([search()]);
    for (const [prefix, expected] of [
      ['%', []],
      ['_', []],
      ['\\', []],
      ['50%', [5]],
      ['bob_', [4]],
      ['a\\b', [6]],
      ["o'hara", [8]],
    ] as const) {
      const result = await c.callTool('search_orders', {
        customer_email: prefix,
        days: 365,
        sort: 'total_asc',
      });
      const items = (result.structuredContent as { items: { id: number }[] }).items.map((item) => item.id);
      expect([prefix, items]).toEqual([prefix, expected]);
    }
  });

  it('sort expressions, column names, extra keys and the bound parameter’s name are refused before SQL', async () => {
    db = recording(database.db);
    const mine = sqlTool({
      ...myOrdersDeclaration,
      name: 'my_orders',
      description: 'My orders.',
      db,
    }) as ToolDefinition;
    const c = await serve([search(), mine], {
      token: 't',
      clientId: 'c',
      scopes: [],
      extra: { customerId: 1 },
    });
    const attempts: [string, Record<string, unknown>][] = [
      ['search_orders', { sort: 'id; DROP TABLE orders' }],
      ['search_orders', { sort: '(SELECT 1)' }],
      ['search_orders', { sort: 'created_at_desc', columns: ['customer_id'] }],
      ['search_orders', { status: "shipped' OR '1'='1" }],
      ['search_orders', { days: '30; DROP TABLE orders' }],
      ['search_orders', { days: 1e9 }],
      ['search_orders', { limit: '10 UNION SELECT 1' }],
      ['search_orders', { customer_email: ['a', 'b'] }],
      ['search_orders', { customer_email: { $ne: null } }],
      ['search_orders', { constructor: { prototype: { x: 1 } } }],
      ['my_orders', { customer_id: 2 }],
    ];
    for (const [tool, args] of attempts) {
      const result = await c.callTool(tool, args);
      expect([tool, args, result.isError]).toEqual([tool, args, true]);
      expect([tool, args, expectFailure(result).error]).toEqual([tool, args, 'invalid_argument']);
    }
    expect(db.statements).toEqual([]);
    // A `__proto__` key never arrives as one (the SDK's JSON handling drops it): no inherited limit or
    // filter reaches the query, and the answer is the one for no arguments at all.
    const plain = await c.callTool('search_orders', {});
    const polluted = await c.callTool(
      'search_orders',
      JSON.parse('{"__proto__": {"limit": 1000, "status": "paid"}}'),
    );
    expect(polluted.structuredContent).toEqual(plain.structuredContent);
    expect(db.statements[1]!.values).toEqual(db.statements[0]!.values);
    expect(({} as Record<string, unknown>).limit).toBeUndefined();
  });

  it('text no column can hold (NUL, a lone surrogate) is refused as an argument, not sent', async () => {
    const c = await serve([search(), explore()]);
    for (const text of ['a\u0000b', '\uD800', 'x\uDFFFy']) {
      for (const [tool, args] of [
        ['search_orders', { customer_email: text }],
        ['explore_orders', { note: text }],
      ] as const) {
        const failure = expectFailure(await c.callTool(tool, args));
        expect([tool, text, failure.error]).toEqual([tool, text, 'invalid_argument']);
      }
    }
  });

  it('a limit far past the maximum is clamped by the schema: the answer never exceeds the declared max', async () => {
    const c = await serve([explore()]);
    const failure = expectFailure(await c.callTool('explore_orders', { limit: 1_000_000 }));
    expect(failure.error).toBe('invalid_argument');
    const result = await c.callTool('explore_orders', { limit: 10 });
    expect((result.structuredContent as { items: unknown[] }).items.length).toBeLessThanOrEqual(10);
  });

  it('a failure never shows the statement, the schema or the values', async () => {
    db = recording(database.db);
    const broken = sqlTool({
      ...exploreOrdersDeclaration,
      // A declaration mistake (a column the table lacks): the database error names it.
      columns: ['id', 'secret_internal_column'],
      name: 'broken_orders',
      description: 'Broken.',
      db,
    }) as ToolDefinition;
    const c = await serve([broken]);
    const result = await c.callTool('broken_orders', { note: "x' OR 1=1 --" });
    const failure = expectFailure(result);
    expect(failure.error).toBe('internal');
    const seen = JSON.stringify(result);
    for (const internal of ['secret_internal_column', SCHEMA, 'SELECT', 'LIKE', "x' OR 1=1"]) {
      expect(seen).not.toContain(internal);
    }
  });

  it('a cancel that lands while the call opens its transaction leaves the connection out of any transaction: the next caller is served', async () => {
    // PostgreSQL: the cancel stops the statement after BEGIN ran, so the connection sits in an aborted
    // transaction block unless the adapter rolls it back; PGlite: the abort lands before the first statement.
    const one = await oneConnection({ holdFirstTransactionStartMs: 2000 });
    const before = await one.settings();
    expect(before.readOnly).toBe('off');
    const c = await serve([ordersOn(one.db)]);
    const controller = new AbortController();
    const call = c.callTool('search_orders', { days: 365 }, { signal: controller.signal });
    await one.holding();
    controller.abort();
    await expect(call).rejects.toThrow(/abort/i);
    expect(await one.settings()).toEqual(before);
    const next = await c.callTool('search_orders', { customer_email: 'alice', sort: 'total_asc' });
    expect([next.isError, itemIds(next)]).toEqual([undefined, [1, 2]]);
  });
});
