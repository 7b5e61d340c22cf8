import { fail, type ToolResult } from '@toolgate/core';
import { describeLimit, type Limit } from './limits.js';
import type { RateLimitMeta } from './types.js';

/** The `_meta` key of a `rate_limited` answer's numbers. */
export const RATE_LIMIT_META_KEY = 'toolgate/rate-limit';

/** Over a limit: `rate_limited`, the limit in words, and the numbers in `_meta` for machines. */
export function rateLimitedFailure(limit: Limit, toolName: string, retryAfterMs: number): ToolResult {
  const words = describeLimit(limit, toolName);
  const seconds = Math.ceil(retryAfterMs / 1000);
  const result = fail('rate_limited', `Rate limit reached: ${words}.`, {
    hint:
      `Wait ${seconds} s (retryAfterMs) before calling ${toolName} again. Do not work around the limit: ` +
      'no parallel calls, no retries with different arguments, no other tool to get the same data. ' +
      'If you cannot wait, tell the user the limit was reached.',
    retryable: true,
    retryAfterMs,
  });
  const meta: RateLimitMeta = { limit: limit.points, remaining: 0, resetMs: retryAfterMs, name: limit.name };
  return { ...result, _meta: { ...result._meta, [RATE_LIMIT_META_KEY]: meta } };
}

/** The store is down and the server chose to fail closed. */
export function storeUnavailableFailure(toolName: string, retryAfterMs: number): ToolResult {
  return fail('unavailable', 'Rate limits cannot be checked right now, so the call was not run.', {
    hint: `Try ${toolName} once more after retryAfterMs; if it fails again, tell the user the service is unavailable.`,
    retryable: true,
    retryAfterMs,
  });
}
