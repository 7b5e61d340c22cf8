// The README's Usage example, typechecked with the package (README shows '@toolgate/audit' where this
// file imports '../src/index.js'; test/readme.test.ts keeps the two identical).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { defineTool, ok, registerTools } from '@toolgate/core';
import * as z from 'zod';
import { createAudit, createFileSink } from '../src/index.js';

const login = defineTool({
  name: 'check_login',
  description: 'Checks a username and password against the directory.',
  input: { username: z.string(), password: z.string() },
  handler: async ({ username }) => ok({ username, valid: true }),
});

const audit = createAudit({
  sink: createFileSink('/var/log/orders/audit.jsonl'),
  secretKeys: ['ssn'], // added to core's password, token, secret, apikey, ...
  tools: { check_login: { args: 'shape' } }, // record { username: 'string', password: 'string' } only
});

const server = new McpServer({ name: 'orders', version: '1.0.0' });
registerTools(server, [login], { middleware: [audit] });
await server.connect(new StdioServerTransport());
// Audit installs no signal handler: your shutdown closes it (see "Shutdown" below).
