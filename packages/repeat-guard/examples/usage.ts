// The README's Usage section, typechecked with the package (README shows '@toolgate/repeat-guard'
// where this file imports '../src/index.js'; test/readme.test.ts keeps the two identical).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { registerTools, type ToolDefinition, type ToolMiddleware } from '@toolgate/core';
import { Redis } from 'ioredis';
import { createRedisRepeatStore, createRepeatGuard } from '../src/index.js';

declare const searchOrders: ToolDefinition;
declare const getOrderStatus: ToolDefinition;
declare const getJobStatus: ToolDefinition;
declare const audit: ToolMiddleware;
declare const breaker: ToolMiddleware;

// The key is core's callKey: caller identity + the tool's bindings (a bound customer id) + tool +
// canonical arguments. Two callers, or two customers behind one client, never share an answer.
const guard = createRepeatGuard({
  windowMs: 60_000, // a repeat within a minute of the first identical call...
  threshold: 2, // ...is the second identical call: answered from the earlier result
  tools: {
    get_job_status: false, // a polling tool: every call runs
    search_orders: { threshold: 3, noProgress: 4 },
  },
});

const server = new McpServer({ name: 'orders', version: '1.0.0' });
registerTools(server, [searchOrders, getOrderStatus, getJobStatus], {
  middleware: [audit, guard, breaker],
});

// Several replicas behind a load balancer: share the state through Redis. socketTimeout closes a
// connection gone silent (createRedisClient of @toolgate/redis-store sets all of these).
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  autoResendUnfulfilledCommands: false,
  socketTimeout: 2000,
});
export const sharedGuard = createRepeatGuard({
  store: createRedisRepeatStore(redis, { prefix: 'orders:repeat:' }),
});

// On shutdown, after the server stopped taking calls: write the held-back outage log line.
guard.close();
