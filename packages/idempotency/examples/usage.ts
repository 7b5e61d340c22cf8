// The README's Usage example, typechecked with the package (README shows '@toolgate/idempotency' where
// this file imports '../src/index.js'; test/readme.test.ts keeps the two identical).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { registerTools, type ToolDefinition, type ToolMiddleware } from '@toolgate/core';
import { createRedisClient, createRedisStore, redisReady } from '@toolgate/redis-store';
import { createIdempotency } from '../src/index.js';

declare const requestRefund: ToolDefinition, cancelOrder: ToolDefinition, searchOrders: ToolDefinition;
declare const audit: ToolMiddleware, rateLimit: ToolMiddleware, repeatGuard: ToolMiddleware;
declare const confirm: ToolMiddleware, breaker: ToolMiddleware;

// Several replicas share claims and results through Redis (omit `store` for memory: one process).
const redis = createRedisClient(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
await redisReady(redis);

const idempotency = createIdempotency({
  store: createRedisStore(redis, { prefix: 'orders:' }),
  tools: {
    request_refund: {}, // tools opt in; search_orders (a read) is not listed: every call runs
    cancel_order: { windowMs: 3_600_000 }, // a retried cancellation replays for an hour
  },
});

const server = new McpServer({ name: 'orders', version: '1.0.0' });
registerTools(server, [searchOrders, requestRefund, cancelOrder], {
  middleware: [audit, rateLimit, repeatGuard, idempotency, confirm, breaker],
});

// On shutdown, after the server stopped taking calls (the Redis client is yours to quit).
export async function shutdown(): Promise<void> {
  await idempotency.close();
  await redis.quit();
}
