import type { BreakerSettings, CircuitBreakerOptions } from './types.js';

/** Settings with every field decided. */
export interface ResolvedSettings {
  readonly timeout: number | false;
  readonly consecutiveFailures: number | false;
  readonly errorThresholdPercentage: number;
  readonly volumeThreshold: number;
  readonly rollingCountTimeout: number;
  readonly rollingCountBuckets: number;
  readonly resetTimeout: number;
  readonly capacity: number;
}

/**
 * Defaults for a tool server: a deadline under the SDK client's 60 s request timeout, five failures
 * in a row to open (a dead dependency trips it within a handful of calls), a window long enough for an
 * agent's call rate, and a volume threshold, because opossum's default of 0 lets a single failure
 * open the breaker on the rate rule.
 */
export const CIRCUIT_BREAKER_DEFAULTS: ResolvedSettings = Object.freeze({
  timeout: 30_000,
  consecutiveFailures: 5,
  errorThresholdPercentage: 50,
  volumeThreshold: 5,
  rollingCountTimeout: 60_000,
  rollingCountBuckets: 12,
  resetTimeout: 30_000,
  capacity: 32,
});

/** How a tool is guarded, decided once at factory time. */
export type ToolPlan =
  | { readonly kind: 'off' }
  | { readonly kind: 'own'; readonly settings: ResolvedSettings }
  | { readonly kind: 'shared'; readonly dependency: string };

export interface ResolvedOptions {
  readonly global: ResolvedSettings;
  readonly tools: ReadonlyMap<string, ToolPlan>;
  readonly dependencies: ReadonlyMap<string, ResolvedSettings>;
}

const SETTING_KEYS = [
  'timeout',
  'consecutiveFailures',
  'errorThresholdPercentage',
  'volumeThreshold',
  'rollingCountTimeout',
  'rollingCountBuckets',
  'resetTimeout',
  'capacity',
] as const;

/** Validates and resolves the options once; the caller's objects are copied, never kept or mutated. */
export function resolveOptions(options: CircuitBreakerOptions): ResolvedOptions {
  const global = resolveSettings(CIRCUIT_BREAKER_DEFAULTS, options, 'options');
  const dependencies = new Map<string, ResolvedSettings>();
  for (const [name, settings] of Object.entries(options.dependencies ?? {})) {
    dependencies.set(name, resolveSettings(global, settings, `dependencies[${JSON.stringify(name)}]`));
  }
  const tools = new Map<string, ToolPlan>();
  for (const [name, entry] of Object.entries(options.tools ?? {})) {
    const where = `tools[${JSON.stringify(name)}]`;
    if (entry === false) {
      tools.set(name, { kind: 'off' });
      continue;
    }
    if (typeof entry !== 'object' || entry === null) {
      throw new TypeError(`createCircuitBreakers: ${where} must be an object or false`);
    }
    if (entry.dependency !== undefined) {
      if (typeof entry.dependency !== 'string' || entry.dependency === '') {
        throw new TypeError(`createCircuitBreakers: ${where}.dependency must be a non-empty string`);
      }
      const own = SETTING_KEYS.filter((key) => entry[key] !== undefined);
      if (own.length > 0) {
        throw new TypeError(
          `createCircuitBreakers: ${where} names dependency ${JSON.stringify(entry.dependency)}, so its settings (${own.join(', ')}) belong in dependencies[${JSON.stringify(entry.dependency)}]`,
        );
      }
      tools.set(name, { kind: 'shared', dependency: entry.dependency });
      continue;
    }
    if (dependencies.has(name)) {
      // A tool without a dependency guards one named after itself; two sets of settings would fight.
      throw new TypeError(
        `createCircuitBreakers: ${where} and dependencies[${JSON.stringify(name)}] would configure the same breaker`,
      );
    }
    tools.set(name, { kind: 'own', settings: resolveSettings(global, entry, where) });
  }
  return { global, tools, dependencies };
}

function resolveSettings(base: ResolvedSettings, override: BreakerSettings, where: string): ResolvedSettings {
  const settings: ResolvedSettings = {
    timeout: override.timeout ?? base.timeout,
    consecutiveFailures: override.consecutiveFailures ?? base.consecutiveFailures,
    errorThresholdPercentage: override.errorThresholdPercentage ?? base.errorThresholdPercentage,
    volumeThreshold: override.volumeThreshold ?? base.volumeThreshold,
    rollingCountTimeout: override.rollingCountTimeout ?? base.rollingCountTimeout,
    rollingCountBuckets: override.rollingCountBuckets ?? base.rollingCountBuckets,
    resetTimeout: override.resetTimeout ?? base.resetTimeout,
    capacity: override.capacity ?? base.capacity,
  };
  const fail = (key: string, expected: string): never => {
    throw new RangeError(`createCircuitBreakers: ${where}.${key} must be ${expected}`);
  };
  // opossum reads `timeout: 0` as "no timeout"; a zero deadline is a mistake, so say so.
  if (settings.timeout !== false && !isPositiveFinite(settings.timeout)) {
    fail('timeout', 'a positive number of milliseconds, or false to disable the deadline');
  }
  const streak = settings.consecutiveFailures;
  if (streak !== false && !(Number.isInteger(streak) && streak >= 1)) {
    fail('consecutiveFailures', 'an integer of at least 1, or false to open on the error rate only');
  }
  const rate = settings.errorThresholdPercentage;
  if (!(Number.isFinite(rate) && rate >= 0 && rate < 100)) {
    // At 100 the failure rate can never exceed it: the breaker would silently never open.
    fail('errorThresholdPercentage', 'a number from 0 up to (not including) 100');
  }
  if (!(Number.isInteger(settings.volumeThreshold) && settings.volumeThreshold >= 1)) {
    fail('volumeThreshold', 'an integer of at least 1');
  }
  if (!(Number.isInteger(settings.rollingCountBuckets) && settings.rollingCountBuckets >= 1)) {
    fail('rollingCountBuckets', 'an integer of at least 1');
  }
  if (
    !(
      isPositiveFinite(settings.rollingCountTimeout) &&
      settings.rollingCountTimeout >= settings.rollingCountBuckets
    )
  ) {
    fail('rollingCountTimeout', 'a number of milliseconds of at least rollingCountBuckets');
  }
  if (!isPositiveFinite(settings.resetTimeout)) fail('resetTimeout', 'a positive number of milliseconds');
  const capacity = settings.capacity;
  if (!(capacity === Number.POSITIVE_INFINITY || (Number.isInteger(capacity) && capacity >= 1))) {
    fail('capacity', 'an integer of at least 1, or Infinity');
  }
  return Object.freeze(settings);
}

function isPositiveFinite(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0;
}
