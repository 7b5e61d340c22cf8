// Added cost of redact-errors per call: the bare core chain vs the same chain with createRedactErrors(),
// on success results (passed untouched), returned failures (scrubbed) and thrown errors (mapped).
// Two views: full tools/call round trips over the in-memory transport, and the middleware alone
// (the chain called directly), where the transport's noise cannot hide a microsecond.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { compareCalls, formatBenchTable } from '@toolgate/bench-harness';
import {
  compose,
  createSilentLogger,
  defineTool,
  fail,
  ok,
  registerTools,
  type ToolContext,
  type ToolDefinition,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import { connectTestClient, createTestContext, type TestClient } from '@toolgate/core/testing';
import * as z from 'zod';
import { createRedactErrors } from '../src/index.js';

const logger = createSilentLogger();
const input = { q: z.string(), mode: z.enum(['ok', 'fail', 'fail-path', 'throw']) };
const refused = (): Error =>
  Object.assign(new Error('connect ECONNREFUSED 10.0.0.5:5432'), { code: 'ECONNREFUSED' });

function answer(mode: string, q: string): ToolResult {
  if (mode === 'fail') return fail('not_found', `No order ${q}.`);
  if (mode === 'fail-path') return fail('not_found', `No file /srv/data/orders/${q}.json.`);
  if (mode === 'throw') throw refused();
  return ok({ q });
}

const tool = defineTool({
  name: 'orders',
  description: 'Bench.',
  input,
  handler: ({ q, mode }) => answer(mode, q),
});

async function server(middleware: ToolMiddleware[]): Promise<TestClient> {
  const mcp = new McpServer({ name: 'bench', version: '1.0.0' });
  registerTools(mcp, [tool], { middleware, logger });
  return connectTestClient(mcp);
}

const bare = await server([]);
const redacted = await server([createRedactErrors()]);

for (const mode of ['ok', 'fail', 'fail-path'] as const) {
  const rows = await compareCalls(
    [
      { name: `core chain, ${mode}`, call: (i) => bare.callTool('orders', { q: `${i}`, mode }) },
      {
        name: `+ createRedactErrors(), ${mode}`,
        call: (i) => redacted.callTool('orders', { q: `${i}`, mode }),
      },
    ],
    { concurrency: 1, rounds: 11, callsPerRound: 1500 },
  );
  console.log(`\n### @toolgate/redact-errors: tools/call round trip, ${mode} results\n`);
  console.log(formatBenchTable(rows));
}
await Promise.all([bare.close(), redacted.close()]);

// The middleware alone: a context and a next() that answers at once, as core's innermost would.
const context = (): ToolContext => createTestContext({ tool: tool as ToolDefinition, logger });
const bareChain = compose([]);
const redactChain = compose([createRedactErrors()]);
const direct = (chain: ToolMiddleware, mode: string) => (i: number) =>
  chain(context(), async () => answer(mode, `${i}`));
// core's last-resort guard answers a throw when nothing else does; the baseline catches it the same way.
const caught = (chain: ToolMiddleware) => (i: number) =>
  chain(context(), async () => answer('throw', `${i}`)).catch(() => fail('internal', 'Internal error.'));

for (const mode of ['ok', 'fail', 'fail-path', 'throw'] as const) {
  const rows = await compareCalls(
    [
      { name: `bare chain, ${mode}`, call: mode === 'throw' ? caught(bareChain) : direct(bareChain, mode) },
      { name: `createRedactErrors(), ${mode}`, call: direct(redactChain, mode) },
    ],
    { concurrency: 1, rounds: 11, callsPerRound: 20_000, warmup: 5000 },
  );
  console.log(`\n### @toolgate/redact-errors: the middleware alone, ${mode} results\n`);
  console.log(formatBenchTable(rows));
}
