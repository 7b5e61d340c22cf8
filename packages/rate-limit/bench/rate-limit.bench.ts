// Added cost of rate-limit per call: the memory store against a bare chain (target under 2 µs), and,
// with TEST_REDIS_URL, the Redis limiter against a bare Redis round trip (PING, SET).
// Run: npx -y pnpm@12.4.2 --filter @toolgate/rate-limit bench
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
import { Redis } from 'ioredis';
import * as z from 'zod';
import { createRateLimit } from '../src/index.js';

const tool = defineTool({
  name: 'search_orders',
  description: 'Search orders by status.',
  input: { status: z.enum(['open', 'shipped']), page: z.number().int().min(0) },
  handler: async ({ status, page }) => ok({ items: [{ id: `${status}-${page}` }] }),
}) as ToolDefinition;

// Limits no bench run reaches, so every call takes the allowed path (the one every real call pays).
const limits = [
  { name: 'per-caller', per: 'caller', points: 1_000_000_000, duration: '1h' },
  { name: 'everyone', per: 'global', points: 1_000_000_000, duration: '1h' },
] as const;
const authInfo = { token: 't', clientId: 'bench', scopes: [], extra: { customerId: 7 } };

const clientWith = (middleware: ToolMiddleware[]) =>
  serveTools([tool], { middleware, logger: createSilentLogger(), authInfo });

const handler = async () => ok({ items: [{ id: 'open-1' }] });
const contextOf = (page: number) =>
  createTestContext({ tool, args: { status: 'open', page }, request: { authInfo } });

const bareChain = compose([]);
const bare = await clientWith([]);
const memory = await clientWith([createRateLimit({ limits })]);
console.log('## Memory store, through a real client (tools/call round trip), sequential\n');
console.log(
  formatBenchTable(
    await compareCalls(
      [
        { name: 'bare core chain', call: (i) => bare.callTool('search_orders', { status: 'open', page: i }) },
        {
          name: 'rate-limit (memory, 2 limits)',
          call: (i) => memory.callTool('search_orders', { status: 'open', page: i }),
        },
      ],
      { rounds: 9, callsPerRound: 1000, warmup: 300 },
    ),
  ),
);

const oneLimit = compose([createRateLimit({ limits: [limits[0]] })]);
const twoLimits = compose([createRateLimit({ limits })]);
console.log('\n## Memory store, the middleware alone (compose + a minimal context), sequential\n');
console.log(
  formatBenchTable(
    await compareCalls(
      [
        { name: 'bare compose([])', call: (i) => bareChain(contextOf(i), handler) },
        { name: 'rate-limit (memory, 1 caller limit)', call: (i) => oneLimit(contextOf(i), handler) },
        { name: 'rate-limit (memory, caller + global)', call: (i) => twoLimits(contextOf(i), handler) },
      ],
      { rounds: 15, callsPerRound: 5000, warmup: 2000 },
    ),
  ),
);
await Promise.all([bare.close(), memory.close()]);

const url = process.env.TEST_REDIS_URL;
if (url === undefined) {
  console.log('\nRedis: set TEST_REDIS_URL (e.g. redis://127.0.0.1:6379) to measure the Redis limiter.');
} else {
  const redis = new Redis(url, { enableOfflineQueue: false, protocol: 2, socketTimeout: 2000 });
  await new Promise((resolve) => redis.once('ready', resolve));
  const prefix = `tg:rl-bench:${process.pid}`;
  const redisOne = compose([createRateLimit({ limits: [limits[0]], keyPrefix: prefix, store: { redis } })]);
  const redisTwo = compose([createRateLimit({ limits, keyPrefix: prefix, store: { redis } })]);
  console.log('\n## Redis store, the middleware alone, sequential (beside bare Redis round trips)\n');
  console.log(
    formatBenchTable(
      await compareCalls(
        [
          { name: 'bare compose([])', call: (i) => bareChain(contextOf(i), handler) },
          { name: 'redis PING', call: () => redis.ping() },
          { name: 'redis SET', call: (i) => redis.set(`${prefix}:set`, String(i), 'EX', 60) },
          { name: 'rate-limit (redis, 1 caller limit)', call: (i) => redisOne(contextOf(i), handler) },
          { name: 'rate-limit (redis, caller + global)', call: (i) => redisTwo(contextOf(i), handler) },
        ],
        { rounds: 9, callsPerRound: 1000, warmup: 300 },
      ),
    ),
  );
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
}
