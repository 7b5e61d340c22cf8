// Public face of @toolgate/rate-limit: explicit named exports only.
export { RATE_LIMIT_META_KEY } from './answers.js';
export { createRateLimit } from './rate-limit.js';
export type {
  DurationText,
  LimitScope,
  RateLimitMeta,
  RateLimitMiddleware,
  RateLimitOptions,
  RateLimitSpec,
  RateLimitStore,
  RedisRateLimitClient,
  ToolRateLimits,
} from './types.js';
