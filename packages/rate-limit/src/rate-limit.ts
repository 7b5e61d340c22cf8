import {
  callerScope,
  callerTag,
  closesSilentRedisConnections,
  createLogThrottle,
  isPassThrough,
  type Logger,
  type NextFn,
  resolveToolOptions,
  type ToolContext,
  type ToolResult,
} from '@toolgate/core';
import { rateLimitedFailure, storeUnavailableFailure } from './answers.js';
import { type Counter, type Judgement, memoryCounter, redisCounter, type SyncCounter } from './counters.js';
import { createKeyBuilder } from './keys.js';
import { isCallerLimit, type Limit, parseLimit } from './limits.js';
import type { RateLimitMiddleware, RateLimitOptions, RedisRateLimitClient, ToolRateLimits } from './types.js';

const WHERE = 'createRateLimit';

/** The limits of one tool, split into the caller's own, the tool's (all callers) and the global ones. */
interface Plan {
  readonly caller: readonly Limit[];
  readonly tool: readonly Limit[];
  readonly global: readonly Limit[];
}

/**
 * Limits tool calls per caller, per caller and tool, per tool and globally, several at once: a call
 * runs only when every limit that applies allows it, and the limit that frees last answers
 * `rate_limited`. The caller's own limits are counted first, then the tool's, then the global ones; each
 * level counts only the calls the levels before it let through, so one caller's refused calls never
 * spend everyone's budget, and a saturated tool's refused calls never spend the other tools' global one.
 *
 * Place it after authz and before repeat-guard:
 * `otel → audit → redact-errors → authz → rate-limit → repeat-guard → ... → handler`.
 */
