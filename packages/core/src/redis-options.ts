/** The options an ioredis client (or a Cluster, under `redisOptions`) shows. */
export interface RedisClientOptionsView {
  readonly socketTimeout?: number;
  readonly redisOptions?: { readonly socketTimeout?: number };
}

/**
 * Whether an ioredis client's options close a connection that goes silent without a reset (a partition,
 * a NAT or firewall that forgot the flow): a positive, finite `socketTimeout` (a Cluster's under
 * `redisOptions`). Without one, ioredis keeps such a connection 'ready' for good: every command waits
 * for its caller's time limit for the rest of the process's life, and stays queued in the client. The
 * stores and rate-limit refuse such a client; 0, a negative or an infinite value would cut every wait.
 */
export function closesSilentRedisConnections(options: RedisClientOptionsView): boolean {
  const socketTimeout = options.socketTimeout ?? options.redisOptions?.socketTimeout;
  return typeof socketTimeout === 'number' && Number.isFinite(socketTimeout) && socketTimeout > 0;
}
