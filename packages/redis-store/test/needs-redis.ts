import {
  type FaultProxy,
  recordingLogger,
  reportMissingService,
  startFaultProxy,
} from '@toolgate/core/testing';
import type { Redis } from 'ioredis';
import { it } from 'vitest';
import { createRedisClient, type RedisClientOptions } from '../src/index.js';

/** The Redis the tests use, or undefined when TEST_REDIS_URL is not set. */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL;

/** Without TEST_REDIS_URL: one test named for what did not run, skipped with the reason (failed in CI). */
export function reportRedisMissing(what: string): void {
  reportMissingService(it, what, 'TEST_REDIS_URL', 'redis://127.0.0.1:6379');
}

/**
 * A fault proxy in front of the Redis at `url`, and a client (`createRedisClient`, a silent logger,
 * then `options`) connected through it. The caller disconnects the client and closes the proxy.
 */
export async function throughFaultProxy(
  url: string,
  options: Omit<RedisClientOptions, 'logger'> = {},
): Promise<{ proxy: FaultProxy; viaProxy: Redis }> {
  const target = new URL(url);
  const proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port || 6379) });
  target.port = String(proxy.port);
  return {
    proxy,
    viaProxy: createRedisClient(target.toString(), { logger: recordingLogger([]), ...options }),
  };
}
