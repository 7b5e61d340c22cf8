// Cost of repeat-guard per call, against a bare core chain: distinct arguments (every call a miss:
// hash, store read, store write) and identical arguments (every call a hit: answered from the store).
// Run: npx tsx bench/repeat-guard.bench.ts
import { compareCalls, formatBenchTable } from '@toolgate/bench-harness';
import {
  compose,
  createSilentLogger,
  defineTool,
  ok,
  type ToolDefinition,
  type ToolMiddleware,
} from '@toolgate/core';
import { createTestContext, serveTools } from '@toolgate/core/testing';
import * as z from 'zod';
import { createRepeatGuard } from '../src/index.js';

const tool = defineTool({
  name: 'search_orders',
  description: 'Search orders by status.',
  input: { status: z.enum(['open', 'shipped']), page: z.number().int().min(0) },
  handler: async ({ status, page }) => ok({ items: [{ id: `${status}-${page}` }] }),
}) as ToolDefinition;

const clientWith = (middleware: ToolMiddleware[]) =>
  serveTools([tool], { middleware, logger: createSilentLogger(), sessionId: 'bench' });

const bare = await clientWith([]);
const misses = await clientWith([createRepeatGuard()]);
const hits = await clientWith([createRepeatGuard()]);

console.log('## Through a real client (tools/call round trip), sequential\n');
console.log(
  formatBenchTable(
    await compareCalls(
      [
        { name: 'bare core chain', call: (i) => bare.callTool('search_orders', { status: 'open', page: i }) },
        {
          name: 'repeat-guard, distinct args (misses)',
          call: (i) => misses.callTool('search_orders', { status: 'open', page: i }),
        },
        {
          name: 'repeat-guard, identical args (hits)',
          call: () => hits.callTool('search_orders', { status: 'open', page: 1 }),
        },
      ],
      { rounds: 9, callsPerRound: 1000, warmup: 300 },
    ),
  ),
);

// The middleware alone, without the SDK round trip's noise: the added cost is the guard's own.
const handler = async () => ok({ items: [{ id: 'open-1' }] });
const contextOf = (page: number) =>
  createTestContext({ tool, args: { status: 'open', page }, request: { sessionId: 'bench' } });
const bareChain = compose([]);
const missChain = compose([createRepeatGuard()]);
const hitChain = compose([createRepeatGuard()]);

console.log('\n## The middleware alone (compose + a minimal context), sequential\n');
console.log(
  formatBenchTable(
    await compareCalls(
      [
        {
          name: 'bare compose([])',
          call: (i) => bareChain(contextOf(i), handler),
        },
        {
          name: 'repeat-guard, distinct args (misses)',
          call: (i) => missChain(contextOf(i), handler),
        },
        {
          name: 'repeat-guard, identical args (hits)',
          call: () => hitChain(contextOf(1), handler),
        },
      ],
      { rounds: 15, callsPerRound: 5000, warmup: 2000 },
    ),
  ),
);

await Promise.all([bare.close(), misses.close(), hits.close()]);
