// The README's example, typechecked with the package (README imports '@toolgate/sql' where this file
// imports '../src/index.js'; test/readme.test.ts keeps the two identical).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { registerTools } from '@toolgate/core';
import pg from 'pg';
import { pgQueryable, sqlTool } from '../src/index.js';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });

const searchOrders = sqlTool({
  name: 'search_orders',
  description:
    'Search orders by status, age and customer email. Use for lists of orders; not for one order by id.',
  db: pgQueryable(pool), // or pgliteQueryable(await PGlite.create())
  from: { schema: 'sales', table: 'orders' },
  columns: ['id', 'status', { column: 'customer_email', as: 'email' }, 'total_cents', 'created_at'],
  filters: {
    status: {
      kind: 'enum',
      values: ['pending', 'paid', 'shipped', 'delivered', 'cancelled'],
      description: 'Only orders in this status.',
    },
    days: {
      kind: 'withinDays',
      column: 'created_at',
      max: 365,
      default: 30,
      description: 'Only orders placed within the last N days.',
    },
    customer_email: {
      kind: 'prefix',
      maxLength: 100,
      description: 'Only orders whose customer email starts with this text.',
    },
  },
  sort: {
    keys: { created_at: 'created_at', total: 'total_cents' },
    default: 'created_at_desc',
    tiebreaker: 'id',
  },
  limit: { default: 20, max: 50 },
  timeoutMs: 2000,
  noun: 'orders',
});

const server = new McpServer({ name: 'orders', version: '1.0.0' });
registerTools(server, [searchOrders]);
await server.connect(new StdioServerTransport());
