// The README's per-tool example, typechecked with the package (README shows '@toolgate/authz' where this
// file imports '../src/index.js'; test/readme.test.ts keeps the two identical).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { registerTools, type ToolDefinition, type ToolMiddleware } from '@toolgate/core';
import { createAuthz } from '../src/index.js';

declare const tools: ToolDefinition[];
declare const otel: ToolMiddleware, audit: ToolMiddleware, redactErrors: ToolMiddleware;
declare const rateLimit: ToolMiddleware, repeatGuard: ToolMiddleware, idempotency: ToolMiddleware;
declare const confirm: ToolMiddleware, breaker: ToolMiddleware;

const authz = createAuthz({
  require: { scopes: ['orders:read'] }, // every tool that declares nothing
  tools: {
    refund: { require: { scopes: ['orders:write'] }, mode: 'refuse' }, // listed; refused naming the missing scope
    search_orders: {
      require: {
        anyOf: [['orders:read'], ['support']], // either set, in full
        claims: { tenant: (value) => value === 'acme' }, // authInfo.extra.tenant
      },
    },
    ping: false, // authz leaves it alone: every caller sees and calls it
  },
  local: 'allow', // stdio (a local transport): the person at the terminal may use everything
});

const server = new McpServer({ name: 'orders', version: '1.0.0' });
registerTools(server, tools, {
  middleware: [otel, audit, redactErrors, authz, rateLimit, repeatGuard, idempotency, confirm, breaker],
});
