// The README's Usage example, typechecked with the package (README shows '@toolgate/redis-store' where
// this file imports '../src/index.js'; test/readme.test.ts keeps the two identical).
import type { Logger } from '@toolgate/core';
import { createRedisClient, createRedisStore, redisReady } from '../src/index.js';

declare const logger: Logger;

const redis = createRedisClient(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { logger });
await redisReady(redis); // without an offline queue, commands sent before this fail
export const store = createRedisStore(redis, { prefix: 'orders-prod:' }); // this server's own namespace
// createIdempotency({ store, ... }), createConfirm({ store, audience: 'orders-prod', ... })

// On shutdown, after the stores' users are closed.
export async function shutdown(): Promise<void> {
  await redis.quit();
}
