export { createRedisClient, type RedisClientOptions, redisReady } from './redis-client.js';
export {
  type ClientConnection,
  createRedisStore,
  type RedisStore,
  type RedisStoreClient,
  type RedisStoreOptions,
  type RedisWritePipeline,
} from './redis-store.js';
