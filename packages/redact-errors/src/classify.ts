import { classifyFailure, type FailureClass } from '@toolgate/core';
import type { ErrorClassification } from './types.js';

/**
 * The code a known failure stands for: core's `classifyFailure` (pg connection errors and network
 * errors → `unavailable`, aborts and timeouts → `timeout`, 42501 → `permission_denied`, ...), in
 * this package's `ErrorClassification` shape. `undefined` for anything else (which becomes `internal`).
 * @deprecated Use `classifyFailure` from `@toolgate/core`; this wrapper stays for one release.
 */
export function classifyError(error: unknown): ErrorClassification | undefined {
  const known = classifyFailure(error);
  return known === undefined ? undefined : classificationOf(known);
}

/** core's `FailureClass` in this package's `ErrorClassification` shape. */
export function classificationOf(known: FailureClass): ErrorClassification {
  return {
    code: known.code,
    message: known.message,
    retryable: known.retryable,
    reason: known.reason,
    ...(known.hint !== undefined && { hint: known.hint }),
    ...(known.retryAfterMs !== undefined && { retryAfterMs: known.retryAfterMs }),
  };
}
