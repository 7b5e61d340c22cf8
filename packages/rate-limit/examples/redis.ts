// The README's Redis setup example, typechecked with the package (see usage.ts).
import type { Logger } from '@toolgate/core';
import { Redis } from 'ioredis';
import { createRateLimit } from '../src/index.js';

declare const logger: Logger;

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  enableOfflineQueue: false,
  protocol: 2,
  maxRetriesPerRequest: 0,
  autoResendUnfulfilledCommands: false,
  socketTimeout: 2000, // a connection silent this long after a command is closed and made again
});
redis.on('error', (error) => logger.warn({ err: error }, 'redis'));

export const rateLimit = createRateLimit({
  limits: [{ name: 'per-caller', per: 'caller', points: 120, duration: '1m' }],
  store: { redis }, // every replica on the same Redis shares the counters
  keyPrefix: 'orders-prod:rl', // this server's own: required with Redis
});
