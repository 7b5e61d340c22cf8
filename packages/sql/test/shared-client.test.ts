// One pg.Client behind several tools, each declared with its own `pgQueryable(client)` (the usual way to
// write `db:` in a declaration). One connection holds one transaction at a time: calls of different
// tools that the model sends together must take turns on it, or their statements share one transaction
// (the later BEGIN is only a warning) and one caller's SET LOCAL statement_timeout, COMMIT or ROLLBACK
// applies to the other's statement. Only a real server has a connection to share.
import { createSilentLogger, type ToolDefinition } from '@toolgate/core';
import { expectFailure, serveTools, type TestClient } from '@toolgate/core/testing';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pgQueryable, sqlTool } from '../src/index.js';
import { NEEDS_POSTGRES } from './engines.js';

const url = process.env.TEST_DATABASE_URL;
const SCHEMA = 'toolgate_sql_shared_client';

if (url === undefined) {
  describe('one pg.Client shared by tools', () => {
    it(NEEDS_POSTGRES, (context) => {
      context.skip(NEEDS_POSTGRES);
    });
  });
} else {
  describe('one pg.Client shared by tools, each with its own pgQueryable', () => {
    let admin: pg.Client;
    let shared: pg.Client;
    let client: TestClient | undefined;

    beforeAll(async () => {
      admin = new pg.Client({ connectionString: url });
      await admin.connect();
      // `settings` shows what a statement ran under; `slow_orders` takes 0.2 s a row.
      await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE; CREATE SCHEMA ${SCHEMA};
        CREATE TABLE ${SCHEMA}.orders (id integer PRIMARY KEY, customer_id integer NOT NULL);
        INSERT INTO ${SCHEMA}.orders VALUES (1, 1), (2, 1), (3, 2);
        CREATE VIEW ${SCHEMA}.settings AS SELECT o.id, o.customer_id,
          current_setting('statement_timeout') AS statement_timeout,
          current_setting('transaction_read_only') AS read_only FROM ${SCHEMA}.orders o;
        CREATE VIEW ${SCHEMA}.slow_orders AS SELECT o.id, o.customer_id
          FROM ${SCHEMA}.orders o, LATERAL (SELECT pg_sleep(0.2)) AS pause`);
      shared = new pg.Client({ connectionString: url });
      await shared.connect();
    });
    afterEach(async () => {
      await client?.close();
      client = undefined;
    });
    afterAll(async () => {
      await shared.end();
      await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
      await admin.end();
    });

    function tool(name: string, table: string, columns: string[], timeoutMs: number): ToolDefinition {
      return sqlTool({
        name,
        description: "A customer's orders.",
        // Its own adapter over the shared connection.
        db: pgQueryable(shared),
        from: { schema: SCHEMA, table },
        columns,
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
        timeoutMs,
      }) as ToolDefinition;
    }

    const items = (result: { isError?: boolean; structuredContent?: unknown }): unknown =>
      result.isError
        ? expectFailure(result as never)
        : (result.structuredContent as { items: unknown }).items;

    it('calls of two tools sent together each run in a read-only transaction of their own, under their own statement timeout', async () => {
      const columns = ['id', 'statement_timeout', 'read_only'];
      client = await serveTools(
        [
          tool('quick_settings', 'settings', columns, 200),
          tool('patient_settings', 'settings', columns, 5000),
        ],
        { logger: createSilentLogger() },
      );
      const results = await Promise.all([
        client.callTool('quick_settings', { customer: 1 }),
        client.callTool('patient_settings', { customer: 2 }),
        client.callTool('quick_settings', { customer: 2 }),
        client.callTool('patient_settings', { customer: 1 }),
      ]);
      expect(results.map(items)).toEqual([
        [
          { id: 1, statement_timeout: '200ms', read_only: 'on' },
          { id: 2, statement_timeout: '200ms', read_only: 'on' },
        ],
        [{ id: 3, statement_timeout: '5s', read_only: 'on' }],
        [{ id: 3, statement_timeout: '200ms', read_only: 'on' }],
        [
          { id: 1, statement_timeout: '5s', read_only: 'on' },
          { id: 2, statement_timeout: '5s', read_only: 'on' },
        ],
      ]);
    });

    it('a slow question paired with a call of a tool with a longer timeout still stops at its own limit', async () => {
      client = await serveTools(
        [tool('slow_orders', 'slow_orders', ['id'], 200), tool('orders', 'orders', ['id'], 5000)],
        { logger: createSilentLogger() },
      );
      const [slow, other] = await Promise.all([
        client.callTool('slow_orders', { customer: 1 }),
        client.callTool('orders', { customer: 2 }),
      ]);
      expect([expectFailure(slow).error, expectFailure(slow).message]).toEqual([
        'timeout',
        'The query ran past its 200 ms limit.',
      ]);
      expect(items(other)).toEqual([{ id: 3 }]);
    });
  });
}
