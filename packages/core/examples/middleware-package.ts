// The convention every middleware package follows, as a compiled example: createX(options) returns
// a ToolMiddleware; options are resolved once (core's merge rule), outside the per-call closure.
import {
  callerTag,
  callKey,
  createMemoryStore,
  isPassThrough,
  type KeyValueStore,
  type PerToolOptions,
  resolveToolOptions,
  type ToolMiddleware,
  withDeadline,
} from '../src/index.js';

export interface SeenBeforeRules {
  /** How long a call is remembered, in ms. @default 60000 */
  windowMs: number;
  /** Time limit of each store operation, in ms. @default 200 */
  storeTimeoutMs: number;
}

export interface SeenBeforeOptions extends Partial<SeenBeforeRules>, PerToolOptions<SeenBeforeRules> {
  /** Where calls are remembered. @default createMemoryStore() */
  store?: KeyValueStore;
}

const DEFAULTS: SeenBeforeRules = { windowMs: 60_000, storeTimeoutMs: 200 };

/** Marks a call the same caller already made with the same arguments in the window. */
export function createSeenBefore(options: SeenBeforeOptions = {}): ToolMiddleware {
  const rules = resolveToolOptions('createSeenBefore', DEFAULTS, options, (resolved, where) => {
    if (!(resolved.windowMs >= 1)) throw new RangeError(`${where}: windowMs must be at least 1`);
  });
  const store = options.store ?? createMemoryStore();
  return async (ctx, next) => {
    const own = isPassThrough(ctx) ? undefined : rules.forTool(ctx.toolName);
    if (own === undefined) return next();
    const first = await withDeadline(
      // The caller's tag first, between braces: one Redis Cluster slot and one memory-store quota per
      // caller, so one caller's flood fills its own share, never another's.
      (signal) =>
        store.setIfAbsent(`seen:{${callerTag(ctx)}}:${callKey(ctx)}`, '1', own.windowMs, { signal }),
      { signal: ctx.signal, timeoutMs: own.storeTimeoutMs },
    );
    if (!first) ctx.decisions.push({ by: 'seen-before', action: 'note' });
    return next();
  };
}
