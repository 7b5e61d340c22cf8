// The README's example, typechecked with the package (README imports '@toolgate/sql' where this file
// imports '../src/index.js'; test/readme.test.ts keeps the two identical).

import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { registerTools } from '@toolgate/core';
import type pg from 'pg';
import { pgQueryable, sqlTool } from '../src/index.js';

declare const pool: pg.Pool;
declare const server: McpServer;

const myOrders = sqlTool({
  name: 'my_orders',
  description: "The signed-in customer's own orders.",
  db: pgQueryable(pool),
  from: 'orders',
  columns: ['id', 'status'],
  filters: { status: { kind: 'enum', values: ['paid', 'shipped'], description: 'Only this status.' } },
  // Resolved by core from the verified token before any middleware runs; rides on ctx.bindings.
  bind: { customer_id: ({ request }) => request.authInfo?.extra?.customerId as number | undefined },
  limit: { default: 10, max: 10 },
});
// WHERE "customer_id" = $1 AND "status" = $2   -- $1 from the verified token, never from the arguments

// Every key derived from a call includes the bound customer id: with @toolgate/repeat-guard in the
// chain, customer 43 never gets customer 42's cached rows.
registerTools(server, [myOrders]);
