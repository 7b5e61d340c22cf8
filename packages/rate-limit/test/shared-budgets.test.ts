import { randomUUID } from 'node:crypto';
import { expectFailure, reportMissingService } from '@toolgate/core/testing';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRateLimit, RATE_LIMIT_META_KEY, type RateLimitOptions } from '../src/index.js';
import { closeAll, runs, serve, token } from './fixtures.js';

// Refused calls and shared budgets: a crowd on one tool whose own `tool` limit is reached must not
// spend the `global` budget that every other tool lives on (the rule the README states for a caller's
// own limits, one level up).

beforeEach(() => runs.clear());
afterEach(closeAll);

const perCaller = { name: 'per-caller', per: 'caller', points: 100, duration: '1h' } as const;
const everyone = { name: 'everyone', per: 'global', points: 5, duration: '1h' } as const;
const limits: RateLimitOptions = {
  limits: [perCaller, everyone],
  tools: {
    search_orders: {
      limits: [perCaller, { name: 'orders-tool', per: 'tool', points: 2, duration: '1h' }, everyone],
    },
  },
};

async function crowdThenOtherTool(options: RateLimitOptions) {
  const limiter = createRateLimit(options);
  const crowd = await Promise.all(
    [1, 2, 3].map((i) => serve([limiter], { authInfo: token('portal', { customerId: i }) })),
  );
  // 3 callers, 10 calls each at the saturated tool: 2 run, 28 are refused by its tool limit.
  for (const client of crowd) {
    for (let i = 0; i < 10; i += 1) await client.callTool('search_orders');
  }
  expect(runs.get('search_orders')).toBe(2);
  const other = await serve([limiter], { authInfo: token('portal', { customerId: 9 }) });
  return other;
}

describe('rate-limit: calls refused by a tool limit spend no global budget', () => {
  it('a crowd on a saturated tool leaves the global budget to the other tools (memory)', async () => {
    const other = await crowdThenOtherTool(limits);
    for (let i = 0; i < 3; i += 1) {
      expect((await other.callTool('get_order_status')).isError).toBeUndefined();
    }
    const refused = await other.callTool('get_order_status');
    expect(expectFailure(refused).error).toBe('rate_limited');
    expect(refused._meta?.[RATE_LIMIT_META_KEY]).toMatchObject({ name: 'everyone', limit: 5 });
    expect(runs.get('get_order_status')).toBe(3);
  });
});

const REDIS_URL = process.env.TEST_REDIS_URL;
if (REDIS_URL === undefined) {
  reportMissingService(it, 'shared budgets on a shared Redis', 'TEST_REDIS_URL', 'redis://127.0.0.1:6379');
} else {
  const url = REDIS_URL;
  describe('rate-limit: calls refused by a tool limit spend no global budget (Redis)', () => {
    const keyPrefix = `tg:rl-shared:${randomUUID()}`;
    const clients: Redis[] = [];
    afterAll(async () => {
      const admin = clients[0]!;
      const keys = await admin.keys(`${keyPrefix}:*`);
      if (keys.length > 0) await admin.del(...keys);
      for (const client of clients.splice(0)) client.disconnect();
    });
    it('a crowd on a saturated tool leaves the global budget to the other tools', async () => {
      const redis = new Redis(url, {
        enableOfflineQueue: false,
        protocol: 2,
        maxRetriesPerRequest: 1,
        socketTimeout: 2000,
      });
      clients.push(redis);
      if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
      const other = await crowdThenOtherTool({ ...limits, keyPrefix, store: { redis } });
      for (let i = 0; i < 3; i += 1) {
        expect((await other.callTool('get_order_status')).isError).toBeUndefined();
      }
      expect(expectFailure(await other.callTool('get_order_status')).error).toBe('rate_limited');
      expect(await redis.get(`${keyPrefix}:everyone`)).toBe('6');
    });
  });
}
