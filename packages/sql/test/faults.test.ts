// Network faults between the pg adapter and a real PostgreSQL server, through core's loopback fault
// proxy: a connection that goes silent after the server took a statement (a NAT or firewall that lost
// the flow, a reply lost on the way back) must neither hang the call nor keep its pool connection for
// good. Only a real server has a network; PGlite runs in process.
import { createSilentLogger, type ToolDefinition } from '@toolgate/core';
import {
  expectFailure,
  type FaultProxy,
  serveTools,
  startFaultProxy,
  type TestClient,
} from '@toolgate/core/testing';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type PgQueryableOptions, pgQueryable, type Queryable, sqlTool } from '../src/index.js';
import { NEEDS_POSTGRES } from './engines.js';

const url = process.env.TEST_DATABASE_URL;
const SCHEMA = 'toolgate_sql_faults';

if (url === undefined) {
  describe('network faults', () => {
    it(NEEDS_POSTGRES, (context) => {
      context.skip(NEEDS_POSTGRES);
    });
  });
} else {
  describe('network faults between the pool and PostgreSQL', () => {
    let admin: pg.Pool;
    let proxy: FaultProxy;
    let proxiedUrl: string;
    const pools: pg.Pool[] = [];
    const clients: TestClient[] = [];

    beforeAll(async () => {
      admin = new pg.Pool({ connectionString: url, max: 1 });
      await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE; CREATE SCHEMA ${SCHEMA};
        CREATE TABLE ${SCHEMA}.orders (id integer PRIMARY KEY, customer_id integer NOT NULL);
        INSERT INTO ${SCHEMA}.orders VALUES (1, 1), (2, 1), (3, 2)`);
      const target = new URL(url);
      proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port || 5432) });
      target.hostname = '127.0.0.1';
      target.port = String(proxy.port);
      proxiedUrl = target.toString();
    });
    afterEach(async () => {
      await Promise.all(clients.splice(0).map((client) => client.close()));
    });
    afterAll(async () => {
      await proxy.close();
      await Promise.all(pools.splice(0).map((pool) => pool.end()));
      await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
      await admin.end();
    });

    /** A pool of ONE connection through the proxy: a connection kept by a lost call starves the next. */
    function poolOfOne(): pg.Pool {
      const pool = new pg.Pool({ connectionString: proxiedUrl, max: 1 });
      pool.on('error', () => undefined);
      pools.push(pool);
      return pool;
    }

    async function serveOrders(db: Queryable): Promise<TestClient> {
      const tool = sqlTool({
        from: { schema: SCHEMA, table: 'orders' },
        columns: ['id'],
        filters: {
          customer: {
            kind: 'equals',
            type: 'integer',
            column: 'customer_id',
            min: 1,
            max: 1000,
            description: 'The customer.',
          },
        },
        sort: { keys: ['id'], default: 'id_asc' },
        limit: { default: 10, max: 10 },
        name: 'customer_orders',
        description: "A customer's orders.",
        db,
        timeoutMs: 300,
      }) as ToolDefinition;
      const client = await serveTools([tool], { logger: createSilentLogger() });
      clients.push(client);
      return client;
    }

    async function untilIdleInTransaction(): Promise<void> {
      for (let i = 0; i < 500; i += 1) {
        const { rows } = await admin.query(
          `SELECT 1 FROM pg_stat_activity WHERE state = 'idle in transaction' AND query LIKE '%_toolgate_total%'`,
        );
        if (rows.length > 0) return;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      throw new Error('the statement never reached the server');
    }

    const itemIds = (result: { structuredContent?: unknown }): number[] =>
      (result.structuredContent as { items: { id: number }[] }).items.map((item) => item.id);

    // The tool's statement (its text holds the count's alias `_toolgate_total`; once prepared, only its
    // name `toolgate_<digest>` is sent), and the COMMIT that ends its transaction.
    const STATEMENT = (chunk: Buffer): boolean => chunk.includes('toolgate_');
    const COMMIT = (chunk: Buffer): boolean => chunk.includes('COMMIT');

    const cases: [string, PgQueryableOptions, (chunk: Buffer) => boolean][] = [
      ['the statement’s reply', {}, STATEMENT],
      ['the COMMIT’s acknowledgement', {}, COMMIT],
      [
        'the reply of a statement sent alone (readOnlySession, prepared)',
        { readOnlySession: { timeoutMs: 300 }, preparedStatements: true },
        STATEMENT,
      ],
    ];

    it.each(cases)(
      'a connection that goes silent after the server took the call (%s lost) answers unavailable, and its pool connection is replaced: the next caller is served',
      async (_what, options, match) => {
        const pool = poolOfOne();
        const c = await serveOrders(pgQueryable(pool, options));
        expect(itemIds(await c.callTool('customer_orders', { customer: 1 }))).toEqual([1, 2]);
        // The server runs the statement (or commits); its answer never comes back and nothing resets.
        proxy.silenceAfter(match);
        const lost = expectFailure(await c.callTool('customer_orders', { customer: 1 }));
        expect([lost.error, lost.message, lost.retryable]).toEqual([
          'unavailable',
          'The database is unavailable.',
          true,
        ]);
        // The silent connection was dropped, not kept checked out: the pool's only slot serves again.
        const next = await c.callTool('customer_orders', { customer: 2 });
        expect([next.isError, itemIds(next)]).toEqual([undefined, [3]]);
        expect([pool.totalCount, pool.idleCount]).toEqual([1, 1]);
      },
    );

    it('a call its caller abandoned while the reply was lost never keeps the connection: the next caller is served', async () => {
      const pool = poolOfOne();
      const c = await serveOrders(pgQueryable(pool));
      expect(itemIds(await c.callTool('customer_orders', { customer: 1 }))).toEqual([1, 2]);
      proxy.silenceAfter(STATEMENT);
      const controller = new AbortController();
      const call = c.callTool('customer_orders', { customer: 1 }, { signal: controller.signal });
      // The server ran the statement and waits for the next one; its reply is lost on the way back.
      await untilIdleInTransaction();
      // The caller gives up (a deadline, a closed connection): the cancel finds nothing to stop.
      controller.abort();
      await expect(call).rejects.toThrow(/abort/i);
      // With the connection kept for good, this call would wait for the pool's only slot forever.
      const next = await c.callTool('customer_orders', { customer: 2 });
      expect([next.isError, itemIds(next)]).toEqual([undefined, [3]]);
    });

    it('a single pg.Client whose connection goes silent answers unavailable instead of hanging every call behind it', async () => {
      const client = new pg.Client({ connectionString: proxiedUrl });
      client.on('error', () => undefined);
      await client.connect();
      const c = await serveOrders(pgQueryable(client));
      expect(itemIds(await c.callTool('customer_orders', { customer: 1 }))).toEqual([1, 2]);
      proxy.silenceAfter(STATEMENT);
      const [lost, queued] = await Promise.all([
        c.callTool('customer_orders', { customer: 1 }),
        c.callTool('customer_orders', { customer: 2 }),
      ]);
      for (const result of [lost, queued]) {
        expect([expectFailure(result).error, expectFailure(result).retryable]).toEqual(['unavailable', true]);
      }
    });
  });
}
