import { createLogThrottle, createStderrLogger, type Logger } from '@toolgate/core';
import { Redis, type RedisOptions } from 'ioredis';

/** Options of `createRedisClient`: the shared configuration's knobs; anything else goes in `redis`. */
export interface RedisClientOptions {
  /** Where connection errors are logged (once per incident, with a count). @default createStderrLogger() */
  logger?: Logger;
  /** Longest a connection attempt may take, in ms. @default 500 */
  connectTimeoutMs?: number;
  /** Longest a command may wait for its reply before ioredis rejects it, in ms. @default 500 */
  commandTimeoutMs?: number;
  /**
   * Longest a connection may leave a sent command without any reply before ioredis closes it and
   * connects again, in ms (ioredis' `socketTimeout`). @default 2000
   */
  socketTimeoutMs?: number;
  /** How long repeated connection errors are only counted after one is logged, in ms. @default 60000 */
  logIntervalMs?: number;
  /** Further ioredis options, applied last (they may override the shared configuration: think twice). @default {} */
  redis?: RedisOptions;
}

/**
 * An ioredis client with the one configuration every toolgate Redis user shares:
 * - `enableOfflineQueue: false`: while disconnected a command fails at once instead of queueing behind
 *   a dead connection (policy stores must answer within their time limit);
 * - never a command sent twice (`autoResendUnfulfilledCommands: false`, `maxRetriesPerRequest: 0`): a
 *   command whose connection dropped before its reply may have been applied, and ioredis would send it
 *   again after the reconnect, when other replicas may have moved on (an idempotency claim's release,
 *   applied twice, deletes the claim of the retry running elsewhere); it fails at once instead;
 * - short `connectTimeout` and `commandTimeout` (500 ms): a partitioned Redis is noticed quickly;
 * - `socketTimeout` (2 s): a connection that stops answering without a reset (a partition, a NAT or
 *   firewall that forgot the flow) is closed and made again; the command timeout alone fails each
 *   command but keeps the silent connection for good, so every later command would fail too;
 * - `protocol: 2` (RESP2): ioredis 6 defaults to RESP3, which the libraries built on it are not tested on;
 * - connects at once (`lazyConnect: false`) and keeps reconnecting in the background;
 * - an `error` listener that logs once per incident: without one, Node would crash the process on the
 *   first connection error, and with a naive one an outage writes a line per reconnect attempt.
 * The caller owns it: `await client.quit()` on shutdown.
 */
export function createRedisClient(url: string, options: RedisClientOptions = {}): Redis {
  const logger = options.logger ?? createStderrLogger();
  const throttle = createLogThrottle({ intervalMs: options.logIntervalMs ?? 60_000 });
  const client = new Redis(url, {
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
    connectTimeout: options.connectTimeoutMs ?? 500,
    commandTimeout: options.commandTimeoutMs ?? 500,
    socketTimeout: options.socketTimeoutMs ?? 2000,
    protocol: 2,
    lazyConnect: false,
    ...options.redis,
  });
  client.on('error', (error: Error & { code?: string }) => {
    throttle(`redis:${error.code ?? error.name}`, (suppressed) =>
      logger.warn(
        {
          err: { name: error.name, code: error.code, message: error.message },
          ...(suppressed > 0 ? { repeated: suppressed } : {}),
        },
        suppressed > 0
          ? `redis: the same connection error ${suppressed} more times`
          : 'redis: connection error; commands fail until it reconnects',
      ),
    );
  });
  client.on('ready', () => throttle.flush());
  client.on('end', () => throttle.flush());
  return client;
}

/**
 * Resolves when `client` is ready for commands, rejects after `timeoutMs`. Without an offline queue a
 * command sent while the first connection is still being made fails, so a server awaits this once at
 * start (and may refuse to start, or start and let its stores fail open or closed as configured).
 */
export async function redisReady(client: Redis, timeoutMs = 2000): Promise<void> {
  if (client.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      client.off('ready', onReady);
      reject(new Error(`redis: not ready within ${timeoutMs} ms (status ${client.status})`));
    }, timeoutMs);
    const onReady = (): void => {
      clearTimeout(timer);
      resolve();
    };
    client.once('ready', onReady);
  });
}
