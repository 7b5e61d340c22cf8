export { createRedisClient, type RedisClientOptions, redisReady } from './redis-client.js';
export {
  createRedisStore,
  type RedisStore,
  type RedisStoreClient,
  type RedisStoreOptions,
} from './redis-store.js';
