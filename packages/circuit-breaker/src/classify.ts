import { classifyFailure, type ErrorCode, errorOf, isToolError, type ToolResult } from '@toolgate/core';

/** How an outcome weighs on the breaker. */
export type Verdict = 'success' | 'failure' | 'ignored';

// A dependency failing or too slow. Everything else an error can say (invalid_argument, not_found,
// permission_denied, repeated_call, rate_limited) is the model's or the caller's business, and must
// weigh neither way: counted as success it would dilute the error rate and close a half-open breaker.
const DEPENDENCY_FAILURES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'unavailable',
  'timeout',
  'internal',
]);

export function verdictOfResult(result: ToolResult): Verdict {
  if (result.isError !== true) return 'success';
  return DEPENDENCY_FAILURES.has(errorOf(result)!.error) ? 'failure' : 'ignored';
}

/**
 * A thrown ToolError weighs by its code; any other throw by the code core's one classifier
 * (`classifyFailure`) gives it, so a pg 42501 (`permission_denied`: this caller's role may not read
 * this) weighs neither way, as redact-errors will answer it. Anything unclassified is a failure.
 */
export function verdictOfThrow(error: unknown): Verdict {
  if (isToolError(error)) return DEPENDENCY_FAILURES.has(error.code) ? 'failure' : 'ignored';
  const known = classifyFailure(error);
  return known === undefined || DEPENDENCY_FAILURES.has(known.code) ? 'failure' : 'ignored';
}
