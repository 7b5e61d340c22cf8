// Cost of confirm per call: a tool that needs no confirmation (the pass-through every other call pays),
// against a bare core chain; and the two-step fallback's round trip (first call + confirmed call) and an
// elicitation round trip (auto-accepting client) through a real SDK client.
// Run: npx tsx bench/confirm.bench.ts

import { compareCalls, formatBenchTable } from '@toolgate/bench-harness';
import { compose, defineTool, ok, type ToolDefinition } from '@toolgate/core';
import { createTestContext, serveTools } from '@toolgate/core/testing';
import * as z from 'zod';
import { CONFIRM_META, confirmationArgument, createConfirm } from '../src/index.js';

const SECRET = 'bench-secret-of-at-least-32-bytes-0123456789';
const tool = defineTool({
  name: 'create_refund',
  description: 'Refund an amount on an order.',
  input: { order_id: z.string(), amount: z.number(), confirmation: confirmationArgument },
  handler: async ({ order_id }) => ok({ refund_id: `R-${order_id}` }),
}) as ToolDefinition;

const handler = async () => ok({ refund_id: 'R-1' });
const contextOf = (amount: number) => createTestContext({ tool, args: { order_id: 'A-1', amount } });
const bare = compose([]);
const notNeeded = compose([createConfirm({ secret: SECRET, tools: { other_tool: {} } })]);

console.log('## The middleware alone (compose + a minimal context), sequential\n');
console.log(
  formatBenchTable(
    await compareCalls(
      [
        { name: 'bare compose([])', call: (i) => bare(contextOf(i), handler) },
        { name: 'confirm, tool needs no confirmation', call: (i) => notNeeded(contextOf(i), handler) },
      ],
      { rounds: 15, callsPerRound: 5000, warmup: 2000 },
    ),
  ),
);

const plain = await serveTools([tool]);
const twoStep = await serveTools([tool], {
  middleware: [createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
});
const elicited = await serveTools([tool], {
  middleware: [createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
  onElicit: () => ({ action: 'accept', content: {} }),
});

console.log('\n## Through a real client, sequential (one row = one confirmed refund)\n');
console.log(
  formatBenchTable(
    await compareCalls(
      [
        {
          name: 'bare: one call',
          call: (i) => plain.callTool('create_refund', { order_id: 'A-1', amount: i }),
        },
        {
          name: 'two-step: first call + confirmed call',
          call: async (i) => {
            const first = await twoStep.callTool('create_refund', { order_id: 'A-1', amount: i });
            const { confirmation } = (first._meta?.[CONFIRM_META] ?? {}) as { confirmation: string };
            const second = await twoStep.callTool('create_refund', {
              order_id: 'A-1',
              amount: i,
              confirmation,
            });
            if (second.isError) throw new Error('confirmation refused');
          },
        },
        {
          name: 'elicitation: call + elicitation/create round trip',
          call: (i) => elicited.callTool('create_refund', { order_id: 'A-1', amount: i }),
        },
      ],
      { rounds: 9, callsPerRound: 500, warmup: 200 },
    ),
  ),
);
await Promise.all([plain.close(), twoStep.close(), elicited.close()]);
