import { resolveToolOptions } from '@toolgate/core';
import type { CircuitBreakerOptions } from './types.js';

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
  readonly callerShare: number;
  readonly isolateCallers: boolean;
  readonly minFailingCallers: number;
}

/**
 * Defaults for a tool server: a deadline under the SDK client's 60 s request timeout, five failures
 * in a row to open (a dead dependency trips it within a handful of calls), a window long enough for an
 * agent's call rate, a volume threshold, because opossum's default of 0 lets a single failure
 * open the breaker on the rate rule, failures of one caller alone, while others succeed, refusing
 * that caller rather than everyone, and one caller holding at most half the capacity while another is
 * about.
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
  callerShare: 0.5,
  isolateCallers: true,
  minFailingCallers: 2,
});

/** How a tool is guarded, decided once at factory time. */
export type ToolPlan =
  | { readonly kind: 'off' }
  | { readonly kind: 'own'; readonly settings: ResolvedSettings }
  | { readonly kind: 'shared'; readonly dependency: string };

export interface ResolvedOptions {
  /** A listed tool's plan; `undefined` for a tool `tools` does not name. */
  plan(toolName: string): ToolPlan | undefined;
  /**
   * The settings of the breaker named `name`: its dependency's, else those of the tool it is named
   * after (a tool may name another tool as its dependency), else the global ones. One answer per name,
   * whichever of its tools is called first.
   */
  breakerSettings(name: string): ResolvedSettings;
}

const WHERE = 'createCircuitBreaker';

const SETTING_KEYS = [
  'timeout',
  'consecutiveFailures',
  'errorThresholdPercentage',
  'volumeThreshold',
  'rollingCountTimeout',
  'rollingCountBuckets',
  'resetTimeout',
  'capacity',
  'callerShare',
  'isolateCallers',
  'minFailingCallers',
] as const;

/** What a tool entry may set: the settings, or the dependency whose breaker it shares. */
type ToolFields = ResolvedSettings & { readonly dependency: string | undefined };

/**
 * Validates and resolves the options once with core's one merge rule (`resolveToolOptions`); the
 * caller's objects are copied, never kept or mutated.
 */
export function resolveOptions(options: CircuitBreakerOptions): ResolvedOptions {
  const defaults: ToolFields = { ...CIRCUIT_BREAKER_DEFAULTS, dependency: undefined };
  if ((options as { dependency?: unknown }).dependency !== undefined) {
    throw new TypeError(`${WHERE}: dependency is a per-tool option (tools.<name>.dependency)`);
  }
  // A shape rule the merge cannot see: a tool that shares a dependency's breaker takes its settings.
  for (const [name, entry] of Object.entries(options.tools ?? {})) {
    if (typeof entry !== 'object' || entry === null || entry.dependency === undefined) continue;
    if (typeof entry.dependency !== 'string' || entry.dependency === '') {
      throw new TypeError(`${WHERE}: tools.${name}: dependency must be a non-empty string`);
    }
    const own = SETTING_KEYS.filter((key) => entry[key] !== undefined);
    if (own.length > 0) {
      throw new TypeError(
        `${WHERE}: tools.${name}: names dependency ${JSON.stringify(entry.dependency)}, so its settings (${own.join(', ')}) belong in dependencies.${entry.dependency}`,
      );
    }
  }
  const resolved = resolveToolOptions<ToolFields>(WHERE, defaults, options, checkSettings);
  const global = settingsOf(resolved.global);
  const dependencies = new Map<string, ResolvedSettings>();
  for (const [name, settings] of Object.entries(options.dependencies ?? {})) {
    // The same merge rule: a dependency's settings over the global ones.
    const own = resolveToolOptions<ResolvedSettings>(
      `${WHERE}: dependencies.${name}`,
      global,
      settings,
      checkSettings,
    );
    dependencies.set(name, own.global);
  }
  const plans = new Map<string, ToolPlan>();
  for (const name of Object.keys(options.tools ?? {})) {
    const fields = resolved.forTool(name);
    if (fields === undefined) plans.set(name, { kind: 'off' });
    else if (fields.dependency !== undefined)
      plans.set(name, { kind: 'shared', dependency: fields.dependency });
    else if (dependencies.has(name)) {
      // A tool without a dependency guards one named after itself; two sets of settings would fight.
      throw new TypeError(
        `${WHERE}: tools.${name} and dependencies.${name} would configure the same breaker`,
      );
    } else plans.set(name, { kind: 'own', settings: settingsOf(fields) });
  }
  const breakerSettings = (name: string): ResolvedSettings => {
    const plan = plans.get(name);
    return dependencies.get(name) ?? (plan?.kind === 'own' ? plan.settings : global);
  };
  return { plan: (toolName) => plans.get(toolName), breakerSettings };
}

function settingsOf(fields: Readonly<ToolFields> | ResolvedSettings): ResolvedSettings {
  const settings = {} as Record<(typeof SETTING_KEYS)[number], unknown>;
  for (const key of SETTING_KEYS) settings[key] = fields[key];
  return Object.freeze(settings as unknown as ResolvedSettings);
}

// Node runs a timer set longer than this after 1 ms (TimeoutOverflowWarning): a resetTimeout of weeks
// would let a probe through at once, and the deadline timer would spin every millisecond.
const MAX_TIMER_MS = 2_147_483_647;
const LONGEST_TIMER = `at most ${MAX_TIMER_MS} ms (the longest timer Node.js runs)`;

/** core's `check` callback: every resolved set (global, each tool, each dependency) at creation time. */
function checkSettings(settings: Readonly<ResolvedSettings>, where: string): void {
  const fail = (key: string, expected: string): never => {
    throw new RangeError(`${where}: ${key} must be ${expected}`);
  };
  // opossum reads `timeout: 0` as "no timeout"; a zero deadline is a mistake, so say so.
  if (settings.timeout !== false && !isPositiveFinite(settings.timeout)) {
    fail('timeout', 'a positive number of milliseconds, or false to disable the deadline');
  }
  if (settings.timeout !== false && settings.timeout > MAX_TIMER_MS) fail('timeout', LONGEST_TIMER);
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
  if (settings.rollingCountTimeout / settings.rollingCountBuckets > MAX_TIMER_MS) {
    fail('rollingCountTimeout', `at most ${MAX_TIMER_MS} ms per bucket (the longest timer Node.js runs)`);
  }
  if (!isPositiveFinite(settings.resetTimeout)) fail('resetTimeout', 'a positive number of milliseconds');
  if (settings.resetTimeout > MAX_TIMER_MS) fail('resetTimeout', LONGEST_TIMER);
  const capacity = settings.capacity;
  if (!(capacity === Number.POSITIVE_INFINITY || (Number.isInteger(capacity) && capacity >= 1))) {
    fail('capacity', 'an integer of at least 1, or Infinity');
  }
  const share = settings.callerShare;
  if (!(typeof share === 'number' && share > 0 && share <= 1)) {
    fail('callerShare', 'a number above 0 and at most 1 (1: one caller may take the whole capacity)');
  }
  if (typeof settings.isolateCallers !== 'boolean') fail('isolateCallers', 'true or false');
  if (!(Number.isInteger(settings.minFailingCallers) && settings.minFailingCallers >= 2)) {
    // 1 would open for everyone on any one caller's failures: that is `isolateCallers: false`.
    fail('minFailingCallers', 'an integer of at least 2 (isolateCallers: false turns isolation off)');
  }
}

function isPositiveFinite(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0;
}
