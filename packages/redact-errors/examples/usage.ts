// The README's Usage section, typechecked with the package (README shows '@toolgate/redact-errors'
// where this file imports '../src/index.js'; test/readme.test.ts keeps the two identical).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createStderrLogger, defineTool, ok, registerTools, type ToolMiddleware } from '@toolgate/core';
import pg from 'pg';
import * as z from 'zod';
import { createRedactErrors } from '../src/index.js';

declare const otel: ToolMiddleware;
declare const audit: ToolMiddleware;
declare const breaker: ToolMiddleware;

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });

const getOrderStatus = defineTool({
  name: 'get_order_status',
  description: 'Status of one order by its 16-digit id.',
  input: { orderId: z.string().regex(/^\d{16}$/) },
  handler: async ({ orderId }) => {
    // A refused connection, a statement timeout or a bug thrown here never reaches the model raw.
    const { rows } = await pool.query('SELECT status FROM orders WHERE id = $1', [orderId]);
    return ok({ orderId, status: rows[0]?.status ?? 'unknown' });
  },
});

const redact = createRedactErrors({
  patterns: [{ name: 'ticket', pattern: /\bJIRA-\d+/g, replace: '[ticket]' }],
  classify: (error) =>
    error instanceof Error && error.name === 'QuotaError'
      ? { code: 'rate_limited', retryAfterMs: 60_000, reason: 'vendor quota' }
      : undefined,
  logIntervalMs: 60_000, // repeats of one failure: one summary line a minute, with count and incident ids
  tools: { debug_echo: false }, // this tool's failures reach the model as it wrote them (bar secrets)
});

const server = new McpServer({ name: 'orders', version: '1.0.0' });
registerTools(server, [getOrderStatus], {
  logger: createStderrLogger(),
  // A global middleware: its scrubText hook also covers failures made by otel and audit outside it.
  middleware: [otel, audit, redact, breaker],
});
await server.connect(new StdioServerTransport());

// At shutdown, after in-flight calls drained: write the pending log summaries.
redact.close();
