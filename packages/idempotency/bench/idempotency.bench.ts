// Cost of idempotency per call against a bare core chain: a tool that is not opted in (the pass-through
// every other call pays), an opted-in tool with distinct arguments (digest, claim, result write) and
// a replay (digest, claim refused, read).
// Run: npx tsx bench/idempotency.bench.ts

import { compareCalls, formatBenchTable } from '@toolgate/bench-harness';
import { compose, createMemoryStore, defineTool, ok, type ToolDefinition } from '@toolgate/core';
import { createTestContext } from '@toolgate/core/testing';
import * as z from 'zod';
import { createIdempotency } from '../src/index.js';

const tool = defineTool({
  name: 'create_refund',
  description: 'Refund an amount on an order.',
  input: { order_id: z.string(), amount: z.number() },
  handler: async ({ order_id }) => ok({ refund_id: `R-${order_id}` }),
}) as ToolDefinition;

const handler = async () => ok({ refund_id: 'R-1' });
const contextOf = (amount: number) => createTestContext({ tool, args: { order_id: 'A-1', amount } });
const bare = compose([]);
const notOptedIn = compose([createIdempotency({ tools: { other_tool: {} } })]);
// One caller makes some 77,000 distinct calls here: past the memory store's 10,000 per caller, they
// would all be refused rate_limited, and the row would time the refusal.
const distinct = compose([
  createIdempotency({
    store: createMemoryStore({ maxEntriesPerScope: 100_000 }),
    tools: { create_refund: {} },
  }),
]);
const replays = compose([createIdempotency({ tools: { create_refund: {} } })]);

console.log('## The middleware alone (compose + a minimal context), sequential, memory store\n');
console.log(
  formatBenchTable(
    await compareCalls(
      [
        { name: 'bare compose([])', call: (i) => bare(contextOf(i), handler) },
        { name: 'idempotency, tool not opted in', call: (i) => notOptedIn(contextOf(i), handler) },
        { name: 'idempotency, distinct args (claim + store)', call: (i) => distinct(contextOf(i), handler) },
        { name: 'idempotency, identical args (replay)', call: () => replays(contextOf(1), handler) },
      ],
      { rounds: 15, callsPerRound: 5000, warmup: 2000 },
    ),
  ),
);
