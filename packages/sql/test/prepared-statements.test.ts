import { createSilentLogger } from '@toolgate/core';
import { serveTools, type TestClient } from '@toolgate/core/testing';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { type PgPoolLike, pgQueryable, type QueryRows, sqlTool } from '../src/index.js';
import { searchOrdersOptions } from './declarations.js';
import { ENGINES, NEEDS_POSTGRES, SCHEMA, type TestDatabase } from './engines.js';

const url = process.env.TEST_DATABASE_URL;
const quiet = { logger: createSilentLogger() };
let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

interface Sent {
  readonly name: string | undefined;
  readonly text: string;
}

/** A stand-in pool of one connection that answers every statement with no rows and records what it got. */
function fakePool(): { pool: PgPoolLike; sent: Sent[] } {
  const sent: Sent[] = [];
  const connection = {
    query: async (config: { name?: string; text: string }): Promise<QueryRows> => {
      sent.push({ name: config.name, text: config.text });
      return { rows: [] };
    },
    release: () => undefined,
  };
  return { sent, pool: { connect: async () => connection, query: async () => ({}), totalCount: 1 } };
}

describe('pgQueryable preparedStatements: which statements are named', () => {
  it('each statement text gets one name, the same on every call; BEGIN, SET and COMMIT are never named', async () => {
    const { pool, sent } = fakePool();
    const db = pgQueryable(pool, { preparedStatements: true });
    client = await serveTools([sqlTool({ ...searchOrdersOptions(db), timeoutMs: 2000 })], quiet);
    for (const args of [{ status: 'paid' }, { status: 'shipped' }, { customer_email: 'bob' }]) {
      expect((await client.callTool('search_orders', args)).isError).toBeUndefined();
    }
    const selects = sent.filter((statement) => statement.text.startsWith('SELECT'));
    expect(selects).toHaveLength(3);
    for (const { name } of selects) expect(name).toMatch(/^toolgate_[A-Za-z0-9_-]{32}$/);
    // Two calls with a status filter share a text, so a name; the email filter is another text.
    expect(selects[0]!.name).toBe(selects[1]!.name);
    expect(selects[2]!.name).not.toBe(selects[0]!.name);
    const others = sent.filter((statement) => !statement.text.startsWith('SELECT'));
    expect(others.map((statement) => statement.text.slice(0, 6))).toEqual([
      'BEGIN ',
      'COMMIT',
      'BEGIN ',
      'COMMIT',
      'BEGIN ',
      'COMMIT',
    ]);
    for (const { name } of others) expect(name).toBeUndefined();
  });

  it('with readOnlySession the one statement is named; the session statements are not', async () => {
    const { pool, sent } = fakePool();
    const db = pgQueryable(pool, { readOnlySession: { timeoutMs: 2000 }, preparedStatements: true });
    client = await serveTools([sqlTool({ ...searchOrdersOptions(db), timeoutMs: 2000 })], quiet);
    await client.callTool('search_orders', { status: 'paid' });
    await client.callTool('search_orders', { status: 'shipped' });
    expect(sent.map((statement) => [statement.text.slice(0, 6), statement.name !== undefined])).toEqual([
      ['SET de', false],
      ['SELECT', true],
      ['SELECT', true],
    ]);
  });

  it('a connection keeps at most maxPerConnection statements prepared; later texts run unnamed there', async () => {
    const { pool, sent } = fakePool();
    const db = pgQueryable(pool, { preparedStatements: { maxPerConnection: 2 } });
    const texts = ['SELECT 1', 'SELECT 2', 'SELECT 3', 'SELECT 1', 'SELECT 3'];
    for (const text of texts) await db.readOnly({ timeoutMs: 1000 }, (runner) => runner.query(text, []));
    const named = sent
      .filter((statement) => statement.text.startsWith('SELECT'))
      .map((statement) => [statement.text, statement.name !== undefined]);
    expect(named).toEqual([
      ['SELECT 1', true],
      ['SELECT 2', true],
      ['SELECT 3', false],
      ['SELECT 1', true],
      ['SELECT 3', false],
    ]);
  });

  it('a stale prepared statement (its result type changed, or the server lost it) stops naming on that connection', async () => {
    const stale = [
      Object.assign(new Error('cached plan must not change result type'), {
        code: '0A000',
        severity: 'ERROR',
      }),
      // A server speaking another language: known by the function that refused it.
      Object.assign(new Error('le plan en cache ne doit pas modifier le type du résultat'), {
        code: '0A000',
        severity: 'ERROR',
        routine: 'RevalidateCachedQuery',
      }),
      Object.assign(new Error('prepared statement "toolgate_x" does not exist'), {
        code: '26000',
        severity: 'ERROR',
      }),
    ];
    for (const error of stale) {
      const sent: Sent[] = [];
      let failNext = false;
      const connection = {
        query: async (config: { name?: string; text: string }): Promise<QueryRows> => {
          sent.push({ name: config.name, text: config.text });
          if (failNext && config.name !== undefined) {
            failNext = false;
            throw error;
          }
          return { rows: [{ n: 1 }] };
        },
        release: () => undefined,
      };
      const pool: PgPoolLike = { connect: async () => connection, query: async () => ({}), totalCount: 1 };
      const db = pgQueryable(pool, { readOnlySession: { timeoutMs: 2000 }, preparedStatements: true });
      await db.readOnlyQuery!({ timeoutMs: 2000 }, 'SELECT 1 AS n', []);
      // The statement alone: sent again unnamed, and the call answers.
      failNext = true;
      expect((await db.readOnlyQuery!({ timeoutMs: 2000 }, 'SELECT 1 AS n', [])).rows).toEqual([{ n: 1 }]);
      await db.readOnlyQuery!({ timeoutMs: 2000 }, 'SELECT 2 AS n', []);
      expect(sent.slice(1).map((statement) => [statement.text, statement.name !== undefined])).toEqual([
        ['SELECT 1 AS n', true],
        ['SELECT 1 AS n', true],
        ['SELECT 1 AS n', false],
        ['SELECT 2 AS n', false],
      ]);
    }
    // In a transaction the call fails (the transaction is spoiled); the connection's next calls run unnamed.
    const { pool, sent } = fakePool();
    const db = pgQueryable(pool, { preparedStatements: true });
    const run = (text: string) => db.readOnly({ timeoutMs: 1000 }, (runner) => runner.query(text, []));
    await run('SELECT 1');
    const connection = await pool.connect();
    const query = connection.query.bind(connection);
    let failed = false;
    connection.query = async (config) => {
      if (!failed && (config as { name?: string }).name !== undefined) {
        failed = true;
        throw stale[0];
      }
      return query(config);
    };
    await expect(run('SELECT 1')).rejects.toBe(stale[0]);
    await run('SELECT 1');
    const selects = sent.filter((statement) => statement.text === 'SELECT 1');
    expect(selects.map((statement) => statement.name !== undefined)).toEqual([true, false]);
  });

  it('a single Client (no pool) names its statements too, on both paths', async () => {
    const sent: Sent[] = [];
    const connection = {
      query: async (config: { name?: string; text: string }): Promise<QueryRows> => {
        sent.push({ name: config.name, text: config.text });
        return { rows: [] };
      },
    };
    const db = pgQueryable(connection, { readOnlySession: { timeoutMs: 2000 }, preparedStatements: true });
    await db.readOnlyQuery!({ timeoutMs: 2000 }, 'SELECT 1', []);
    await db.readOnlyQuery!({ timeoutMs: 500 }, 'SELECT 1', []);
    expect(sent.map((statement) => [statement.text.slice(0, 8), statement.name !== undefined])).toEqual([
      ['SET defa', false],
      ['SELECT 1', true],
      ['BEGIN RE', false],
      ['SELECT 1', true],
      ['COMMIT', false],
    ]);
    expect(sent[1]!.name).toBe(sent[3]!.name);
  });

  it('without the option nothing is named', async () => {
    const { pool, sent } = fakePool();
    const db = pgQueryable(pool, { readOnlySession: { timeoutMs: 2000 } });
    client = await serveTools([sqlTool({ ...searchOrdersOptions(db), timeoutMs: 2000 })], quiet);
    await client.callTool('search_orders', { status: 'paid' });
    expect(sent.every((statement) => statement.name === undefined)).toBe(true);
  });

  it('refuses a malformed option', () => {
    const { pool } = fakePool();
    for (const preparedStatements of [{ maxPerConnection: 0 }, { maxPerConnection: 1.5 }, 'yes', null]) {
      expect(() => pgQueryable(pool, { preparedStatements } as never)).toThrow(
        'pgQueryable: preparedStatements must be true, false or { maxPerConnection: a positive integer }',
      );
    }
    expect(() => pgQueryable(pool, { preparedStatements: false })).not.toThrow();
    expect(() => pgQueryable(pool, { preparedStatements: {} })).not.toThrow();
  });
});