export function createRateLimit(options: RateLimitOptions = {}): RateLimitMiddleware {
  const timeoutMs = options.timeoutMs ?? 100;
  if (!(Number.isFinite(timeoutMs) && timeoutMs >= 1)) {
    throw new RangeError(`${WHERE}: timeoutMs must be a finite number of at least 1`);
  }
  const unavailableRetryAfterMs = options.unavailableRetryAfterMs ?? 1000;
  if (!(Number.isSafeInteger(unavailableRetryAfterMs) && unavailableRetryAfterMs >= 1)) {
    throw new RangeError(`${WHERE}: unavailableRetryAfterMs must be a positive integer`);
  }
  const onStoreError = options.onStoreError ?? 'open';
  if (onStoreError !== 'open' && onStoreError !== 'closed') {
    throw new TypeError(`${WHERE}: onStoreError must be 'open' or 'closed'`);
  }
  const store = options.store ?? 'memory';
  // Required with Redis: with a default, two servers sharing one Redis would share every budget.
  if (store !== 'memory' && (options.keyPrefix === undefined || options.keyPrefix === '')) {
    throw new TypeError(
      `${WHERE}: keyPrefix is required with store { redis }: name this server's counters (e.g. keyPrefix: 'orders-prod:rl'), the same on all its replicas and another on every other server sharing the Redis; under one prefix, two servers spend one budget`,
    );
  }
  const keyPrefix = options.keyPrefix ?? 'tg:rl';
  if (typeof keyPrefix !== 'string' || /[{}]/.test(keyPrefix)) {
    throw new TypeError(`${WHERE}: keyPrefix must be a string without braces`);
  }
  const redis = store === 'memory' ? undefined : checkRedisClient(store);
  const countRefusedCalls = options.countRefusedCalls ?? true;
  const maxMemoryKeys = options.maxMemoryKeys ?? 100_000;
  if (!(Number.isSafeInteger(maxMemoryKeys) && maxMemoryKeys >= 1)) {
    throw new RangeError(`${WHERE}: maxMemoryKeys must be a positive integer`);
  }

  // One counter per limit name: a tool that repeats a global limit shares its counter.
  const limits = new Map<string, Limit>();
  const plans = new Map<readonly unknown[], Plan>();
  const planOf = (specs: ToolRateLimits['limits'], where: string): Plan => {
    let plan = plans.get(specs);
    if (plan !== undefined) return plan;
    if (!Array.isArray(specs)) throw new TypeError(`${where}: limits must be an array`);
    const parsed = specs.map((spec, index) => {
      const limit = parseLimit(spec, `${where}: limits[${index}]`);
      const known = limits.get(limit.name);
      if (known !== undefined && !sameLimit(known, limit)) {
        throw new TypeError(
          `${where}: limits[${index}] reuses the name ${limit.name} for a different limit (names identify counters; repeat a limit unchanged to share it)`,
        );
      }
      limits.set(limit.name, known ?? limit);
      return known ?? limit;
    });
    plan = {
      caller: parsed.filter(isCallerLimit),
      tool: parsed.filter((limit) => limit.per === 'tool'),
      global: parsed.filter((limit) => limit.per === 'global'),
    };
    plans.set(specs, plan);
    return plan;
  };
  const resolver = resolveToolOptions<ToolRateLimits>(WHERE, { limits: [] }, options, (resolved, where) => {
    planOf(resolved.limits, where);
  });
  if (limits.size === 0) throw new TypeError(`${WHERE}: give at least one limit (globally or for a tool)`);

  const logThrottle = createLogThrottle({ intervalMs: options.logIntervalMs ?? 60_000 });
  // A full memory store is a flood of distinct callers, not an outage: one line per limit and interval,
  // naming the limit and the bound, never a caller.
  const reportFull = (limit: Limit) => (logger: Logger) =>
    logThrottle(`full:${limit.name}`, (suppressed) => {
      logger.warn(
        { limit: limit.name, maxMemoryKeys, suppressed },
        `rate-limit: the memory store is full (maxMemoryKeys windows of limit ${limit.name}); the windows that end first are dropped to make room`,
      );
    });
  const counters = new Map<string, Counter>();
  for (const limit of limits.values()) {
    counters.set(
      limit.name,
      redis === undefined
        ? memoryCounter(limit, { maxKeys: maxMemoryKeys, onFull: reportFull(limit) })
        : redisCounter(limit, redis, { timeoutMs, insured: onStoreError === 'open', maxKeys: maxMemoryKeys }),
    );
  }
  const keyOf = createKeyBuilder(keyPrefix);

  const judge = async (ctx: ToolContext, stage: readonly Limit[]): Promise<Judgement[]> =>
    Promise.all(stage.map((limit) => (counters.get(limit.name) as Counter).consume(keyOf(limit, ctx), ctx)));
  // The memory store answers at once: judged without a Promise per limit (undefined on Redis).
  // The memory store judges at once: no Promise, no array, and keys without a hash (they never leave
  // this process, so the caller scope itself is the key).
  const memory = redis === undefined;
  const judgeNow = (ctx: ToolContext, stage: readonly Limit[]): ToolResult | undefined => {
    let limited: Extract<Judgement, { kind: 'limited' }> | undefined;
    for (const limit of stage) {
      const judgement = (counters.get(limit.name) as SyncCounter).consumeNow(
        memoryKey(limit, ctx),
        ctx.logger,
      );
      if (
        judgement.kind === 'limited' &&
        (limited === undefined || judgement.msBeforeNext > limited.msBeforeNext)
      ) {
        limited = judgement;
      }
    }
    return limited === undefined ? undefined : refusal(ctx, [limited]);
  };

  /** The answer when a stage refuses the call, or undefined when every limit of the stage allows it. */
  const refusal = (ctx: ToolContext, judgements: readonly Judgement[]): ToolResult | undefined => {
    let limited: Extract<Judgement, { kind: 'limited' }> | undefined;
    let storeError: unknown;
    let failed = false;
    let insured = false;
    for (const judgement of judgements) {
      if (judgement.kind === 'store-error') {
        failed = true;
        storeError = judgement.error;
        continue;
      }
      if (judgement.insured) insured = true;
      if (judgement.error !== undefined) storeError = judgement.error;
      if (
        judgement.kind === 'limited' &&
        (limited === undefined || judgement.msBeforeNext > limited.msBeforeNext)
      ) {
        limited = judgement;
      }
    }
    if (failed || insured) logStoreIncident(ctx, storeError);
    if (limited !== undefined) {
      const { limit, msBeforeNext } = limited;
      ctx.decisions.push({
        by: 'rate-limit',
        action: 'limit',
        reason: 'rate_limited',
        detail: {
          name: limit.name,
          per: limit.per,
          limit: limit.points,
          windowSeconds: limit.seconds,
          resetMs: msBeforeNext,
        },
      });
      return rateLimitedFailure(limit, ctx.toolName, msBeforeNext);
    }
    if (failed) {
      ctx.decisions.push({ by: 'rate-limit', action: 'short-circuit', reason: 'store_unavailable' });
      return storeUnavailableFailure(ctx.toolName, unavailableRetryAfterMs);
    }
    if (insured) {
      ctx.decisions.push({
        by: 'rate-limit',
        action: 'allow',
        reason: 'store_unavailable',
        detail: { judgedBy: 'insurance' },
      });
    }
    return undefined;
  };

  const logStoreIncident = (ctx: ToolContext, error: unknown): void => {
    const mode = onStoreError === 'open' ? 'open' : 'closed';
    logThrottle('store', (suppressed) => {
      ctx.logger.warn(
        {
          store: 'redis',
          onStoreError: mode,
          redisStatus: typeof redis?.status === 'string' ? redis.status : undefined,
          error: error === undefined ? undefined : describeError(error),
          suppressed,
        },
        mode === 'open'
          ? 'rate-limit: Redis store failed; calls are judged by in-process copies of the limits (fail-open)'
          : 'rate-limit: Redis store failed; calls are answered unavailable (fail-closed)',
      );
    });
  };

  const limitCall = (ctx: ToolContext, plan: Plan, next: NextFn): Promise<ToolResult> => {
    if (memory) {
      const answer =
        (plan.caller.length > 0 ? judgeNow(ctx, plan.caller) : undefined) ??
        (plan.tool.length > 0 ? judgeNow(ctx, plan.tool) : undefined) ??
        (plan.global.length > 0 ? judgeNow(ctx, plan.global) : undefined);
      return answer === undefined ? next() : Promise.resolve(answer);
    }
    return limitCallRemote(ctx, plan, next);
  };

  const limitCallRemote = async (ctx: ToolContext, plan: Plan, next: NextFn): Promise<ToolResult> => {
    if (plan.caller.length > 0) {
      const answer = refusal(ctx, await judge(ctx, plan.caller));
      if (answer !== undefined) return answer;
    }
    if (plan.tool.length > 0) {
      const answer = refusal(ctx, await judge(ctx, plan.tool));
      if (answer !== undefined) return answer;
    }
    if (plan.global.length > 0) {
      const answer = refusal(ctx, await judge(ctx, plan.global));
      if (answer !== undefined) return answer;
    }
    return next();
  };

  // Unknown tools and refused arguments only count against the caller's per-caller limits: a
  // per-tool key for every invented tool name would let a caller grow the store without bound.
  const refusedPlans = new Map<string, Plan>();
  const refusedPlanOf = (ctx: ToolContext): Plan | undefined => {
    const toolName = ctx.tool === undefined ? undefined : ctx.toolName;
    const cacheKey = toolName ?? '';
    let plan = refusedPlans.get(cacheKey);
    if (plan === undefined && !refusedPlans.has(cacheKey)) {
      const resolved = toolName === undefined ? resolver.global : resolver.forTool(toolName);
      const caller =
        resolved === undefined ? [] : planOf(resolved.limits, WHERE).caller.filter((l) => l.per === 'caller');
      plan = caller.length === 0 ? undefined : { caller, tool: [], global: [] };
      refusedPlans.set(cacheKey, plan as Plan);
    }
    return plan;
  };

  const middleware = function rateLimitMiddleware(ctx: ToolContext, next: NextFn): Promise<ToolResult> {
    if (isPassThrough(ctx)) {
      const plan = countRefusedCalls ? refusedPlanOf(ctx) : undefined;
      return plan === undefined ? next() : limitCall(ctx, plan, next);
    }
    const resolved = resolver.forTool(ctx.toolName);
    if (resolved === undefined) return next();
    return limitCall(ctx, planOf(resolved.limits, WHERE), next);
  } as RateLimitMiddleware;
  middleware.close = (): void => logThrottle.flush();
  return middleware;
}

