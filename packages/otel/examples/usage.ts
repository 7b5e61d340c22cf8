// The README's Usage section, typechecked with the package (README shows '@toolgate/otel' where this
// file imports '../src/index.js'; test/readme.test.ts keeps the two identical).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { defineTool, ok, registerTools } from '@toolgate/core';
import * as z from 'zod';
import { createOtel } from '../src/index.js';

const getOrderStatus = defineTool({
  name: 'get_order_status',
  description: 'The status of one order, by its id. Not for searching orders.',
  input: { id: z.string() },
  handler: async ({ id }) => ok({ id, status: 'shipped' }),
});

const tracing = createOtel({
  transport: 'pipe',
  // Per tool, the same rules (core's merge rule); `false` leaves a tool untraced.
  tools: { get_order_status: { recordArguments: true } },
});

const server = new McpServer({ name: 'order-service', version: '1.0.0' });
registerTools(server, [getOrderStatus], {
  // otel first: it times everything and sees what the model finally got.
  middleware: [tracing],
});
await server.connect(new StdioServerTransport());
