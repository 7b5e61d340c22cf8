import { createSilentLogger } from '@toolgate/core';
import { expectFailure, serveTools, type TestClient } from '@toolgate/core/testing';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type PgPoolLike,
  pgliteQueryable,
  pgQueryable,
  type Queryable,
  type QueryRows,
  sqlTool,
} from '../src/index.js';
import { type CountingPool, countingPool } from './counting-pool.js';
import { myOrdersDeclaration, searchOrdersOptions } from './declarations.js';
import { ENGINES, NEEDS_POSTGRES, SCHEMA, type TestDatabase } from './engines.js';

const url = process.env.TEST_DATABASE_URL;
const SELECT = /^SELECT "id", "status"/;
const SESSION_SET = (ms: number) => `SET default_transaction_read_only = on; SET statement_timeout = ${ms}`;

/** A stand-in pool that answers every statement with no rows and records its text: counts without a server. */
function fakePool(): { pool: PgPoolLike; statements: string[] } {
  const statements: string[] = [];
  const client = {
    query: async (config: { text: string }): Promise<QueryRows> => {
      statements.push(config.text);
      return { rows: [] };
    },
    release: () => undefined,
  };
  return { statements, pool: { connect: async () => client, query: async () => ({}), totalCount: 1 } };
}

// Timeouts are expected here: core would log each one with its cause.
const quiet = { logger: createSilentLogger() };
let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

async function callSearch(db: Queryable, timeoutMs: number, args: Record<string, unknown> = {}) {
  client = await serveTools([sqlTool({ ...searchOrdersOptions(db), timeoutMs })], quiet);
  return client.callTool('search_orders', args);
}

describe('pgQueryable readOnlySession: round trips per tool call', () => {
  it('one statement per call once the connection has its session; the first call sets it', async () => {
    const { pool, statements } = fakePool();
    const db = pgQueryable(pool, { readOnlySession: { timeoutMs: 2000 } });
    client = await serveTools([sqlTool({ ...searchOrdersOptions(db), timeoutMs: 2000 })], quiet);
    await client.callTool('search_orders', { status: 'paid' });
    expect(statements).toHaveLength(2);
    expect(statements[0]).toBe(SESSION_SET(2000));
    expect(statements[1]).toMatch(SELECT);
    statements.length = 0;
    for (const status of ['pending', 'shipped', 'delivered']) {
      const result = await client.callTool('search_orders', { status });
      expect(result.isError).toBeUndefined();
    }
    expect(statements).toHaveLength(3);
    for (const text of statements) expect(text).toMatch(SELECT);
  });

  it('a tool whose timeout is not the session one keeps the transaction: three round trips', async () => {
    const { pool, statements } = fakePool();
    await callSearch(pgQueryable(pool, { readOnlySession: { timeoutMs: 2000 } }), 750);
    expect(statements).toHaveLength(3);
    expect(statements[0]).toBe(
      'BEGIN READ ONLY; SET LOCAL statement_timeout = 750; SET LOCAL idle_in_transaction_session_timeout = 1750',
    );
    expect(statements[1]).toMatch(SELECT);
    expect(statements[2]).toBe('COMMIT');
  });

  it('without readOnlySession every call is the three-statement transaction', async () => {
    const { pool, statements } = fakePool();
    await callSearch(pgQueryable(pool), 5000);
    expect(statements.map((text) => text.slice(0, 15))).toEqual([
      'BEGIN READ ONLY',
      'SELECT "id", "s',
      'COMMIT',
    ]);
  });

  it('refuses a readOnlySession timeout that is not a positive integer', () => {
    const { pool } = fakePool();
    for (const timeoutMs of [0, -1, 1.5, Number.NaN, '2000', 2_147_483_648]) {
      expect(() => pgQueryable(pool, { readOnlySession: { timeoutMs: timeoutMs as number } })).toThrow(
        'pgQueryable: readOnlySession.timeoutMs must be a positive integer (ms)',
      );
    }
  });

  it('PGlite is one connection and keeps its transaction path (no one-statement method)', async () => {
    const db = pgliteQueryable({ transaction: async () => undefined as never, closed: false });
    expect(db.readOnlyQuery).toBeUndefined();
  });
});