/**
 * A memory counter's key: the caller scope itself (it never leaves the process), plus the tool where it
 * counts. A scope longer than `MAX_HELD_SCOPE` (a subject, claim or binding of kilobytes: an id is as
 * long as a token lets it be) is held as core's `callerTag` (a digest of the same scope) instead, so
 * that a window costs a short key whatever the caller sends: `maxMemoryKeys` then bounds the store's
 * memory, not only its entries. A tag (base64url) never starts with `[` as a scope (JSON) does, so the
 * two kinds cannot meet.
 */
function memoryKey(limit: Limit, ctx: ToolContext): string {
  let base = '';
  if (isCallerLimit(limit)) {
    base = callerScope(ctx);
    if (base.length > MAX_HELD_SCOPE) base = callerTag(ctx);
  }
  return limit.per === 'caller-tool' || limit.per === 'tool' ? `${base}\u0000${ctx.toolName}` : base;
}

/** Longest caller scope a memory counter holds as it is (a subject id with issuer is well under it). */
const MAX_HELD_SCOPE = 256;

function sameLimit(a: Limit, b: Limit): boolean {
  return a.per === b.per && a.points === b.points && a.seconds === b.seconds;
}

/** Checks the documented client configuration where the client shows it (ioredis). */
function checkRedisClient(store: { redis: RedisRateLimitClient }): RedisRateLimitClient {
  const client = (store as { redis?: RedisRateLimitClient } | null)?.redis;
  if (typeof client !== 'object' || client === null) {
    throw new TypeError(`${WHERE}: store must be 'memory' or { redis: client }`);
  }
  const options = client.options;
  if (options !== undefined) {
    if (options.enableOfflineQueue !== false) {
      throw new TypeError(
        `${WHERE}: create the ioredis client with enableOfflineQueue: false (calls must not queue while Redis is down)`,
      );
    }
    const protocol = options.protocol ?? options.redisOptions?.protocol;
    if (protocol !== undefined && protocol !== 2) {
      throw new TypeError(
        `${WHERE}: create the ioredis client with protocol: 2 (RESP3 is untested by rate-limiter-flexible)`,
      );
    }
    // A connection that goes silent without a reset (a partition, a NAT or firewall that forgot the
    // flow) stays 'ready' in ioredis for good without it: every call waits timeoutMs, each replica
    // judges alone for the rest of the process's life, and every call's command waits in the client.
    if (!closesSilentRedisConnections(options)) {
      throw new TypeError(
        `${WHERE}: create the ioredis client with socketTimeout (e.g. 2000 ms, as createRedisClient does): without it a connection that goes silent is never closed, and the limits stay judged by this process alone`,
      );
    }
  }
  return client;
}

function describeError(error: unknown): Record<string, unknown> {
  if (error instanceof Error) return { name: error.name, message: error.message };
  return { value: String(error) };
}
