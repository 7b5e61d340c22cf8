export { IDEMPOTENCY_KEY_META } from './call-keys.js';
export { createIdempotency, IDEMPOTENCY_META, type IdempotencyMiddleware } from './idempotency.js';
export type { IdempotencyOptions, IdempotencyToolOptions, OnStoreFailure } from './options.js';