// The guarantees on a real server: only PostgreSQL has sessions, a pool and a statement timeout
// that interrupts a running statement. Without TEST_DATABASE_URL this reports itself (engines.ts
// throws in CI).
if (url === undefined) {
  describe('pgQueryable readOnlySession on PostgreSQL', () => {
    it(NEEDS_POSTGRES, (context) => {
      context.skip(NEEDS_POSTGRES);
    });
  });
}

describe.each(ENGINES.filter((engine) => engine.cancelsRunningStatements))(
  'pgQueryable readOnlySession on $name',
  (engine) => {
    let database: TestDatabase;
    let real: pg.Pool;
    let counted: CountingPool;
    let connects = 0;
    beforeAll(async () => {
      database = await engine.open();
      // A function with a side effect, called by a view a careless author might declare.
      await database.rows(`
        CREATE TABLE ${SCHEMA}.touches (at timestamptz NOT NULL DEFAULT now());
        CREATE FUNCTION ${SCHEMA}.touch() RETURNS integer LANGUAGE plpgsql AS
          $$ BEGIN INSERT INTO ${SCHEMA}.touches DEFAULT VALUES; RETURN 1; END $$;
        CREATE VIEW ${SCHEMA}.touching_orders AS SELECT o.*, ${SCHEMA}.touch() AS touched FROM ${SCHEMA}.orders o;
      `);
      real = new pg.Pool({ connectionString: url, max: 1, application_name: 'toolgate_sql_session' });
      real.on('connect', () => {
        connects += 1;
      });
      counted = countingPool(real);
    });
    afterAll(async () => {
      await real.end();
      await database.close();
    });
    const touches = async (): Promise<number> =>
      Number((await database.rows(`SELECT count(*)::int AS n FROM ${SCHEMA}.touches`))[0]!.n);
    // Statements of one call, after a first call gave the (single) connection its session.
    const roundTrips = async (call: () => Promise<unknown>): Promise<string[]> => {
      counted.statements.length = 0;
      await call();
      return [...counted.statements];
    };

    it('the session is read-only with the timeout; each search is one round trip with the same answer', async () => {
      const db = pgQueryable(counted.pool, { readOnlySession: { timeoutMs: 2000 } });
      const show = await db.readOnlyQuery!(
        { timeoutMs: 2000 },
        "SELECT current_setting('transaction_read_only') AS ro, current_setting('statement_timeout') AS t",
        [],
      );
      expect(show.rows).toEqual([{ ro: 'on', t: '2s' }]);
      client = await serveTools([sqlTool({ ...searchOrdersOptions(db), timeoutMs: 2000 })], quiet);
      const viaTransaction = await serveTools([
        sqlTool({ ...searchOrdersOptions(database.db), timeoutMs: 2000 }),
      ]);
      try {
        for (const args of [{}, { status: 'shipped' }, { customer_email: 'bob', days: 60 }]) {
          let fast: unknown;
          const statements = await roundTrips(async () => {
            fast = (await client!.callTool('search_orders', args)).structuredContent;
          });
          expect(statements).toHaveLength(1);
          expect(statements[0]).toMatch(SELECT);
          expect(fast).toEqual((await viaTransaction.callTool('search_orders', args)).structuredContent);
        }
      } finally {
        await viaTransaction.close();
      }
    });

    it('a tool bound to the caller reads its column once; then each call with a plain claim is one round trip', async () => {
      const db = pgQueryable(counted.pool, { readOnlySession: { timeoutMs: 2000 } });
      await db.readOnlyQuery!({ timeoutMs: 2000 }, 'SELECT 1', []);
      client = await serveTools(
        [
          sqlTool({
            ...myOrdersDeclaration,
            name: 'my_orders',
            description: 'My orders.',
            db,
            timeoutMs: 2000,
          }),
        ],
        { ...quiet, authInfo: { token: 't', clientId: 'c', scopes: [], extra: { customerId: 2 } } },
      );
      const ids = async () =>
        (
          (await client!.callTool('my_orders', {})).structuredContent as { items: { id: number }[] }
        ).items.map((item) => item.id);
      let first: number[] = [];
      // The first call: the integer column's type and collation, read in the call's transaction.
      expect(
        (
          await roundTrips(async () => {
            first = await ids();
          })
        ).map((text) => text.slice(0, 24)),
      ).toEqual([
        'BEGIN READ ONLY; SET LOC',
        'SELECT a.attname AS "col',
        'SELECT "id", "status", (',
        'COMMIT',
      ]);
      expect(first).toEqual([3, 4]);
      for (let call = 0; call < 3; call += 1) {
        let later: number[] = [];
        const statements = await roundTrips(async () => {
          later = await ids();
        });
        expect(statements).toHaveLength(1);
        expect(statements[0]).toMatch(/^SELECT "id", "status", .* WHERE "customer_id" = \$1\) AS /);
        expect(later).toEqual([3, 4]);
      }
    });

    it('a data-modifying CTE through the read path is refused by the read-only session', async () => {
      const db = pgQueryable(counted.pool, { readOnlySession: { timeoutMs: 2000 } });
      // The connection gets this adapter's session first (an earlier test may have left another's).
      await db.readOnlyQuery!({ timeoutMs: 2000 }, 'SELECT 1', []);
      let failure: unknown;
      const statements = await roundTrips(async () => {
        failure = await db.readOnlyQuery!(
          { timeoutMs: 2000 },
          `WITH w AS (INSERT INTO ${SCHEMA}.touches DEFAULT VALUES RETURNING 1) SELECT count(*) FROM w`,
          [],
        ).catch((error: unknown) => error);
      });
      expect(statements).toHaveLength(1);
      // PostgreSQL names the statement's top-level command: a SELECT with a modifying WITH.
      expect(failure).toMatchObject({
        code: '25006',
        message: 'cannot execute SELECT in a read-only transaction',
      });
      expect(await touches()).toBe(0);
    });

    it('a view calling a function with a side effect fails the tool call; nothing is written', async () => {
      const db = pgQueryable(counted.pool, { readOnlySession: { timeoutMs: 2000 } });
      client = await serveTools(
        [
          sqlTool({
            ...searchOrdersOptions(db, { schema: SCHEMA, table: 'touching_orders' }),
            timeoutMs: 2000,
          }),
        ],
        quiet,
      );
      await db.readOnlyQuery!({ timeoutMs: 2000 }, 'SELECT 1', []);
      let result: Awaited<ReturnType<TestClient['callTool']>> | undefined;
      const statements = await roundTrips(async () => {
        result = await client!.callTool('search_orders', {});
      });
      expect(statements).toHaveLength(1);
      expect(statements[0]).toMatch(SELECT);
      expect(expectFailure(result!).error).toBe('internal');
      // What the tool's call met underneath: the INSERT inside the function, refused.
      await expect(
        db.readOnlyQuery!({ timeoutMs: 2000 }, `SELECT touched FROM ${SCHEMA}.touching_orders LIMIT 1`, []),
      ).rejects.toMatchObject({ code: '25006', message: 'cannot execute INSERT in a read-only transaction' });
      expect(await touches()).toBe(0);
    });

    it('a slow statement is cancelled at the limit: timeout, in one round trip', async () => {
      const db = pgQueryable(counted.pool, { readOnlySession: { timeoutMs: 300 } });
      client = await serveTools(
        [
          sqlTool({
            ...searchOrdersOptions(db, { schema: SCHEMA, table: 'very_slow_orders' }),
            timeoutMs: 300,
          }),
        ],
        quiet,
      );
      await db.readOnlyQuery!({ timeoutMs: 300 }, 'SELECT 1', []);
      let result: Awaited<ReturnType<TestClient['callTool']>> | undefined;
      const statements = await roundTrips(async () => {
        result = await client!.callTool('search_orders', {});
      });
      expect(statements).toHaveLength(1);
      expect(expectFailure(result!)).toMatchObject({
        error: 'timeout',
        message: 'The query ran past its 300 ms limit.',
      });
      // pg_sleep(5) was cancelled by the server (57014), not left running on the connection.
      const after = await db.readOnlyQuery!({ timeoutMs: 300 }, 'SELECT 1 AS one', []);
      expect(after.rows).toEqual([{ one: 1 }]);
    });

    it('a tool with another timeout gets it by SET LOCAL in a transaction; the session keeps its own', async () => {
      const db = pgQueryable(counted.pool, { readOnlySession: { timeoutMs: 5000 } });
      await db.readOnlyQuery!({ timeoutMs: 5000 }, 'SELECT 1', []);
      let result: Awaited<ReturnType<TestClient['callTool']>> | undefined;
      const statements = await roundTrips(async () => {
        result = await callSearch(db, 300);
      });
      expect(statements[0]).toBe(
        'BEGIN READ ONLY; SET LOCAL statement_timeout = 300; SET LOCAL idle_in_transaction_session_timeout = 1300',
      );
      expect(statements).toHaveLength(3);
      expect(result?.isError).toBeUndefined();
      await client?.close();
      client = await serveTools(
        [
          sqlTool({
            ...searchOrdersOptions(db, { schema: SCHEMA, table: 'very_slow_orders' }),
            timeoutMs: 300,
          }),
        ],
        quiet,
      );
      const slow = await roundTrips(async () => {
        result = await client!.callTool('search_orders', {});
      });
      expect(slow).toHaveLength(3);
      expect(slow[2]).toBe('ROLLBACK');
      expect(expectFailure(result!).message).toBe('The query ran past its 300 ms limit.');
      const show = await db.readOnlyQuery!(
        { timeoutMs: 5000 },
        "SELECT current_setting('statement_timeout') AS t",
        [],
      );
      expect(show.rows).toEqual([{ t: '5s' }]);
    });

    it('two adapters with different session timeouts on one pool each get their own', async () => {
      const two = pgQueryable(counted.pool, { readOnlySession: { timeoutMs: 2000 } });
      const three = pgQueryable(counted.pool, { readOnlySession: { timeoutMs: 3000 } });
      const timeout = async (db: Queryable, ms: number) =>
        (await db.readOnlyQuery!({ timeoutMs: ms }, "SELECT current_setting('statement_timeout') AS t", []))
          .rows[0];
      expect(await timeout(two, 2000)).toEqual({ t: '2s' });
      expect(await timeout(three, 3000)).toEqual({ t: '3s' });
      expect(await timeout(two, 2000)).toEqual({ t: '2s' });
    });

    it('an aborted one-statement call cancels it and the connection is reused, not replaced', async () => {
      const db = pgQueryable(counted.pool, { readOnlySession: { timeoutMs: 10_000 } });
      const pid = async () =>
        (await db.readOnlyQuery!({ timeoutMs: 10_000 }, 'SELECT pg_backend_pid() AS pid', [])).rows[0];
      const before = await pid();
      const connectsBefore = connects;
      const controller = new AbortController();
      const sleeping = db.readOnlyQuery!(
        { timeoutMs: 10_000, signal: controller.signal },
        'SELECT pg_sleep(3)',
        [],
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      controller.abort(new Error('client went away'));
      await expect(sleeping).rejects.toThrow('client went away');
      expect(await pid()).toEqual(before);
      expect(connects).toBe(connectsBefore);
    });
  },
);
