// tools/call round trips over the in-memory transport: core's bare chain vs the same tool behind a
// closed breaker (the steady state), with and without a deadline, and with a handler that reads
// ctx.signal (which builds the deadline's derived signal).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { compareCalls, formatBenchTable } from '@toolgate/bench-harness';
import {
  createSilentLogger,
  defineTool,
  ok,
  registerTools,
  type ToolContext,
  type ToolDefinition,
  type ToolMiddleware,
} from '@toolgate/core';
import { connectTestClient, createTestContext, type TestClient } from '@toolgate/core/testing';
import * as z from 'zod';
import { type CircuitBreakerOptions, createCircuitBreaker } from '../src/index.js';

const input = { q: z.string() };

async function serveEcho(middleware: ToolMiddleware[], readsSignal = false): Promise<TestClient> {
  const server = new McpServer({ name: 'bench', version: '1.0.0' });
  const echo = defineTool({
    name: 'echo',
    description: 'Echo.',
    input,
    handler: ({ q }, ctx) => ok({ q, aborted: readsSignal ? ctx.signal.aborted : false }),
  });
  registerTools(server, [echo], { middleware, logger: createSilentLogger() });
  return connectTestClient(server);
}

const shutdowns: (() => void)[] = [];
// A capacity above the 64 concurrent calls below: with the default (32), half of those calls would be
// capacity refusals, and the rows would time the refusal answer instead of the breaker's overhead.
function breaker(options: CircuitBreakerOptions = {}): ToolMiddleware {
  const breakers = createCircuitBreaker({ capacity: 128, ...options });
  shutdowns.push(() => breakers.close());
  return breakers;
}

// For reference only: what an eager deadline signal (`AbortSignal.any` on every call) costs on this Node.
const eagerSignal: ToolMiddleware = (ctx, next) => {
  const deadline = new AbortController();
  ctx.signal = AbortSignal.any([ctx.signal, deadline.signal]);
  return next();
};

const bare = await serveEcho([]);
const closed = await serveEcho([breaker()]);
const noDeadline = await serveEcho([breaker({ timeout: false })]);
const readsSignal = await serveEcho([breaker()], true);
const eager = await serveEcho([eagerSignal]);

for (const concurrency of [1, 64]) {
  const rows = await compareCalls(
    [
      { name: 'core, empty chain (baseline)', call: (i) => bare.callTool('echo', { q: `v${i}` }) },
      { name: 'closed breaker, default 30 s deadline', call: (i) => closed.callTool('echo', { q: `v${i}` }) },
      { name: 'closed breaker, timeout: false', call: (i) => noDeadline.callTool('echo', { q: `v${i}` }) },
      {
        name: 'closed breaker, handler reads ctx.signal',
        call: (i) => readsSignal.callTool('echo', { q: `v${i}` }),
      },
      {
        name: 'reference: eager AbortSignal.any per call',
        call: (i) => eager.callTool('echo', { q: `v${i}` }),
      },
    ],
    { concurrency },
  );
  console.log(`\n### @toolgate/circuit-breaker: tools/call round trip, concurrency ${concurrency}\n`);
  console.log(formatBenchTable(rows));
}
// The middleware alone, without the transport's noise: a fresh context per call, shaped like core's.
const logger = createSilentLogger();
const echoTool = defineTool({ name: 'echo', description: 'Echo.', input, handler: ({ q }) => ok({ q }) });
const answer = ok({ q: 'v' });
const contextOf = (index: number): ToolContext =>
  createTestContext({
    tool: echoTool as ToolDefinition,
    args: { q: `v${index}` },
    request: { id: index },
    logger,
  });
const handlerStep = () => Promise.resolve(answer);
const passThrough: ToolMiddleware = (_ctx, next) => next();
const direct = { closed: breaker(), noDeadline: breaker({ timeout: false }) };
const alone = await compareCalls(
  [
    { name: 'pass-through middleware (baseline)', call: (i) => passThrough(contextOf(i), handlerStep) },
    { name: 'closed breaker, default 30 s deadline', call: (i) => direct.closed(contextOf(i), handlerStep) },
    { name: 'closed breaker, timeout: false', call: (i) => direct.noDeadline(contextOf(i), handlerStep) },
  ],
  { callsPerRound: 20_000 },
);
console.log('\n### @toolgate/circuit-breaker: the middleware alone (no transport), sequential\n');
console.log(formatBenchTable(alone));

for (const shutdown of shutdowns) shutdown();
await Promise.all([bare.close(), closed.close(), noDeadline.close(), readsSignal.close(), eager.close()]);
