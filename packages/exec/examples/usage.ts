// The README's Usage section, typechecked with the package (README shows '@toolgate/exec' where this
// file imports '../src/index.js'; test/readme.test.ts keeps the README identical to examples/).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { registerTools } from '@toolgate/core';
import * as z from 'zod';
import { execTool, option, value } from '../src/index.js';

const renderInvoice = execTool({
  name: 'render_invoice',
  description: 'Renders the invoice of one order as plain text. Use after get_order_status; not for lists.',
  input: {
    orderId: z
      .string()
      .regex(/^\d{16}$/)
      .describe('The 16-digit order id'),
    lines: z.number().int().min(1).max(200).default(50).describe('Invoice lines to show'),
  },
  command: '/usr/bin/node',
  allow: ['/usr/bin/node'],
  cwd: '/srv/invoices',
  env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' },
  inheritEnv: ['TZ'],
  timeoutMs: 5000,
  maxOutputBytes: 64 * 1024,
  // Plain strings are the declaration's; every value from the input is tagged.
  args: (input) => [
    '/srv/invoices/render.js',
    '--format',
    'text',
    option('--lines', input.lines),
    '--',
    value(input.orderId),
  ],
  exitCodes: { 2: { code: 'not_found', message: 'No invoice for this order.', hint: 'Check the order id.' } },
  annotations: { readOnlyHint: true, openWorldHint: false },
});

const server = new McpServer({ name: 'orders', version: '1.0.0' });
registerTools(server, [renderInvoice]);
await server.connect(new StdioServerTransport());
