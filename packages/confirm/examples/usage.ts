// The README's Usage example, typechecked with the package (README shows '@toolgate/confirm' where this
// file imports '../src/index.js'; test/readme.test.ts keeps the two identical).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { defineTool, ok, registerTools, type ToolMiddleware } from '@toolgate/core';
import { createRedisClient, createRedisStore, redisReady } from '@toolgate/redis-store';
import * as z from 'zod';
import { confirmationArgument, createConfirm } from '../src/index.js';

declare const refunds: { create(orderId: string, amountCents: number): Promise<string> };
declare const audit: ToolMiddleware, rateLimit: ToolMiddleware, idempotency: ToolMiddleware;
declare const breaker: ToolMiddleware;

const requestRefund = defineTool({
  name: 'request_refund',
  description: 'Refund part or all of a paid order. Asks the user to confirm the exact refund first.',
  // Declare the confirmation argument: inputs are strict, and models can only fill arguments.
  input: {
    order_id: z.string(),
    amount_cents: z.number().int().positive(),
    reason: z.string(),
    confirmation: confirmationArgument,
  },
  annotations: { destructiveHint: true },
  handler: async ({ order_id, amount_cents }) =>
    ok({ refund_id: await refunds.create(order_id, amount_cents) }),
});

const secret = process.env.TOOLGATE_CONFIRM_SECRET; // >= 32 bytes, the same on every replica
// This server's name, the same on every replica: 'orders-prod' here, 'orders-staging' on staging.
const audience = process.env.TOOLGATE_CONFIRM_AUDIENCE;
if (!secret || !audience) throw new Error('TOOLGATE_CONFIRM_SECRET or TOOLGATE_CONFIRM_AUDIENCE is not set');
// Several replicas share issued confirmations in Redis (omit `store` for memory: one process).
const redis = createRedisClient(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
await redisReady(redis);

const confirm = createConfirm({
  secret,
  audience,
  store: createRedisStore(redis, { prefix: 'orders:' }),
  tools: {
    request_refund: {
      describe: (args) => `Refund ${Number(args.amount_cents) / 100} EUR of order ${String(args.order_id)}.`,
    },
  },
});

const server = new McpServer({ name: 'orders', version: '1.0.0' });
registerTools(server, [requestRefund], {
  middleware: [audit, rateLimit, idempotency, confirm, breaker],
});

// On shutdown, after the server stopped taking calls (the Redis client is yours to quit).
export async function shutdown(): Promise<void> {
  await confirm.close();
  await redis.quit();
}
