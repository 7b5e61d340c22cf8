import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  callKey,
  createSilentLogger,
  outcomeOf,
  registerTools,
  type ToolDefinition,
  type ToolMiddleware,
} from '@toolgate/core';
import {
  connectTestClient,
  createTestContext,
  expectFailure,
  serveTools,
  type TestClient,
} from '@toolgate/core/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Queryable, sqlTool } from '../src/index.js';
import {
  exploreOrdersDeclaration,
  myOrdersDeclaration,
  STATUSES,
  searchOrdersOptions,
} from './declarations.js';
import {
  APPLICATION_NAME,
  ENGINES,
  type RecordingQueryable,
  recording,
  SCHEMA,
  type TestDatabase,
  unprivileged,
} from './engines.js';

const ALL_IDS = [1, 2, 3, 4, 5, 6, 7, 8];

describe.each(ENGINES)('sqlTool on $name', (engine) => {
  let database: TestDatabase;
  let db: RecordingQueryable;
  let client: TestClient | undefined;

  beforeAll(async () => {
    database = await engine.open();
  });
  afterAll(async () => {
    await database.close();
  });
  afterEach(async () => {
    await client?.close();
    client = undefined;
  });

  async function serve(tools: ToolDefinition[], authInfo?: AuthInfo) {
    const server = new McpServer({ name: 'sql-test', version: '1.0.0' });
    registerTools(server, tools, { logger: createSilentLogger() });
    client = await connectTestClient(server, authInfo === undefined ? {} : { authInfo });
    return client;
  }

  function searchOrders(queryable: Queryable = database.db) {
    db = recording(queryable);
    return sqlTool(searchOrdersOptions(db));
  }

  function explore() {
    db = recording(database.db);
    return sqlTool({
      ...exploreOrdersDeclaration,
      name: 'explore_orders',
      description: 'Explore orders.',
      db,
    });
  }

  async function ids(tool: ToolDefinition, args: Record<string, unknown>): Promise<number[]> {
    const c = client ?? (await serve([tool]));
    const result = await c.callTool(tool.name, args);
    expect(result.isError).toBeUndefined();
    return (result.structuredContent as { items: { id: number }[] }).items.map((item) => item.id);
  }

  async function tableIntact(): Promise<void> {
    const rows = await database.rows(`SELECT id FROM ${SCHEMA}.orders ORDER BY id`);
    expect(rows.map((row) => row.id)).toEqual(ALL_IDS);
  }

  describe('search_orders, the mission example', () => {
    it('publishes flat, typed inputs with their limits and the { items, total } output', async () => {
      const c = await serve([searchOrders()]);
      const [tool] = (await c.client.listTools()).tools;
      expect(tool!.annotations).toEqual({ readOnlyHint: true, openWorldHint: false });
      expect(tool!.inputSchema).toEqual({
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        additionalProperties: false,
        properties: {
          status: { type: 'string', enum: [...STATUSES], description: 'Only orders in this status.' },
          days: {
            type: 'integer',
            minimum: 1,
            maximum: 365,
            default: 30,
            description: 'Only orders placed within the last N days.',
          },
          customer_email: {
            type: 'string',
            minLength: 1,
            maxLength: 100,
            description: 'Only orders whose customer email starts with this text.',
          },
          sort: {
            type: 'string',
            enum: ['created_at_asc', 'created_at_desc', 'total_asc', 'total_desc'],
            default: 'created_at_desc',
            description: 'Sort order. Default created_at_desc.',
          },
          limit: {
            type: 'integer',
            minimum: 1,
            maximum: 50,
            default: 20,
            description: 'How many rows to return, at most 50. Default 20.',
          },
        },
      });
      expect(tool!.outputSchema).toMatchObject({
        required: expect.arrayContaining(['items', 'ok']),
        properties: {
          items: {
            type: 'array',
            items: {
              required: ['id', 'status', 'email', 'total_cents', 'created_at'],
              additionalProperties: false,
            },
          },
          total: { type: 'integer', minimum: 0 },
        },
      });
    });

    it('answers { items, total } newest first within the default 30 days, with a note', async () => {
      const c = await serve([searchOrders()]);
      const result = await c.callTool('search_orders', { status: 'shipped' });
      const expected = await database.rows(
        `SELECT id, status, customer_email AS email, total_cents, created_at FROM ${SCHEMA}.orders WHERE id IN (1, 3) ORDER BY created_at DESC`,
      );
      const items = expected.map((row) => ({ ...row, created_at: (row.created_at as Date).toISOString() }));
      const structured = { ok: true, items, total: 2, note: 'Returned all 2 matching orders.' };
      expect(result).toEqual({
        content: [{ type: 'text', text: JSON.stringify(structured) }],
        structuredContent: structured,
      });
      expect(db.transactions).toEqual([{ timeoutMs: 5000, signal: expect.any(AbortSignal) }]);
      expect(db.statements).toHaveLength(1);
      expect(db.statements[0]!.values).toEqual(['shipped', 30, 20]);
    });

    it('days narrows the window, sort orders by the whitelisted key', async () => {
      const tool = searchOrders();
      expect(await ids(tool, { days: 4 })).toEqual([8, 1, 3, 5]);
      expect(await ids(tool, { days: 365, sort: 'total_desc' })).toEqual([7, 4, 5, 6, 2, 1, 3, 8]);
      expect(await ids(tool, { days: 365, sort: 'created_at_asc' })).toEqual([7, 4, 2, 6, 5, 3, 1, 8]);
    });

    it('the prefix matches %, _ and \\ literally', async () => {
      const tool = searchOrders();
      expect(await ids(tool, { customer_email: 'alice' })).toEqual([1, 2]);
      expect(await ids(tool, { customer_email: '50%', days: 365 })).toEqual([5]);
      expect(await ids(tool, { customer_email: '%', days: 365 })).toEqual([]);
      expect(await ids(tool, { customer_email: 'bob_', days: 365 })).toEqual([4]);
      expect(await ids(tool, { customer_email: '_', days: 365 })).toEqual([]);
      expect(await ids(tool, { customer_email: 'a\\b', days: 365 })).toEqual([6]);
      expect(await ids(tool, { customer_email: "o'hara" })).toEqual([8]);
    });

    it('a cut list says how many of how many and how to see the rest', async () => {
      const c = await serve([searchOrders()]);
      const result = await c.callTool('search_orders', { days: 365, limit: 3 });
      expect(result.structuredContent).toMatchObject({
        total: 8,
        note: 'Returned 3 of 8 matching orders; the list was cut at 3. Raise limit (at most 50) or narrow the filters to see the rest.',
      });
      expect((result.structuredContent as { items: unknown[] }).items).toHaveLength(3);
    });

    it('an empty result is a success with an empty list and a note', async () => {
      const c = await serve([searchOrders()]);
      const result = await c.callTool('search_orders', { status: 'delivered', days: 1 });
      expect(result.isError).toBeUndefined();
      expect(result.structuredContent).toEqual({
        ok: true,
        items: [],
        total: 0,
        note: 'No orders match these filters. Try wider filters; do not repeat the same call.',
      });
    });

    it('clamps a limit above the maximum on the server, whatever the schema said', async () => {
      const tool = searchOrders();
      const result = await tool.handler({ days: 365, limit: 10_000 }, createTestContext({ tool }));
      expect(db.statements[0]!.values).toEqual([365, 50]);
      expect(result.structuredContent).toMatchObject({
        total: 8,
        note: 'Returned all 8 matching orders. The limit 10000 was clamped to 50.',
      });
    });
  });

  describe('the other filter kinds', () => {
    it('equals on an integer and on a string', async () => {
      const tool = explore();
      expect(await ids(tool, { id: 3 })).toEqual([3]);
      expect(await ids(tool, { email: 'bob@example.com' })).toEqual([3]);
      expect(await ids(tool, { email: 'BOB@example.com' })).toEqual([]);
    });

    it('a value the column cannot hold answers invalid_argument, not internal', async () => {
      db = recording(database.db);
      const byId = sqlTool({
        from: { schema: SCHEMA, table: 'orders' },
        columns: ['id'],
        // No maximum: the schema takes any safe integer, the int4 column does not.
        filters: { id: { kind: 'equals', type: 'integer', description: 'One order id.' } },
        sort: exploreOrdersDeclaration.sort,
        limit: exploreOrdersDeclaration.limit,
        name: 'order_by_id',
        description: 'One order by id.',
        db,
      });
      const c = await serve([byId]);
      const envelope = expectFailure(await c.callTool('order_by_id', { id: 3_000_000_000 }));
      expect(envelope).toEqual({
        ok: false,
        error: 'invalid_argument',
        message: 'An argument is outside what the data can hold.',
        hint: 'Use a smaller number or a valid value, and call again.',
        retryable: false,
        // The database's own message (the column type, the value) is logged under this id.
        incidentId: expect.stringMatching(/^inc_/),
      });
      expect(await ids(byId, { id: 3 })).toEqual([3]);
    });

    it('oneOf matches any listed value', async () => {
      const tool = explore();
      expect(await ids(tool, { statuses: ['paid', 'cancelled'] })).toEqual([4, 6, 8]);
      expect(await ids(tool, { statuses: ['delivered'] })).toEqual([5]);
    });

    it('integer ranges are inclusive; each bound works alone', async () => {
      const tool = explore();
      expect(await ids(tool, { min_total: 1500, max_total: 3000 })).toEqual([1, 2, 6]);
      expect(await ids(tool, { min_total: 9900 })).toEqual([4, 7]);
      expect(await ids(tool, { max_total: 500 })).toEqual([3, 8]);
    });

    it('date ranges include the whole last day', async () => {
      const tool = explore();
      expect(await ids(tool, { min_placed: '2024-01-02', max_placed: '2024-01-05' })).toEqual([
        2, 3, 4, 5, 6,
      ]);
      expect(await ids(tool, { min_placed: '2024-01-31' })).toEqual([7, 8]);
    });

    it('contains matches inside the text, literally, with or without case', async () => {
      const tool = explore();
      expect(await ids(tool, { note: 'gift' })).toEqual([1, 8]);
      expect(await ids(tool, { note: '100%' })).toEqual([4]);
      expect(await ids(tool, { note: '0% r' })).toEqual([4]);
      expect(await ids(tool, { note: 'refund_' })).toEqual([4]);
      expect(await ids(tool, { note: 'a\\b' })).toEqual([6]);
      expect(await ids(tool, { note: 'DOOR' })).toEqual([]);
      expect(await ids(tool, { note_ci: 'DOOR' })).toEqual([3]);
    });
  });

  describe('hostile arguments', () => {
    // Each names the real table (the schema is this worker's), as an attacker who learnt it would.
    const INJECTIONS = [
      "' OR '1'='1",
      `'; DROP TABLE ${SCHEMA}.orders; --`,
      `x' UNION SELECT id FROM ${SCHEMA}.orders --`,
      '$1',
      `\\'; DELETE FROM ${SCHEMA}.orders; --`,
      `'); INSERT INTO ${SCHEMA}.orders VALUES (99); --`,
    ];

    it('an injection string in every text field is matched literally and changes nothing', async () => {
      const search = searchOrders();
      const exploreTool = explore();
      const c = await serve([search, exploreTool]);
      for (const text of INJECTIONS) {
        for (const [tool, args] of [
          ['search_orders', { customer_email: text, days: 365 }],
          ['explore_orders', { email: text }],
          ['explore_orders', { note: text }],
          ['explore_orders', { note_ci: text }],
        ] as const) {
          const result = await c.callTool(tool, args);
          expect([tool, args, result.structuredContent ?? result.content]).toEqual([
            tool,
            args,
            { ok: true, items: [], total: 0, note: expect.any(String) },
          ]);
        }
      }
      await tableIntact();
    });

    it("arguments are validated with zod's synchronous parse (its refinements are declared synchronous), refusals included", async () => {
      const search = searchOrders();
      const exploreTool = explore();
      const asyncParses = [
        vi.spyOn(search.inputSchema, 'safeParseAsync'),
        vi.spyOn(exploreTool.inputSchema, 'safeParseAsync'),
      ];
      const c = await serve([search, exploreTool]);
      for (const [tool, args] of [
        ['search_orders', { customer_email: 'alice' }],
        ['explore_orders', { min_placed: '2024-01-01', email: 'a', note: 'gift' }],
      ] as const) {
        expect((await c.callTool(tool, args)).isError).toBeUndefined();
      }
      for (const [tool, args] of [
        ['search_orders', { customer_email: 'a\u0000b' }],
        ['explore_orders', { email: '\udfff' }],
        ['explore_orders', { max_placed: '2019-12-31' }],
      ] as const) {
        expect(expectFailure(await c.callTool(tool, args)).error).toBe('invalid_argument');
      }
      for (const parse of asyncParses) expect(parse).not.toHaveBeenCalled();
    });

    it('values outside an enum, a range or a list are refused before any SQL runs', async () => {
      const search = searchOrders();
      const searchDb = db;
      const exploreTool = explore();
      const c = await serve([search, exploreTool]);
      const refused: [string, Record<string, unknown>, string][] = [
        ['search_orders', { status: "shipped' OR '1'='1" }, 'status'],
        ['search_orders', { status: 'SHIPPED' }, 'status'],
        ['search_orders', { days: 0 }, 'days'],
        ['search_orders', { days: 366 }, 'days'],
        ['search_orders', { days: 1.5 }, 'days'],
        ['search_orders', { days: '7; DROP TABLE orders' }, 'days'],
        ['search_orders', { sort: 'id_desc' }, 'sort'],
        ['search_orders', { sort: 'created_at DESC; DROP TABLE orders' }, 'sort'],
        ['search_orders', { limit: 51 }, 'limit'],
        ['search_orders', { limit: 0 }, 'limit'],
        ['search_orders', { customer_email: 'a'.repeat(101) }, 'customer_email'],
        ['search_orders', { customer_email: '' }, 'customer_email'],
        ['search_orders', { customer_email: 'a\u0000b' }, 'customer_email'],
        ['search_orders', { customer_email: 'a\ud800b' }, 'customer_email'],
        ['explore_orders', { email: '\udfff' }, 'email'],
        ['explore_orders', { note: 'gift\ud83d' }, 'note'],
        ['search_orders', { customer_email: ['alice'] }, 'customer_email'],
        ['search_orders', { sql: 'SELECT 1' }, 'sql'],
        ['explore_orders', { id: 0 }, 'id'],
        ['explore_orders', { statuses: ['paid', 'refunded'] }, 'statuses.1'],
        ['explore_orders', { statuses: [] }, 'statuses'],
        ['explore_orders', { min_total: -1 }, 'min_total'],
        ['explore_orders', { max_total: 100_001 }, 'max_total'],
        ['explore_orders', { min_placed: '2019-12-31' }, 'min_placed'],
        ['explore_orders', { max_placed: '2024-02-30' }, 'max_placed'],
        ['explore_orders', { max_placed: "2024-01-01'::date; --" }, 'max_placed'],
      ];
      for (const [tool, args, path] of refused) {
        const envelope = expectFailure(await c.callTool(tool, args));
        expect(envelope.error).toBe('invalid_argument');
        expect(envelope.fields?.map((field) => field.path)).toContain(path);
      }
      expect(searchDb.transactions).toEqual([]);
      expect(db.transactions).toEqual([]);
      await tableIntact();
    });
  });

  describe('parameters bound from the caller', () => {
    function myOrders() {
      db = recording(database.db);
      return sqlTool({
        ...myOrdersDeclaration,
        name: 'my_orders',
        description: "The caller's own orders.",
        db,
      });
    }
    const customer = (customerId: number) => ({
      token: 't',
      clientId: 'c',
      scopes: [],
      extra: { customerId },
    });

    it('are invisible in the input schema', async () => {
      const c = await serve([myOrders()]);
      const { tools } = await c.client.listTools();
      expect(tools[0]!.inputSchema.properties).not.toHaveProperty('customer_id');
      expect(Object.keys(tools[0]!.inputSchema.properties ?? {})).toEqual(['status', 'sort', 'limit']);
      expect(tools[0]!.inputSchema.additionalProperties).toBe(false);
    });

    it('scope every call to the caller', async () => {
      const c = await serve([myOrders()], customer(1));
      const result = await c.callTool('my_orders', {});
      expect(result.structuredContent).toEqual({
        ok: true,
        items: [
          { id: 1, status: 'shipped' },
          { id: 2, status: 'pending' },
        ],
        total: 2,
        note: 'Returned all 2 matching rows.',
      });
      // The first call reads the bound column's type once (an integer: its equality is its text's, so
      // the statement is the plain one); every later call sends the statement alone.
      expect(db.statements.map(({ text }) => text.slice(0, 24))).toEqual([
        'SELECT a.attname AS "col',
        'SELECT "id", "status", (',
      ]);
      expect(db.statements[1]!.values).toEqual([1, 10]);
      expect(db.statements[1]!.text).not.toContain('CAST(');
      await c.callTool('my_orders', { status: 'pending' });
      await c.callTool('my_orders', {});
      expect(db.statements.slice(2).map(({ values }) => values)).toEqual([
        [1, 'pending', 10],
        [1, 10],
      ]);
      expect(db.transactions).toHaveLength(3);
    });

    it('cannot be overridden by an argument of the same name', async () => {
      const c = await serve([myOrders()], customer(1));
      const envelope = expectFailure(await c.callTool('my_orders', { customer_id: 4 }));
      expect(envelope).toMatchObject({ error: 'invalid_argument', fields: [{ path: 'customer_id' }] });
      expect(db.transactions).toEqual([]);
    });

    const claim = (customerId: unknown) => ({ token: 't', clientId: 'c', scopes: [], extra: { customerId } });
    const WRONG_SHAPE = {
      ok: false,
      error: 'permission_denied',
      message: "This tool cannot use the caller's credentials.",
      hint: 'The credentials do not have the form this tool expects. Do not retry; tell the user.',
      retryable: false,
    };
    /** Each claim refused with WRONG_SHAPE through a real round trip, with no transaction started. */
    const expectRefusedClaims = async (tool: () => ToolDefinition, claims: readonly unknown[]) => {
      for (const customerId of claims) {
        const c = await serve([tool()], claim(customerId));
        expect([customerId, expectFailure(await c.callTool('my_orders', {}))]).toEqual([
          customerId,
          WRONG_SHAPE,
        ]);
        expect(db.transactions).toEqual([]);
        await c.close();
        client = undefined;
      }
    };

    it('a claim holding a list cannot widen the scope to other customers', async () => {
      await expectRefusedClaims(myOrders, [
        [1, 2, 3, 4],
        ['1', '2'],
        [
          [1, 2],
          [3, 4],
        ],
        [1],
      ]);
    });

    it('a binding declared list: true compares with = ANY', async () => {
      db = recording(database.db);
      const tool = sqlTool({
        ...myOrdersDeclaration,
        bind: {
          customer_id: {
            value: ({ request }) => request.authInfo?.extra?.customerIds as number[] | undefined,
            list: true,
          },
        },
        name: 'my_orders',
        description: "The caller's accounts' orders.",
        db,
      });
      const c = await serve([tool], {
        token: 't',
        clientId: 'c',
        scopes: [],
        extra: { customerIds: [1, 2] },
      });
      expect(await ids(tool, {})).toEqual([1, 2, 3, 4]);
      expect(db.statements).toHaveLength(2);
      expect(db.statements[1]!.text).toContain('"customer_id" = ANY($1) ORDER BY');
      expect(db.statements[1]!.values).toEqual([[1, 2], 10]);
      await c.close();
      client = undefined;
    });

    it('a claim of the wrong type is refused with permission_denied before any SQL runs', async () => {
      await expectRefusedClaims(myOrders, [
        { id: 1 },
        Number.NaN,
        Number.POSITIVE_INFINITY,
        '1\u0000',
        () => 1,
        // A token's JSON said 1234567890123456789; JSON.parse made it ...768, an id several share.
        JSON.parse('1234567890123456789'),
        2 ** 53,
        1e300,
      ]);
      const listed = () => {
        db = recording(database.db);
        return sqlTool({
          ...myOrdersDeclaration,
          bind: {
            customer_id: {
              value: ({ request }) => request.authInfo?.extra?.customerId as number[],
              list: true,
            },
          },
          name: 'my_orders',
          description: "The caller's accounts' orders.",
          db,
        });
      };
      await expectRefusedClaims(listed, [
        [[1, 2]],
        [{}],
        [1, Number.NaN],
        ['a\u0000'],
        [null],
        [1, JSON.parse('9007199254740993')],
      ]);
    });

    it('a claim the database cannot read as the column type is the credentials’ fault, not the model’s', async () => {
      // 42.5, true and "abc" pass the form check (scalars) but an integer column refuses them: the model
      // cannot fix that by changing its arguments, so it must not be told to.
      for (const customerId of [42.5, true, 'abc']) {
        db = recording(database.db);
        const c = await serve([myOrders()], claim(customerId));
        expect([customerId, expectFailure(await c.callTool('my_orders', {}))]).toEqual([
          customerId,
          { ...WRONG_SHAPE, incidentId: expect.stringMatching(/^inc_/) },
        ]);
        await c.close();
        client = undefined;
      }
      // An argument the column cannot hold is still the model's to fix, on a tool that binds.
      db = recording(database.db);
      const byIdForCustomer = sqlTool({
        ...myOrdersDeclaration,
        filters: { id: { kind: 'equals', type: 'integer', description: 'One order id.' } },
        name: 'my_order',
        description: "One of the caller's orders.",
        db,
      });
      const c = await serve([byIdForCustomer], claim(1));
      expect(expectFailure(await c.callTool('my_order', { id: 3_000_000_000 }))).toMatchObject({
        error: 'invalid_argument',
      });
    });

    it('refuse with permission_denied when the caller has no such claim', async () => {
      const c = await serve([myOrders()]);
      const envelope = expectFailure(await c.callTool('my_orders', { status: 'paid' }));
      expect(envelope).toMatchObject({
        error: 'permission_denied',
        message: 'This tool needs an authenticated caller.',
        retryable: false,
      });
      expect(db.transactions).toEqual([]);
    });
    it('are bound by core before the chain: two tokens of one client each see only their own orders', async () => {
      const tool = myOrders();
      const seen: { bindings: unknown; key: string; outcome: string }[] = [];
      const recorder: ToolMiddleware = async (ctx, next) => {
        let outcome = 'threw';
        try {
          const result = await next();
          outcome = outcomeOf(result);
          return result;
        } finally {
          seen.push({ bindings: ctx.bindings, key: callKey(ctx), outcome });
        }
      };
      const portal = (customerId?: number) => ({
        token: `t-${customerId}`,
        clientId: 'portal',
        scopes: [],
        extra: customerId === undefined ? {} : { customerId },
      });
      const one = await serveTools([tool], {
        middleware: [recorder],
        authInfo: portal(1),
        logger: createSilentLogger(),
      });
      const two = await serveTools([tool], {
        middleware: [recorder],
        authInfo: portal(2),
        logger: createSilentLogger(),
      });
      const none = await serveTools([tool], {
        middleware: [recorder],
        authInfo: portal(),
        logger: createSilentLogger(),
      });
      try {
        const ids = async (c: TestClient) => {
          const result = await c.callTool('my_orders', { status: 'shipped' });
          return (result.structuredContent?.items as { id: number }[] | undefined)?.map((item) => item.id);
        };
        const answers = await Promise.all(
          Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? ids(one) : ids(two))),
        );
        expect(answers).toEqual(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? [1] : [3])));
        // Completion order varies (a pool runs them in parallel): compare as sorted lists.
        const byCustomer = (a: number, b: number) => a - b;
        expect(
          seen
            .filter((s) => s.outcome === 'ok')
            .map((s) => (s.bindings as { customer_id: number }).customer_id)
            .sort(byCustomer),
        ).toEqual([...Array(10).fill(1), ...Array(10).fill(2)]);
        // Identical arguments, two customers: two keys (every key derived from the call includes bindings).
        expect(new Set(seen.map((s) => s.key)).size).toBe(2);
        // A token without the claim: bind refuses before the handler, and the chain still sees the answer.
        const refused = expectFailure(await none.callTool('my_orders', { status: 'shipped' }));
        expect(refused).toMatchObject({
          error: 'permission_denied',
          message: 'This tool needs an authenticated caller.',
        });
        // Core answers bind's ToolError at the innermost step (core f9bb923), so every middleware sees
        // the refusal as a result, like a handler's, not a throw.
        expect(seen).toHaveLength(21);
        expect(seen.at(-1)).toMatchObject({ bindings: {}, outcome: 'permission_denied' });
        const statements = db.statements.filter(({ text }) => text.includes('_toolgate_total'));
        expect(statements.map((statement) => statement.values[0] as number).sort(byCustomer)).toEqual([
          ...Array(10).fill(1),
          ...Array(10).fill(2),
        ]);
      } finally {
        await Promise.all([one.close(), two.close(), none.close()]);
      }
    });
  });

  describe('failures map to the result contract', () => {
    it('every call is a read-only transaction', async () => {
      await expect(
        database.db.readOnly({ timeoutMs: 1000 }, (runner) =>
          runner.query(`DELETE FROM ${SCHEMA}.orders`, []),
        ),
      ).rejects.toThrow('read-only transaction');
      await tableIntact();
    });

    it('a statement past the timeout gives timeout', async () => {
      db = recording(database.db);
      const tool = sqlTool({
        ...searchOrdersOptions(db, { schema: SCHEMA, table: 'slow_orders' }),
        timeoutMs: 100,
      });
      const c = await serve([tool]);
      const envelope = expectFailure(await c.callTool('search_orders', {}));
      expect(envelope).toEqual({
        ok: false,
        error: 'timeout',
        message: 'The query ran past its 100 ms limit.',
        hint: 'Retry once with narrower filters (fewer days, a longer prefix).',
        retryable: true,
        incidentId: expect.any(String),
      });
    });

    it('the same slow view answers within a longer timeout', async () => {
      const tool = sqlTool({
        ...searchOrdersOptions(database.db, { schema: SCHEMA, table: 'slow_orders' }),
        timeoutMs: 5000,
      });
      expect(await ids(tool, { status: 'shipped' })).toEqual([1, 3]);
    });

    it('a role without access gives permission_denied', async () => {
      const c = await serve([searchOrders(unprivileged(database.db))]);
      expect(expectFailure(await c.callTool('search_orders', {}))).toMatchObject({
        error: 'permission_denied',
        message: 'The database refused access to this data.',
      });
    });

    it('any other database error reaches the chain as internal, with nothing of the SQL', async () => {
      const tool = sqlTool({
        ...searchOrdersOptions(database.db),
        from: { schema: SCHEMA, table: 'no_such_table' },
      });
      const c = await serve([tool]);
      const envelope = expectFailure(await c.callTool('search_orders', {}));
      expect(envelope).toMatchObject({ error: 'internal', message: 'Internal error.' });
      expect(JSON.stringify(envelope)).not.toContain('no_such_table');
    });

    it('an aborted call runs no SQL and answers timeout', async () => {
      const tool = searchOrders();
      const controller = new AbortController();
      controller.abort();
      const ctx = createTestContext({ tool, request: { signal: controller.signal } });
      await expect(tool.handler({}, ctx)).rejects.toMatchObject({
        code: 'timeout',
        message: 'The query was cancelled before it finished.',
      });
      expect(db.statements).toEqual([]);
    });
  });

  describe('a dead connection', () => {
    it('a dead connection gives unavailable', async () => {
      const c = await serve([searchOrders(await database.deadQueryable())]);
      expect(expectFailure(await c.callTool('search_orders', {}))).toEqual({
        ok: false,
        error: 'unavailable',
        message: 'The database is unavailable.',
        hint: 'A service this tool depends on is unavailable. Do not retry now; tell the user and try once later.',
        retryable: true,
        incidentId: expect.any(String),
      });
    });
  });
});

