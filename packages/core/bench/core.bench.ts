// tools/call round trips over the in-memory transport: the bare SDK vs the same handler through core.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { compareCalls, formatBenchTable } from '@toolgate/bench-harness';
import * as z from 'zod';
import { createSilentLogger, defineTool, ok, registerTools, type ToolMiddleware } from '../src/index.js';
import { connectTestClient, type TestClient } from '../src/testing.js';

const input = { q: z.string() };

async function bareServer(): Promise<TestClient> {
  const server = new McpServer({ name: 'bare', version: '1.0.0' });
  server.registerTool('echo', { description: 'Echo.', inputSchema: input }, async ({ q }) => {
    const data = { ok: true, q };
    return { content: [{ type: 'text', text: JSON.stringify(data) }], structuredContent: data };
  });
  return connectTestClient(server);
}

async function coreServer(middleware: ToolMiddleware[]): Promise<TestClient> {
  const server = new McpServer({ name: 'core', version: '1.0.0' });
  const echo = defineTool({ name: 'echo', description: 'Echo.', input, handler: ({ q }) => ok({ q }) });
  registerTools(server, [echo], { middleware, logger: createSilentLogger() });
  return connectTestClient(server);
}

const passThrough: ToolMiddleware = (_ctx, next) => next();

const bare = await bareServer();
const empty = await coreServer([]);
const five = await coreServer([passThrough, passThrough, passThrough, passThrough, passThrough]);

for (const concurrency of [1, 64]) {
  const rows = await compareCalls(
    [
      { name: 'bare SDK handler', call: (i) => bare.callTool('echo', { q: `v${i}` }) },
      { name: 'core, empty chain', call: (i) => empty.callTool('echo', { q: `v${i}` }) },
      { name: 'core, 5 pass-through middleware', call: (i) => five.callTool('echo', { q: `v${i}` }) },
    ],
    { concurrency },
  );
  console.log(`\n### @toolgate/core: tools/call round trip, concurrency ${concurrency}\n`);
  console.log(formatBenchTable(rows));
}
await Promise.all([bare.close(), empty.close(), five.close()]);
