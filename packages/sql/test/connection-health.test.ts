// What a call leaves behind on its connection when it ends in an error that is not the connection's: a
// claim the read-back refused (a ToolError thrown inside the transaction), a work function's own error.
// The connection answered every statement, so its transaction is rolled back and it serves the next
// caller: a Pool keeps it (a tenant whose token spells its id `+1` must not make each of its calls cost
// the server a new connection) and a single Client is left out of any transaction (else the next
// caller's BEGIN joins the refused call's transaction, and once the server's idle-in-transaction
// timeout ends the session, every caller sharing that Client is refused). A call never starts inside a
// transaction someone else left open on its connection (a writer's), and a tool whose timeout is
// PostgreSQL's largest keeps its connection. Only a real server has connections to keep or lose.
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { createSilentLogger, type ToolDefinition } from '@toolgate/core';
import { expectFailure, serveTools, type TestClient } from '@toolgate/core/testing';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type PgClientLike, type PgPoolLike, pgQueryable, sqlTool } from '../src/index.js';
import { NEEDS_POSTGRES } from './engines.js';

const url = process.env.TEST_DATABASE_URL;
const SCHEMA = 'toolgate_sql_connection_health';

if (url === undefined) {
  describe('connection health after a refused call', () => {
    it(NEEDS_POSTGRES, (context) => {
      context.skip(NEEDS_POSTGRES);
    });
  });
} else {
  describe('connection health after a refused call (PostgreSQL)', () => {
    let admin: pg.Client;
    const clients: TestClient[] = [];
    const pools: pg.Pool[] = [];
    const singles: pg.Client[] = [];

    beforeAll(async () => {
      admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE; CREATE SCHEMA ${SCHEMA};
        CREATE TABLE ${SCHEMA}.orders (id integer PRIMARY KEY, customer_id integer NOT NULL);
        INSERT INTO ${SCHEMA}.orders VALUES (1, 1), (2, 1), (3, 2);
        CREATE TABLE ${SCHEMA}.ledger (id serial PRIMARY KEY, note text NOT NULL)`);
    });
    afterEach(async () => {
      await Promise.all(clients.splice(0).map((c) => c.close()));
      await Promise.all(pools.splice(0).map((p) => p.end()));
      await Promise.all(singles.splice(0).map((c) => c.end()));
    });
    afterAll(async () => {
      await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
      await admin.end();
    });

    /** A pool of one connection that counts the connections it opens. */
    function poolOfOne(): { pool: pg.Pool; opened: () => number } {
      const pool = new pg.Pool({ connectionString: url, max: 1 });
      pools.push(pool);
      let opened = 0;
      pool.on('connect', () => {
        opened += 1;
      });
      return { pool, opened: () => opened };
    }

    async function singleClient(): Promise<{ client: pg.Client; errors: unknown[] }> {
      const client = new pg.Client({ connectionString: url });
      const errors: unknown[] = [];
      client.on('error', (error) => errors.push(error));
      await client.connect();
      singles.push(client);
      return { client, errors };
    }

    function myOrders(db: PgPoolLike | PgClientLike, timeoutMs = 2000): ToolDefinition {
      return sqlTool({
        name: 'my_orders',
        description: 'The signed-in customer’s orders.',
        db: pgQueryable(db),
        from: { schema: SCHEMA, table: 'orders' },
        columns: ['id'],
        bind: { customer_id: ({ request }) => request.authInfo?.extra?.customerId as string | undefined },
        sort: { keys: ['id'], default: 'id_asc' },
        limit: { default: 10, max: 10 },
        timeoutMs,
      }) as ToolDefinition;
    }

    async function callAs(tool: ToolDefinition, customerId: string) {
      const authInfo: AuthInfo = {
        token: `t-${customerId}`,
        clientId: 'desk',
        scopes: [],
        extra: { customerId },
      };
      const c = await serveTools([tool], { logger: createSilentLogger(), authInfo });
      clients.push(c);
      return c.callTool('my_orders', {});
    }

    const ids = (result: { structuredContent?: unknown }) =>
      (result.structuredContent as { items: { id: number }[] }).items.map((item) => item.id);

    it('claims the read-back refuses (+1, 01) keep the pool’s connection: no new connection per refused call, and it is out of any transaction', async () => {
      const { pool, opened } = poolOfOne();
      const tool = myOrders(pool);
      expect(ids(await callAs(tool, '1'))).toEqual([1, 2]);
      for (const respelled of ['+1', '01', '+1', '0001']) {
        const failure = expectFailure(await callAs(tool, respelled));
        expect([respelled, failure.error]).toEqual([respelled, 'permission_denied']);
      }
      expect(ids(await callAs(tool, '2'))).toEqual([3]);
      // One connection served every call; the refused ones rolled back instead of destroying it.
      expect(opened()).toBe(1);
      const { rows } = await pool.query(`SELECT current_setting('transaction_read_only') AS "readOnly"`);
      expect(rows).toEqual([{ readOnly: 'off' }]);
    });

    it('on a single Client, a refused claim leaves no transaction open: the session outlives the idle-in-transaction timeout and serves the next caller', async () => {
      const { client, errors } = await singleClient();
      // timeoutMs 300: the transaction sets idle_in_transaction_session_timeout to 1300 ms.
      const tool = myOrders(client, 300);
      expect(ids(await callAs(tool, '1'))).toEqual([1, 2]);
      expect(expectFailure(await callAs(tool, '+2')).error).toBe('permission_denied');
      const { rows } = await client.query(`SELECT current_setting('transaction_read_only') AS "readOnly"`);
      expect(rows).toEqual([{ readOnly: 'off' }]);
      await new Promise((resolve) => setTimeout(resolve, 1800));
      expect(ids(await callAs(tool, '2'))).toEqual([3]);
      expect(errors).toEqual([]);
    });

    it('a work function that throws its own error after its statements ran rolls back and keeps the connection', async () => {
      const { pool, opened } = poolOfOne();
      const db = pgQueryable(pool);
      for (const thrown of [new TypeError('the work’s own bug'), 'a thrown string']) {
        await expect(
          db.readOnly({ timeoutMs: 2000 }, async (runner) => {
            await runner.query('SELECT 1 AS one', []);
            throw thrown;
          }),
        ).rejects.toBe(thrown);
      }
      // The statement failed on the server (42P01), the work caught it and threw its own error.
      await expect(
        db.readOnly({ timeoutMs: 2000 }, async (runner) => {
          await runner.query(`SELECT * FROM ${SCHEMA}.no_such_table`, []).catch(() => undefined);
          throw new RangeError('after a refused statement');
        }),
      ).rejects.toThrow(RangeError);
      expect(opened()).toBe(1);
      const { rows } = await pool.query(`SELECT current_setting('transaction_read_only') AS "readOnly"`);
      expect(rows).toEqual([{ readOnly: 'off' }]);
    });

    const ledgerRows = async (): Promise<number> =>
      (await admin.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.ledger`)).rows[0].n;

    it('a pooled connection a writer gave back inside its transaction is never used: the tool neither commits the writer’s unfinished insert nor runs in its read-write transaction', async () => {
      const { pool, opened } = poolOfOne();
      const tool = myOrders(pool);
      expect(ids(await callAs(tool, '1'))).toEqual([1, 2]);
      // A writer's bug: BEGIN, an INSERT, then release() without COMMIT or ROLLBACK.
      const writer = await pool.connect();
      await writer.query('BEGIN');
      await writer.query(`INSERT INTO ${SCHEMA}.ledger (note) VALUES ('abandoned')`);
      writer.release();
      const failure = expectFailure(await callAs(tool, '1'));
      expect([failure.error, failure.retryable]).toEqual(['unavailable', true]);
      // The connection was destroyed: the server rolled the abandoned insert back, and the next call
      // gets a connection of its own.
      expect(ids(await callAs(tool, '2'))).toEqual([3]);
      expect(await ledgerRows()).toBe(0);
      expect(opened()).toBe(2);
    });

    it('on a Client shared with a writer, a call made while the writer’s transaction is open sends nothing: the writer’s ROLLBACK still undoes its own work', async () => {
      const { client, errors } = await singleClient();
      const tool = myOrders(client);
      await client.query('BEGIN');
      await client.query(`INSERT INTO ${SCHEMA}.ledger (note) VALUES ('half done')`);
      // The model calls the read tool while the write tool's transaction is between two statements.
      const failure = expectFailure(await callAs(tool, '1'));
      expect([failure.error, failure.retryable]).toEqual(['unavailable', true]);
      const { rows } = await client.query(`SELECT current_setting('transaction_read_only') AS "readOnly"`);
      expect(rows).toEqual([{ readOnly: 'off' }]);
      await client.query('ROLLBACK');
      expect(await ledgerRows()).toBe(0);
      // Once the writer's transaction ended, the tool is served on the same Client.
      expect(ids(await callAs(tool, '1'))).toEqual([1, 2]);
      expect(errors).toEqual([]);
    });

    it('a tool whose timeout is PostgreSQL’s largest (2^31 - 1 ms) answers and keeps its connection', async () => {
      const { pool, opened } = poolOfOne();
      const tool = myOrders(pool, 2_147_483_647);
      for (let call = 0; call < 3; call += 1) {
        const result = await callAs(tool, '1');
        expect(result.isError ?? false).toBe(false);
        expect(ids(result)).toEqual([1, 2]);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(opened()).toBe(1);
    });
  });
}
