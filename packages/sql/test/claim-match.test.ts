// Claims whose spelling differs from the row owner's yet compare equal under the bound column's type or
// collation: numeric 1.0 = 1, citext ALICE = alice, a case- or accent-blind ICU collation, a date or a
// timestamp spelled another way, bool yes = true, inet 10.0.0.1/32 = 10.0.0.1, jsonb {"a":1.0} = {"a": 1},
// interval 60 minutes = 1 hour, money 1 = $1.00. To the identity provider (and every check before SQL)
// each is another caller; to the column, tenant 1. Every test drives real tools/call round trips on
// PGlite, and on PostgreSQL when TEST_DATABASE_URL is set.
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { createSilentLogger, type ToolDefinition } from '@toolgate/core';
import { expectFailure, serveTools, type TestClient } from '@toolgate/core/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type BindResolver, type BindSpec, type BindValue, type Queryable, sqlTool } from '../src/index.js';
import { ENGINES, type RecordingQueryable, recording, SCHEMA, type TestDatabase } from './engines.js';

// The bound columns whose equality is looser than their text, and ones whose equality is the text's.
const LOOSE = [
  'tenant_numeric',
  'tenant_float',
  'tenant_money',
  'owner_citext',
  'owner_case_blind',
  'owner_accent_blind',
  'account_char',
  'opened_on',
  'opened_at',
  'active',
  'address',
  'profile',
  'term',
] as const;
const EXACT = ['tenant_int', 'tenant_uuid', 'owner_text', 'owner_varchar'] as const;
type Column = (typeof LOOSE)[number] | (typeof EXACT)[number];

// Each a claim spelled unlike row 1's column that the column reads as row 1's value. None has a shape
// the read-back of respelled integers catches (a sign, a leading zero, _), so only the match by text
// stands between them and tenant 1's rows.
const CROSSINGS: readonly (readonly [Column, string])[] = [
  ['tenant_numeric', '1.0'],
  ['tenant_numeric', '1.00'],
  ['tenant_numeric', '1e0'],
  ['tenant_float', '1.0'],
  ['tenant_float', '1e0'],
  ['tenant_money', '1'],
  ['tenant_money', '1.00'],
  ['owner_citext', 'ALICE@example.com'],
  ['owner_citext', 'Alice@Example.com'],
  ['owner_case_blind', 'ALICE'],
  ['owner_accent_blind', 'élan'],
  ['owner_accent_blind', 'ÉLAN'],
  ['opened_on', '20240105'],
  ['opened_on', 'Jan 5 2024'],
  ['opened_at', '2024-01-05T10:00:00Z'],
  ['active', 'yes'],
  ['active', 't'],
  ['active', 'on'],
  ['address', '10.0.0.1'],
  ['profile', '{"tenant":1}'],
  ['profile', '{"tenant": 1.0}'],
  ['term', '60 minutes'],
  ['term', '1 hour'],
];

