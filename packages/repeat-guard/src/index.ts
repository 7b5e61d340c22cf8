// Public face of @toolgate/repeat-guard: explicit named exports only.
export { createMemoryRepeatStore } from './memory-store.js';
export { DEFAULT_RULES } from './options.js';
export { createRedisRepeatStore } from './redis-store.js';
export { createRepeatGuard, repeatGuard } from './repeat-guard.js';
export type {
  MemoryRepeatStore,
  MemoryRepeatStoreOptions,
  OnFailedRepeat,
  OnNoProgress,
  OnRepeat,
  OnStoreFailure,
  RedisRepeatClient,
  RedisRepeatStore,
  RedisRepeatStoreOptions,
  RepeatGuard,
  RepeatGuardOptions,
  RepeatRules,
  RepeatStore,
} from './types.js';
