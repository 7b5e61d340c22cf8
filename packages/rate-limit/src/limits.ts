import type { LimitScope, RateLimitSpec } from './types.js';

/** A limit checked at creation: whole-second window, integer points, a key-safe name. */
export interface Limit {
  readonly name: string;
  readonly per: LimitScope;
  readonly points: number;
  readonly seconds: number;
}

const SCOPES: readonly LimitScope[] = ['caller', 'caller-tool', 'tool', 'global'];
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86_400 } as const;

/**
 * Checks one spec. Windows under a second, or not a whole number of seconds, are refused:
 * rate-limiter-flexible floors the duration to whole seconds, and below one second its keys never expire.
 */
export function parseLimit(spec: RateLimitSpec, where: string): Limit {
  if (typeof spec !== 'object' || spec === null) throw new TypeError(`${where}: a limit must be an object`);
  if (!SCOPES.includes(spec.per)) {
    throw new TypeError(`${where}: per must be one of ${SCOPES.join(', ')}, got ${String(spec.per)}`);
  }
  if (!(Number.isSafeInteger(spec.points) && spec.points >= 1)) {
    throw new RangeError(`${where}: points must be a positive integer, got ${String(spec.points)}`);
  }
  const seconds = parseDuration(spec.duration, where);
  const name = spec.name ?? `${spec.per}-${spec.points}-per-${seconds}s`;
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new TypeError(`${where}: name must be 1-64 letters, digits, '_', '-' or '.', got ${String(name)}`);
  }
  return Object.freeze({ name, per: spec.per, points: spec.points, seconds });
}

function parseDuration(duration: RateLimitSpec['duration'], where: string): number {
  let seconds: number;
  if (typeof duration === 'number') {
    seconds = duration;
  } else {
    const match = typeof duration === 'string' ? /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(duration) : null;
    if (match === null) {
      throw new TypeError(
        `${where}: duration must be seconds or text like '30s', '1m', '1h', '1d', got ${String(duration)}`,
      );
    }
    const unit = match[2] as keyof typeof UNIT_SECONDS | 'ms';
    seconds = unit === 'ms' ? Number(match[1]) / 1000 : Number(match[1]) * UNIT_SECONDS[unit];
  }
  if (!(Number.isFinite(seconds) && seconds >= 1)) {
    throw new RangeError(
      `${where}: duration must be at least 1 second, got ${String(duration)} (shorter windows never expire in rate-limiter-flexible)`,
    );
  }
  if (!Number.isInteger(seconds)) {
    throw new RangeError(`${where}: duration must be a whole number of seconds, got ${String(duration)}`);
  }
  return seconds;
}

/** True when the limit counts per caller (its key carries the caller's hash tag). */
export function isCallerLimit(limit: Limit): boolean {
  return limit.per === 'caller' || limit.per === 'caller-tool';
}

/** The limit in words the model can repeat to a person: "10 calls per minute for your account on search_orders". */
export function describeLimit(limit: Limit, toolName: string): string {
  const calls = `${limit.points} call${limit.points === 1 ? '' : 's'} per ${windowWords(limit.seconds)}`;
  switch (limit.per) {
    case 'caller':
      return `${calls} for your account across all tools`;
    case 'caller-tool':
      return `${calls} for your account on ${toolName}`;
    case 'tool':
      return `${calls} on ${toolName} for all callers together`;
    case 'global':
      return `${calls} on this server for all callers together`;
  }
}

function windowWords(seconds: number): string {
  for (const [unit, size] of [
    ['day', 86_400],
    ['hour', 3600],
    ['minute', 60],
  ] as const) {
    if (seconds === size) return unit;
    if (seconds % size === 0) return `${seconds / size} ${unit}s`;
  }
  return seconds === 1 ? 'second' : `${seconds} seconds`;
}