describe.each(ENGINES)('claims matched by text on $name', (engine) => {
  let database: TestDatabase;
  const clients: TestClient[] = [];
  /** Row 1's and row 2's columns cast to text: the spellings their owners' tokens carry. */
  const owners = new Map<Column, [string, string]>();
  let createdCitext = false;

  beforeAll(async () => {
    database = await engine.open();
    // citext's operators must be on the search path (as where authors install it), or `=` compares text.
    const [{ installed }] = (await database.rows(
      `SELECT count(*)::int AS installed FROM pg_extension WHERE extname = 'citext'`,
    )) as [{ installed: number }];
    createdCitext = installed === 0;
    if (createdCitext) await database.rows('CREATE EXTENSION citext');
    const [{ schema }] = (await database.rows(
      `SELECT extnamespace::regnamespace::text AS schema FROM pg_extension WHERE extname = 'citext'`,
    )) as [{ schema: string }];
    // ICU's legacy keyword form: both engines fold case with it (PGlite's ICU ignores und-u-ks-level2).
    await database.rows(
      `CREATE COLLATION ${SCHEMA}.case_blind (provider = icu, locale = '@colStrength=secondary', deterministic = false)`,
    );
    await database.rows(
      `CREATE COLLATION ${SCHEMA}.accent_blind (provider = icu, locale = '@colStrength=primary', deterministic = false)`,
    );
    await database.rows(`
      CREATE TABLE ${SCHEMA}.ledger (
        id integer PRIMARY KEY,
        tenant_numeric numeric NOT NULL,
        tenant_float double precision NOT NULL,
        tenant_money money NOT NULL,
        owner_citext ${schema}.citext NOT NULL,
        owner_case_blind text COLLATE ${SCHEMA}.case_blind NOT NULL,
        owner_accent_blind varchar(40) COLLATE ${SCHEMA}.accent_blind NOT NULL,
        account_char char(8) NOT NULL,
        opened_on date NOT NULL,
        opened_at timestamptz NOT NULL,
        active boolean NOT NULL,
        address inet NOT NULL,
        profile jsonb NOT NULL,
        term interval NOT NULL,
        tenant_int integer NOT NULL,
        tenant_uuid uuid NOT NULL,
        owner_text text NOT NULL,
        owner_varchar varchar(40) NOT NULL
      )`);
    await database.rows(`
      INSERT INTO ${SCHEMA}.ledger VALUES
        (1, 1, 1, 1, 'alice@example.com', 'alice', 'elan', 'ac1', '2024-01-05', '2024-01-05 10:00:00+00',
         true, '10.0.0.1', '{"tenant": 1}', '1 hour', 1, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'alice', 'alice'),
        (2, 2, 2, 2, 'bob@example.com', 'bob', 'zoe', 'ac2', '2024-02-05', '2024-02-05 10:00:00+00',
         false, '10.0.0.2', '{"tenant": 2}', '2 hours', 2, 'b1ffcd00-0d1c-4ef8-bb6d-6bb9bd380a22', 'bob', 'bob')`);
    const printed = await database.rows(
      `SELECT id, ${[...LOOSE, ...EXACT].map((column) => `${column}::text AS ${column}`).join(', ')}
       FROM ${SCHEMA}.ledger ORDER BY id`,
    );
    for (const column of [...LOOSE, ...EXACT]) {
      owners.set(column, [printed[0]![column] as string, printed[1]![column] as string]);
    }
  });
  afterAll(async () => {
    // A server's shared database keeps only what it had (the schema and its tables go with close()).
    if (createdCitext) {
      await database.rows(`DROP TABLE ${SCHEMA}.ledger`);
      await database.rows('DROP EXTENSION citext');
    }
    await database.close();
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });

  const claimOf = ({ request }: { request: { authInfo?: AuthInfo } }): BindValue =>
    request.authInfo?.extra?.owner as BindValue;

  const ledgerTool = (
    name: string,
    db: Queryable,
    column: Column,
    spec: Exclude<BindSpec, BindResolver> = { value: claimOf },
  ): ToolDefinition =>
    sqlTool({
      name,
      description: 'Ledger rows of the signed-in owner.',
      db,
      from: { schema: SCHEMA, table: 'ledger' },
      columns: ['id'],
      bind: { [column]: { column, ...spec } },
      sort: { keys: ['id'], directions: ['asc'], default: 'id_asc' },
      limit: { default: 10, max: 10 },
    }) as ToolDefinition;

  /** A caller whose token carries `owner`; each its own client, closed after the test. */
  async function callAs(tools: ToolDefinition[], owner: unknown, tool: string) {
    const c = await serveTools(tools, {
      logger: createSilentLogger(),
      authInfo: {
        token: `t-${JSON.stringify(owner)}`,
        clientId: 'desk',
        scopes: [],
        extra: { sub: `owner-${JSON.stringify(owner)}`, owner },
      },
    });
    clients.push(c);
    return c.callTool(tool, {});
  }

  const itemIds = (result: { structuredContent?: unknown }): number[] =>
    (result.structuredContent as { items: { id: number }[] }).items.map((item) => item.id);

  const statementsOf = (db: RecordingQueryable): string[] =>
    db.statements.filter(({ text }) => text.includes('_toolgate_total')).map(({ text }) => text);

  it('a claim the column equates with another owner’s value but spells another way selects none of that owner’s rows', async () => {
    // The collations really fold case and accents on this server (else the crossing would prove nothing).
    expect(
      await database.rows(
        `SELECT 'ALICE' = 'alice' COLLATE ${SCHEMA}.case_blind AS "case", 'élan' = 'ELAN' COLLATE ${SCHEMA}.accent_blind AS "accent"`,
      ),
    ).toEqual([{ case: true, accent: true }]);
    const db = recording(database.db);
    const tools = LOOSE.map((column) => ledgerTool(`by_${column}`, db, column));
    const seen: [string, string, unknown][] = [];
    for (const [column, claim] of CROSSINGS) {
      // Row 1 is what the column itself makes of the claim: the crossing is real.
      const [{ n }] = (await database.rows(
        `SELECT count(*)::int AS n FROM ${SCHEMA}.ledger WHERE id = 1 AND ${column} = $1`,
        [claim],
      )) as [{ n: number }];
      expect([column, claim, n]).toEqual([column, claim, 1]);
      const result = await callAs(tools, claim, `by_${column}`);
      seen.push([column, claim, result.structuredContent]);
    }
    expect(seen).toEqual(
      CROSSINGS.map(([column, claim]) => [
        column,
        claim,
        {
          ok: true,
          items: [],
          total: 0,
          note: 'No rows match these filters. Try wider filters; do not repeat the same call.',
        },
      ]),
    );
    // Each statement compared the column's text, in the C collation, with the claim.
    for (const column of new Set(CROSSINGS.map(([column]) => column))) {
      const text = statementsOf(db).find((statement) => statement.includes(`"${column}" = $1`));
      expect([column, text]).toEqual([
        column,
        expect.stringContaining(`"${column}" = $1 AND CAST("${column}" AS text) COLLATE "C" = $2`),
      ]);
    }
  });

  it('each owner whose token spells the column’s own text is served its rows, on every loose type', async () => {
    const db = recording(database.db);
    const tools = LOOSE.map((column) => ledgerTool(`by_${column}`, db, column));
    const served: [string, number[], number[]][] = [];
    for (const column of LOOSE) {
      const [first, second] = owners.get(column)!;
      served.push([
        column,
        itemIds(await callAs(tools, first, `by_${column}`)),
        itemIds(await callAs(tools, second, `by_${column}`)),
      ]);
    }
    expect(served).toEqual(LOOSE.map((column) => [column, [1], [2]]));
    expect(statementsOf(db).filter((text) => text.includes('AS text) COLLATE "C" = $2'))).toHaveLength(
      2 * LOOSE.length,
    );
    // Numbers and booleans in the token are matched as the driver spells them: 1, true.
    expect(itemIds(await callAs(tools, 1, 'by_tenant_numeric'))).toEqual([1]);
    expect(itemIds(await callAs(tools, 2, 'by_tenant_float'))).toEqual([2]);
    expect(itemIds(await callAs(tools, true, 'by_active'))).toEqual([1]);
    // char(n) prints without its padding, so the code matches; a padded claim is refused before SQL.
    expect(owners.get('account_char')).toEqual(['ac1', 'ac2']);
    expect(expectFailure(await callAs(tools, 'ac1 ', 'by_account_char')).error).toBe('permission_denied');
  });

  it('a list claim matches each item by its text: a respelled item adds no rows', async () => {
    const db = recording(database.db);
    const tool = ledgerTool('by_numerics', db, 'tenant_numeric', { value: claimOf, list: true });
    expect(itemIds(await callAs([tool], ['2', '1.0'], 'by_numerics'))).toEqual([2]);
    expect(itemIds(await callAs([tool], ['2', 1], 'by_numerics'))).toEqual([1, 2]);
    expect(statementsOf(db)[0]).toContain(
      '"tenant_numeric" = ANY($1) AND CAST("tenant_numeric" AS text) COLLATE "C" = ANY($2)',
    );
    expect(db.statements.at(-1)!.values).toEqual([['2', 1], ['2', '1'], 10]);
  });

  it('plain claims on integer, uuid, text and varchar columns: the column is read once, then each call sends its statement alone', async () => {
    const db = recording(database.db);
    const tools = EXACT.map((column) => ledgerTool(`by_${column}`, db, column));
    // A second tool on the same Queryable and column finds the column read already.
    tools.push(ledgerTool('by_tenant_int_too', db, 'tenant_int'));
    const sent = async (tool: string, owner: unknown): Promise<string[]> => {
      const before = db.statements.length;
      expect([tool, itemIds(await callAs(tools, owner, tool))]).toEqual([tool, [1]]);
      return db.statements
        .slice(before)
        .map(({ text }) => (text.includes('_toolgate_total') ? 'statement' : text.slice(0, 24)));
    };
    for (const column of EXACT) {
      const owner = owners.get(column)![0];
      expect([column, await sent(`by_${column}`, owner)]).toEqual([
        column,
        ['SELECT a.attname AS "col', 'statement'],
      ]);
      expect([column, await sent(`by_${column}`, owner)]).toEqual([column, ['statement']]);
      expect([column, await sent(`by_${column}`, owner)]).toEqual([column, ['statement']]);
    }
    expect(await sent('by_tenant_int_too', 1)).toEqual(['statement']);
    // Their statements are the plain ones: no text comparison, one bound value.
    for (const text of statementsOf(db)) {
      expect(text).not.toContain('CAST(');
      expect(text).toMatch(/ WHERE "[a-z_]+" = \$1\) AS "_toolgate_total"/);
    }
    expect(db.transactions).toHaveLength(13);
  });

  it('match: column lets the column type’s own equality decide, as the author chose: no catalog read, no text comparison', async () => {
    const db = recording(database.db);
    const tool = ledgerTool('by_email', db, 'owner_citext', { value: claimOf, match: 'column' });
    expect(itemIds(await callAs([tool], 'ALICE@example.com', 'by_email'))).toEqual([1]);
    expect(db.statements.map(({ text }) => text)).toEqual([
      expect.stringContaining(' WHERE "owner_citext" = $1 ORDER BY'),
    ]);
  });
});
