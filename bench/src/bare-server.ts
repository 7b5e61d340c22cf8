import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type pg from 'pg';
import * as z from 'zod';

// What a careful developer writes by hand for search_orders { customer_email, days }: the same
// statement @toolgate/sql generates for these arguments, in a read-only transaction with a timeout.
export const HAND_WRITTEN_SEARCH = `SELECT "order_id", "status", "customer_email", "total_cents", "currency", "item_count",
  "created_at", "shipped_at", "carrier", "tracking_number",
  (SELECT count(*) FROM "orders" WHERE "created_at" >= now() - make_interval(days => $1) AND "customer_email" LIKE $2 ESCAPE E'\\\\') AS "total"
  FROM "orders" WHERE "created_at" >= now() - make_interval(days => $1) AND "customer_email" LIKE $2 ESCAPE E'\\\\'
  ORDER BY "created_at" DESC, "order_id" DESC LIMIT $3`;

/** The hand-written query in a read-only transaction with a statement timeout; rows and the total. */
export async function searchOrdersByHand(
  pool: pg.Pool,
  args: { customer_email: string; days: number; limit: number },
): Promise<{ items: Record<string, unknown>[]; total: number }> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN READ ONLY; SET LOCAL statement_timeout = 2000');
    const { rows } = await client.query(HAND_WRITTEN_SEARCH, [
      args.days,
      `${args.customer_email.replace(/[\\%_]/g, '\\$&')}%`,
      args.limit,
    ]);
    await client.query('COMMIT');
    const total = rows.length > 0 ? Number(rows[0].total) : 0;
    return { items: rows.map(({ total: _total, ...row }) => row), total };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/**
 * The baseline of the HTTP benchmark: the official SDK alone. Stateless Streamable HTTP (a fresh
 * McpServer and transport per POST, like the order-service), one tool running the hand-written query.
 */
export async function startBareHttpServer(
  pool: pg.Pool,
): Promise<{ url: string; server: Server; close(): Promise<void> }> {
  const createMcp = (): McpServer => {
    const mcp = new McpServer({ name: 'bare', version: '1.0.0' });
    mcp.registerTool(
      'search_orders',
      {
        description: 'List orders by age and customer email.',
        inputSchema: {
          customer_email: z.string().max(100),
          days: z.number().int().min(1).max(90).default(30),
          limit: z.number().int().min(1).max(50).default(10),
        },
      },
      async (args) => {
        const data = { ok: true, ...(await searchOrdersByHand(pool, args)) };
        return { content: [{ type: 'text', text: JSON.stringify(data) }], structuredContent: data };
      },
    );
    return mcp;
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const mcp = createMcp();
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on('close', () => {
        void transport.close();
        void mcp.close();
      });
      mcp
        .connect(transport)
        .then(() => transport.handleRequest(req, res, JSON.parse(Buffer.concat(chunks).toString('utf8'))))
        .catch(() => {
          if (!res.headersSent) res.writeHead(500).end();
        });
    });
  });
  await new Promise<void>((resolveListen) => server.listen(0, '127.0.0.1', resolveListen));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    server,
    close: () =>
      new Promise<void>((resolveClose) => {
        server.closeAllConnections();
        server.close(() => resolveClose());
      }),
  };
}