describe.each(ENGINES.filter((engine) => engine.cancelsRunningStatements))(
  'sqlTool on $name: cancellation',
  (engine) => {
    let database: TestDatabase;
    beforeAll(async () => {
      database = await engine.open();
    });
    afterAll(async () => {
      await database.close();
    });

    it('an abort mid-statement answers timeout and cancels the statement on the server', async () => {
      const tool = sqlTool({
        ...searchOrdersOptions(database.db, { schema: SCHEMA, table: 'very_slow_orders' }),
        timeoutMs: 30_000,
      });
      const controller = new AbortController();
      const call = tool.handler({}, createTestContext({ tool, request: { signal: controller.signal } }));
      // This worker's pool only: other workers' files run their own very_slow_orders at the same time.
      const running = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%very_slow_orders%' AND application_name = '${APPLICATION_NAME}' AND pid <> pg_backend_pid()`;
      await expect.poll(async () => (await database.rows(running))[0]!.n, { timeout: 3000 }).toBe(1);
      controller.abort();
      await expect(call).rejects.toMatchObject({
        code: 'timeout',
        message: 'The query was cancelled before it finished.',
      });
      await expect.poll(async () => (await database.rows(running))[0]!.n, { timeout: 3000 }).toBe(0);
      // The pool still serves the next call (the cancelled connection was dropped, not reused).
      const fresh = sqlTool(searchOrdersOptions(database.db));
      const next = await fresh.handler({ days: 365 }, createTestContext({ tool: fresh }));
      expect(next.structuredContent).toMatchObject({ ok: true, total: 8 });
    });
  },
);