// Against a real server: what PostgreSQL holds prepared, and that the guarantees still hold.
if (url === undefined) {
  describe('pgQueryable preparedStatements on PostgreSQL', () => {
    it(NEEDS_POSTGRES, (context) => {
      context.skip(NEEDS_POSTGRES);
    });
  });
}

describe.each(ENGINES.filter((engine) => engine.cancelsRunningStatements))(
  'pgQueryable preparedStatements on $name',
  (engine) => {
    let database: TestDatabase;
    let real: pg.Pool;
    beforeAll(async () => {
      database = await engine.open();
      await database.rows(`CREATE TABLE ${SCHEMA}.prepared_touches (n integer)`);
    });
    afterAll(async () => {
      await database.close();
    });
    // One connection per test: every call of a test meets the statements its earlier calls prepared,
    // and none another test prepared (pg_prepared_statements is the session's).
    beforeEach(() => {
      real = new pg.Pool({ connectionString: url, max: 1, application_name: 'toolgate_sql_prepared' });
    });
    afterEach(async () => {
      await real.end();
    });
    const prepared = async (): Promise<string[]> => {
      const { rows } = await real.query<{ statement: string }>(
        "SELECT statement FROM pg_prepared_statements WHERE name LIKE 'toolgate\\_%' ORDER BY prepare_time",
      );
      return rows.map((row) => row.statement);
    };

    it('the search is prepared once on the connection and answers as the unprepared one does', async () => {
      const db = pgQueryable(real, { readOnlySession: { timeoutMs: 2000 }, preparedStatements: true });
      client = await serveTools([sqlTool({ ...searchOrdersOptions(db), timeoutMs: 2000 })], quiet);
      const plain = await serveTools([sqlTool({ ...searchOrdersOptions(database.db), timeoutMs: 2000 })]);
      try {
        for (const args of [
          { status: 'shipped' },
          { status: 'paid' },
          { status: 'shipped', customer_email: 'carol' },
        ]) {
          const viaPrepared = (await client.callTool('search_orders', args)).structuredContent;
          expect(viaPrepared).toEqual((await plain.callTool('search_orders', args)).structuredContent);
        }
      } finally {
        await plain.close();
      }
      const statements = await prepared();
      // { status } and { status, customer_email } are two texts; three calls prepared them once each.
      expect(statements).toHaveLength(2);
      for (const text of statements) expect(text).toMatch(/^SELECT "id", "status"/);
    });

    it('a column type changed under a prepared statement: the next calls still answer, unnamed on that connection', async () => {
      await database.rows(`CREATE TABLE ${SCHEMA}.prepared_types (id integer, amount integer)`);
      await database.rows(`INSERT INTO ${SCHEMA}.prepared_types VALUES (1, 10)`);
      const text = `SELECT id, amount FROM ${SCHEMA}.prepared_types ORDER BY id`;
      // A pool of its own: the connection stops preparing, which the other tests must not meet.
      const own = new pg.Pool({
        connectionString: url,
        max: 1,
        application_name: 'toolgate_sql_prepared_types',
      });
      onTestFinished(() => own.end());
      const alone = pgQueryable(own, { readOnlySession: { timeoutMs: 2000 }, preparedStatements: true });
      expect((await alone.readOnlyQuery!({ timeoutMs: 2000 }, text, [])).rows).toEqual([
        { id: 1, amount: 10 },
      ]);
      await database.rows(`ALTER TABLE ${SCHEMA}.prepared_types ALTER COLUMN amount TYPE numeric`);
      // PostgreSQL refuses the prepared statement now; the statement alone runs again unnamed.
      for (let round = 0; round < 2; round += 1) {
        expect((await alone.readOnlyQuery!({ timeoutMs: 2000 }, text, [])).rows).toEqual([
          { id: 1, amount: '10' },
        ]);
      }
    });

    it('a prepared statement stays read-only and time-limited: a write is refused, a slow one cancelled', async () => {
      const db = pgQueryable(real, { readOnlySession: { timeoutMs: 300 }, preparedStatements: true });
      const write = `WITH w AS (INSERT INTO ${SCHEMA}.prepared_touches VALUES (1) RETURNING 1) SELECT count(*) FROM w`;
      for (let round = 0; round < 2; round += 1) {
        await expect(db.readOnlyQuery!({ timeoutMs: 300 }, write, [])).rejects.toMatchObject({
          code: '25006',
        });
        await expect(db.readOnlyQuery!({ timeoutMs: 300 }, 'SELECT pg_sleep(2)', [])).rejects.toMatchObject({
          code: '57014',
        });
      }
      expect(await database.rows(`SELECT count(*)::int AS n FROM ${SCHEMA}.prepared_touches`)).toEqual([
        { n: 0 },
      ]);
      // Inside a transaction (another timeout: SET LOCAL), a rolled-back call leaves its statement usable.
      const slow = 'SELECT pg_sleep($1::float8) AS slept';
      await expect(db.readOnlyQuery!({ timeoutMs: 200 }, slow, [1])).rejects.toMatchObject({ code: '57014' });
      expect((await db.readOnlyQuery!({ timeoutMs: 200 }, slow, [0])).rows).toHaveLength(1);
      expect(await prepared()).toContain(slow);
    });
  },
);
