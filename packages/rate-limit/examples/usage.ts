// The README's Usage example, typechecked with the package (README shows '@toolgate/rate-limit' where
// this file imports '../src/index.js'; test/readme.test.ts keeps the two identical).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { registerTools, type ToolDefinition, type ToolMiddleware } from '@toolgate/core';
import { createRateLimit } from '../src/index.js';

declare const tools: ToolDefinition[];
declare const otel: ToolMiddleware, audit: ToolMiddleware, redactErrors: ToolMiddleware;
declare const authz: ToolMiddleware, repeatGuard: ToolMiddleware;

const perCaller = { name: 'per-caller', per: 'caller', points: 120, duration: '1m' } as const;
const writes = { name: 'writes-per-caller', per: 'caller-tool', points: 10, duration: '1m' } as const;
const rateLimit = createRateLimit({
  limits: [perCaller, { name: 'everyone', per: 'global', points: 600, duration: '1m' }],
  tools: {
    // replaces the global list for this tool; repeating perCaller shares its counter
    request_refund: { limits: [perCaller, writes] },
    cancel_order: { limits: [perCaller, writes] }, // one counter per caller and tool
    get_order_status: false, // no limits
  },
});

const server = new McpServer({ name: 'orders', version: '1.0.0' });
registerTools(server, tools, { middleware: [otel, audit, redactErrors, authz, rateLimit, repeatGuard] });

// At shutdown, after draining calls: writes pending log summaries.
export function shutdown(): void {
  rateLimit.close();
}
