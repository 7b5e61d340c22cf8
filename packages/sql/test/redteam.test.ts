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
import pg from 'pg';
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

  const ordersOn = (
    on: Queryable,
    table = 'orders',
    timeoutMs?: number,
    name = `search_${table}`,
  ): ToolDefinition =>
    sqlTool({
      ...searchOrdersDeclaration,
      from: { schema: SCHEMA, table },
      name,
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
      ['search_orders', { limit: 0 }],
      ['search_orders', { limit: -1 }],
      ['search_orders', { limit: 2.5 }],
      ['search_orders', { limit: 51 }],
      ['search_orders', { offset: 5 }],
      ['search_orders', { days: 0 }],
      ['search_orders', { days: -30 }],
      ['search_orders', { status: null }],
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

  it('a statement cut by its timeout (on PostgreSQL a lock wait too) answers timeout naming no SQL, and its connection serves the next caller with its own settings', async () => {
    const one = await oneConnection();
    const before = await one.settings();
    // slow_orders sleeps 0.3 s per statement: past the tool's 100 ms on both engines (PGlite after the fact).
    const c = await serve([ordersOn(one.db, 'slow_orders', 100), ordersOn(one.db)]);
    const result = await c.callTool('search_slow_orders', { days: 365 });
    const failure = expectFailure(result);
    expect([failure.error, failure.message, failure.retryable]).toEqual([
      'timeout',
      'The query ran past its 100 ms limit.',
      true,
    ]);
    const seen = JSON.stringify(result);
    for (const internal of ['slow_orders', 'pg_sleep', 'SELECT', SCHEMA, 'canceling', '57014']) {
      expect([internal, seen.includes(internal)]).toEqual([internal, false]);
    }
    // The tool's SET LOCAL ended with its transaction: the connection has its own timeout again.
    expect(await one.settings()).toEqual(before);
    if (engine.cancelsRunningStatements) {
      // A lock wait counts against the timeout too: another session holds the table exclusively.
      const locker = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
      await locker.connect();
      try {
        await locker.query(`BEGIN; LOCK TABLE ${SCHEMA}.orders IN ACCESS EXCLUSIVE MODE`);
        const c2 = await serveAnother([ordersOn(one.db, 'orders', 100, 'search_briefly')], customer(0));
        const waited = expectFailure(await c2.callTool('search_briefly', { days: 365 }));
        expect([waited.error, waited.message]).toEqual(['timeout', 'The query ran past its 100 ms limit.']);
      } finally {
        await locker.query('ROLLBACK');
        await locker.end();
      }
      expect(await one.settings()).toEqual(before);
    }
    const next = await c.callTool('search_orders', { customer_email: 'bob', days: 365, sort: 'total_asc' });
    expect([next.isError, itemIds(next)]).toEqual([undefined, [3, 4]]);
  });

  it('a client that aborts a running statement gets no rows, and the connection comes back clean for the next caller', async () => {
    const one = await oneConnection();
    const before = await one.settings();
    // PostgreSQL cancels the running statement (a 5 s sleep); PGlite notices the abort after its 0.3 s one.
    const table = engine.cancelsRunningStatements ? 'very_slow_orders' : 'slow_orders';
    const c = await serve([ordersOn(one.db, table), ordersOn(one.db)]);
    const controller = new AbortController();
    const call = c.callTool(`search_${table}`, { days: 365 }, { signal: controller.signal });
    await one.holding();
    controller.abort();
    await expect(call).rejects.toThrow(/abort/i);
    expect(await one.settings()).toEqual(before);
    const next = await c.callTool('search_orders', { customer_email: 'carol', days: 365 });
    expect([next.isError, itemIds(next)]).toEqual([undefined, [7]]);
  });

  it('a value the column cannot hold answers invalid_argument (PGlite: no rows) naming no type, column, value or parameter', async () => {
    db = recording(database.db);
    const lookup = sqlTool({
      from: { schema: SCHEMA, table: 'orders' },
      columns: ['id'],
      filters: {
        // No bounds: the schema lets through any safe integer, an int4 column holds far fewer.
        order_id: { kind: 'equals', type: 'integer', column: 'id', description: 'One order id.' },
        // A free string compared with a date column.
        placed: { kind: 'equals', type: 'string', column: 'placed_on', description: 'Day placed.' },
      },
      limit: { default: 5, max: 5 },
      name: 'lookup_orders',
      description: 'Look orders up.',
      db,
    }) as ToolDefinition;
    const c = await serve([lookup]);
    for (const args of [
      { order_id: 2 ** 40 },
      { order_id: -(2 ** 53 - 1) },
      { placed: 'yesterday; DROP TABLE orders' },
      { placed: '2024-02-30' },
      { placed: '5874898-01-01' },
    ]) {
      const result = await c.callTool('lookup_orders', args);
      // PostgreSQL refuses the value (22003, 22007, 22008); PGlite may send a number typed as it is and
      // find no row. Either way the attacker learns nothing about the column.
      const answer =
        result.isError === true
          ? [expectFailure(result).error, expectFailure(result).message]
          : ['no rows', itemIds(result)];
      expect([args, answer]).toEqual([
        args,
        answer[0] === 'no rows' && engine.name === 'pglite'
          ? ['no rows', []]
          : ['invalid_argument', 'An argument is outside what the data can hold.'],
      ]);
      const seen = JSON.stringify(result);
      for (const internal of [
        'integer',
        'date',
        'placed_on',
        'portal',
        '$1',
        'range',
        'syntax',
        SCHEMA,
        String(Object.values(args)[0]),
      ]) {
        expect([args, internal, seen.includes(internal)]).toEqual([args, internal, false]);
      }
    }
    const ok = await c.callTool('lookup_orders', { order_id: 3 });
    expect(itemIds(ok)).toEqual([3]);
  });

  it('callers bound to different customers, interleaved on one connection with prepared statements, never see each other’s rows', async () => {
    const one = await oneConnection({ pg: { preparedStatements: true } });
    const mine = (): ToolDefinition =>
      sqlTool({
        ...myOrdersDeclaration,
        name: 'my_orders',
        description: 'My orders.',
        db: one.db,
      }) as ToolDefinition;
    const alice = await serveAnother([mine()], customer(1));
    const carol = await serveAnother([mine()], customer(4));
    const calls = Array.from({ length: 12 }, (_, i) =>
      i % 2 === 0
        ? alice.callTool('my_orders', i % 4 === 0 ? {} : { status: 'pending' })
        : carol.callTool('my_orders', i % 4 === 1 ? {} : { status: 'paid' }),
    );
    const seen = (await Promise.all(calls)).map(itemIds);
    expect(seen).toEqual(
      Array.from({ length: 12 }, (_, i) =>
        i % 2 === 0 ? (i % 4 === 0 ? [1, 2] : [2]) : i % 4 === 1 ? [7, 8] : [8],
      ),
    );
  });

  it('a claim the tenant shaped to widen or break its scope refuses the call with permission_denied and no rows', async () => {
    for (const claim of [
      [1, 4],
      '1 OR 1=1',
      '1; SET default_transaction_read_only = off',
      { $gt: 0 },
      1.5,
      'x\u0000',
      2 ** 60,
    ]) {
      db = recording(database.db);
      const mine = sqlTool({
        ...myOrdersDeclaration,
        name: 'my_orders',
        description: 'My orders.',
        db,
      }) as ToolDefinition;
      const c = await serveAnother([mine], customer(claim));
      const result = await c.callTool('my_orders', {});
      const failure = expectFailure(result);
      expect([claim, failure.error, failure.message]).toEqual([
        claim,
        'permission_denied',
        "This tool cannot use the caller's credentials.",
      ]);
      expect([claim, JSON.stringify(result).includes('customer_id')]).toEqual([claim, false]);
    }
  });

  it('a signed-in caller whose list claim is empty is refused, even where the binding is optional: it never sees every row', async () => {
    db = recording(database.db);
    const accountOrders = sqlTool({
      ...myOrdersDeclaration,
      bind: {
        customer_id: {
          // Optional: without a token the tool lists every order (the author's choice for a demo desk).
          value: ({ request }) => request.authInfo?.extra?.customerIds as number[] | undefined,
          list: true,
          optional: true,
        },
      },
      name: 'my_orders',
      description: "My accounts' orders.",
      db,
    }) as ToolDefinition;
    // A real token of a user who left every account: its claim lists none, so it may see no order.
    const none = await serveAnother([accountOrders], { ...customer(0), extra: { customerIds: [] } });
    const refused = await none.callTool('my_orders', {});
    expect(expectFailure(refused)).toEqual({
      ok: false,
      error: 'permission_denied',
      message: 'This tool needs an authenticated caller.',
      hint: 'The caller is not signed in or has no access to this data. Do not retry; tell the user.',
      retryable: false,
    });
    expect(db.statements).toEqual([]);
    const two = await serveAnother([accountOrders], { ...customer(0), extra: { customerIds: [2] } });
    expect(itemIds(await two.callTool('my_orders', {}))).toEqual([3, 4]);
  });

  it('a blank claim (empty or only whitespace) is refused before SQL: it never matches the rows no tenant owns', async () => {
    // Tickets nobody has claimed yet carry an empty org; an identity provider sends "" for an unset attribute.
    await database.rows(
      `CREATE TABLE ${SCHEMA}.tickets (id integer PRIMARY KEY, org text NOT NULL DEFAULT '')`,
    );
    await database.rows(
      `INSERT INTO ${SCHEMA}.tickets VALUES (1, 'acme'), (2, 'globex'), (3, DEFAULT), (4, ' ')`,
    );
    try {
      db = recording(database.db);
      const org = ({ request }: { request: { authInfo?: AuthInfo } }) => request.authInfo?.extra?.org;
      const tickets = (name: string, bind: Parameters<typeof sqlTool>[0]['bind']): ToolDefinition =>
        sqlTool({
          from: { schema: SCHEMA, table: 'tickets' },
          columns: ['id'],
          bind,
          sort: { keys: ['id'], default: 'id_asc' },
          limit: { default: 10, max: 10 },
          name,
          description: "My organisation's tickets.",
          db,
        }) as ToolDefinition;
      const tools = [
        tickets('my_tickets', { org: (source) => org(source) as string | undefined }),
        tickets('desk_tickets', {
          org: { value: (source) => org(source) as string | undefined, optional: true },
        }),
        tickets('group_tickets', {
          org: { value: (source) => org(source) as string[] | undefined, list: true },
        }),
      ];
      const blanks: [string, unknown, string][] = [
        ['my_tickets', '', 'This tool needs an authenticated caller.'],
        ['my_tickets', ' ', 'This tool needs an authenticated caller.'],
        ['my_tickets', '\t\u00a0\n', 'This tool needs an authenticated caller.'],
        ['desk_tickets', '', 'This tool needs an authenticated caller.'],
        ['group_tickets', ['acme', ''], "This tool cannot use the caller's credentials."],
        ['group_tickets', [' '], "This tool cannot use the caller's credentials."],
      ];
      for (const [tool, claim, message] of blanks) {
        const c = await serveAnother(tools, { ...customer(0), extra: { org: claim } });
        const failure = expectFailure(await c.callTool(tool, {}));
        expect([tool, claim, failure.error, failure.message]).toEqual([
          tool,
          claim,
          'permission_denied',
          message,
        ]);
      }
      expect(db.statements).toEqual([]);
      const acme = await serveAnother(tools, { ...customer(0), extra: { org: 'acme' } });
      expect(itemIds(await acme.callTool('my_tickets', {}))).toEqual([1]);
      expect(itemIds(await acme.callTool('desk_tickets', {}))).toEqual([1]);
      const groups = await serveAnother(tools, { ...customer(0), extra: { org: ['acme', 'globex'] } });
      expect(itemIds(await groups.callTool('group_tickets', {}))).toEqual([1, 2]);
    } finally {
      await database.rows(`DROP TABLE ${SCHEMA}.tickets`);
    }
  });

  it('a claim padded with whitespace is refused before SQL: the column type would read " 1" as customer 1, "acme " as acme', async () => {
    // PostgreSQL's input functions skip surrounding whitespace (integer, numeric, boolean) and char(n)
    // compares without trailing blanks: a padded claim is another string to every check before SQL
    // (an identity provider's uniqueness, an allowlist, a cache key), yet the same tenant in the table.
    await database.rows(`CREATE TABLE ${SCHEMA}.accounts (id integer PRIMARY KEY, org char(8) NOT NULL)`);
    await database.rows(`INSERT INTO ${SCHEMA}.accounts VALUES (1, 'acme'), (2, 'globex')`);
    try {
      db = recording(database.db);
      const mine = sqlTool({
        ...myOrdersDeclaration,
        name: 'my_orders',
        description: 'My orders.',
        db,
      }) as ToolDefinition;
      const orgAccounts = sqlTool({
        from: { schema: SCHEMA, table: 'accounts' },
        columns: ['id'],
        bind: { org: (ctx) => ctx.request.authInfo?.extra?.org as string | undefined },
        limit: { default: 10, max: 10 },
        name: 'org_accounts',
        description: "My organisation's accounts.",
        db,
      }) as ToolDefinition;
      const padded: [string, Record<string, unknown>][] = [
        ['my_orders', { customerId: ' 1' }],
        ['my_orders', { customerId: '1 ' }],
        ['my_orders', { customerId: '\t1\n' }],
        ['org_accounts', { org: 'acme ' }],
        ['org_accounts', { org: '\u00a0acme' }],
      ];
      for (const [tool, extra] of padded) {
        const c = await serveAnother([mine, orgAccounts], { ...customer(0), extra });
        const failure = expectFailure(await c.callTool(tool, {}));
        expect([tool, extra, failure.error, failure.message]).toEqual([
          tool,
          extra,
          'permission_denied',
          "This tool cannot use the caller's credentials.",
        ]);
      }
      expect(db.statements).toEqual([]);
      const c = await serveAnother([mine, orgAccounts], {
        ...customer(0),
        extra: { customerId: '1', org: 'acme' },
      });
      expect(itemIds(await c.callTool('my_orders', {}))).toEqual([1, 2]);
      expect(itemIds(await c.callTool('org_accounts', {}))).toEqual([1]);
    } finally {
      await database.rows(`DROP TABLE ${SCHEMA}.accounts`);
    }
  });

  it('a claim with a lone surrogate is refused before SQL: the driver would send U+FFFD, an id the token never spelled', async () => {
    db = recording(database.db);
    const byEmail = sqlTool({
      ...myOrdersDeclaration,
      bind: { customer_email: (ctx) => ctx.request.authInfo?.extra?.email as string | undefined },
      name: 'my_orders',
      description: 'My orders.',
      db,
    }) as ToolDefinition;
    for (const email of ['alice@example.com\uD800', '\uDFFFalice@example.com']) {
      const c = await serveAnother([byEmail], { ...customer(1), extra: { email } });
      const failure = expectFailure(await c.callTool('my_orders', {}));
      expect([email, failure.error]).toEqual([email, 'permission_denied']);
    }
    expect(db.statements).toEqual([]);
    const c = await serveAnother([byEmail], { ...customer(1), extra: { email: 'alice@example.com' } });
    expect(itemIds(await c.callTool('my_orders', {}))).toEqual([1, 2]);
  });

  it('a claim spelling another tenant’s integer or uuid another way (+1, 01, -0, 0x1, an uppercase uuid) is refused before the tool’s statement; in a text column the same text is just itself', async () => {
    // The identity provider (or an allowlist, a cache key) sees "+1" and "1" as two values; an integer
    // column reads both as customer 1 (PostgreSQL 16+ also reads 0x1, 0o1, 0b1 and 0_1 so), a uuid
    // column reads every case and brace of one uuid as the same.
    await database.rows(
      `CREATE TABLE ${SCHEMA}.members (id integer PRIMARY KEY, tenant uuid NOT NULL, code text NOT NULL)`,
    );
    await database.rows(`INSERT INTO ${SCHEMA}.members VALUES
      (1, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '007'),
      (2, 'b1ffcd00-0d1c-4ef8-bb6d-6bb9bd380a22', '+4420')`);
    try {
      db = recording(database.db);
      const claim = (name: string) => (source: { request: { authInfo?: AuthInfo } }) =>
        source.request.authInfo?.extra?.[name] as string | undefined;
      const members = (name: string, bind: Parameters<typeof sqlTool>[0]['bind']): ToolDefinition =>
        sqlTool({
          from: { schema: SCHEMA, table: 'members' },
          columns: ['id'],
          bind,
          limit: { default: 10, max: 10 },
          name,
          description: 'Members of my tenant.',
          db,
        }) as ToolDefinition;
      const tools = [
        sqlTool({
          ...myOrdersDeclaration,
          name: 'my_orders',
          description: 'My orders.',
          db,
        }) as ToolDefinition,
        sqlTool({
          ...myOrdersDeclaration,
          bind: { customer_id: { value: (source) => claim('customerIds')(source) as never, list: true } },
          name: 'group_orders',
          description: "My group's orders.",
          db,
        }) as ToolDefinition,
        members('tenant_members', { tenant: claim('tenant') }),
        members('code_members', { code: claim('code') }),
      ];
      const respelled: [string, Record<string, unknown>][] = [
        ['my_orders', { customerId: '+1' }],
        ['my_orders', { customerId: '01' }],
        ['my_orders', { customerId: '0001' }],
        ['my_orders', { customerId: '-0' }],
        ['my_orders', { customerId: '0x1' }],
        ['my_orders', { customerId: '0b1' }],
        ['my_orders', { customerId: '0_1' }],
        ['group_orders', { customerIds: ['4', '+1'] }],
        ['tenant_members', { tenant: 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11' }],
        ['tenant_members', { tenant: '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}' }],
        ['tenant_members', { tenant: 'a0eebc999c0b4ef8bb6d6bb9bd380a11' }],
      ];
      for (const [tool, extra] of respelled) {
        const c = await serveAnother(tools, { ...customer(0), extra });
        const result = await c.callTool(tool, {});
        const failure = expectFailure(result);
        expect([tool, extra, failure.error, failure.message]).toEqual([
          tool,
          extra,
          'permission_denied',
          "This tool cannot use the caller's credentials.",
        ]);
        const seen = JSON.stringify(result);
        for (const internal of ['customer_id', 'tenant', 'integer', 'uuid', '$1']) {
          expect([tool, internal, seen.includes(internal)]).toEqual([tool, internal, false]);
        }
      }
      // The tool's own statement never ran for them: at most the read-back of the claim did.
      expect(db.statements.filter(({ text }) => text.includes('_toolgate_total'))).toEqual([]);
      // The one spelling the column prints is served, and so is any text in a text column.
      const plain = await serveAnother(tools, {
        ...customer(0),
        extra: {
          customerId: '1',
          customerIds: ['4', '2'],
          tenant: 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
          code: '007',
        },
      });
      expect(itemIds(await plain.callTool('my_orders', {}))).toEqual([1, 2]);
      expect(itemIds(await plain.callTool('group_orders', {}))).toEqual([3, 4, 7, 8]);
      expect(itemIds(await plain.callTool('tenant_members', {}))).toEqual([1]);
      expect(itemIds(await plain.callTool('code_members', {}))).toEqual([1]);
      const phone = await serveAnother(tools, { ...customer(0), extra: { code: '+4420' } });
      expect(itemIds(await phone.callTool('code_members', {}))).toEqual([2]);
    } finally {
      await database.rows(`DROP TABLE ${SCHEMA}.members`);
    }
  });

  it('on a pool dedicated to read-only tools, a timeout, a cancel and another tool’s SET LOCAL never change the session the next caller gets', async () => {
    const one = await oneConnection({
      pg: { readOnlySession: { timeoutMs: 2000 }, preparedStatements: true },
    });
    const c = await serve([
      ordersOn(one.db, 'orders', 2000),
      ordersOn(one.db, 'slow_orders', 100),
      ordersOn(
        one.db,
        engine.cancelsRunningStatements ? 'very_slow_orders' : 'slow_orders',
        2000,
        'search_slowly',
      ),
    ]);
    const first = await c.callTool('search_orders', { customer_email: 'alice' });
    expect(itemIds(first)).toEqual([1, 2]);
    // PostgreSQL: the connection now runs read-only with the session's timeout (on purpose); PGlite has
    // no session path and stays as it was.
    const session = await one.settings();
    expect(session).toEqual(
      engine.cancelsRunningStatements
        ? { readOnly: 'on', statementTimeout: '2s' }
        : { readOnly: 'off', statementTimeout: '0' },
    );
    expect(expectFailure(await c.callTool('search_slow_orders', { days: 365 })).error).toBe('timeout');
    expect(await one.settings()).toEqual(session);
    const controller = new AbortController();
    const call = c.callTool('search_slowly', { days: 365 }, { signal: controller.signal });
    await one.holding();
    controller.abort();
    await expect(call).rejects.toThrow(/abort/i);
    expect(await one.settings()).toEqual(session);
    const next = await c.callTool('search_orders', { customer_email: 'alice' });
    expect(itemIds(next)).toEqual([1, 2]);
  });

  it('a list argument cannot smuggle values past its enum, its length or its element type', async () => {
    const c = await serve([explore()]);
    for (const statuses of [
      [],
      ['paid', 'paid', 'paid', 'paid', 'paid', 'paid'],
      ['paid', "paid' OR '1'='1"],
      ['paid', null],
      [['paid']],
      'paid',
      { 0: 'paid', length: 1 },
    ]) {
      const failure = expectFailure(await c.callTool('explore_orders', { statuses }));
      expect([statuses, failure.error]).toEqual([statuses, 'invalid_argument']);
    }
    expect(db.statements).toEqual([]);
    const allowed = await c.callTool('explore_orders', { statuses: ['paid', 'paid'] });
    expect(itemIds(allowed)).toEqual([6, 8]);
  });
});
