import { ERROR_CODE_DEFAULTS, type ErrorCode } from './codes.js';
import type { ArgumentIssue } from './result.js';

// A registry symbol, so the brand survives two copies of this package in one process.
const TOOL_ERROR_BRAND = Symbol.for('toolgate.ToolError');

export interface ToolErrorOptions {
  /** What the model should do next; defaults to the code's hint. */
  hint?: string;
  /** Whether the same call may succeed later; defaults per code. */
  retryable?: boolean;
  /** How long to wait before retrying, in milliseconds. */
  retryAfterMs?: number;
  /** For `invalid_argument`: each refused field and what it expects. */
  fields?: ArgumentIssue[];
  /** The underlying error, kept for the server log, never shown to the model. */
  cause?: unknown;
}

/**
 * An error a handler or middleware throws on purpose: its code, message and hint reach the model
 * as a `fail()` result. Anything else thrown is an internal error.
 */
export class ToolError extends Error {
  readonly code: ErrorCode;
  readonly hint: string;
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;
  readonly fields: ArgumentIssue[] | undefined;

  constructor(code: ErrorCode, message: string, options: ToolErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ToolError';
    this.code = code;
    this.hint = options.hint ?? ERROR_CODE_DEFAULTS[code].hint;
    this.retryable = options.retryable ?? ERROR_CODE_DEFAULTS[code].retryable;
    this.retryAfterMs = options.retryAfterMs;
    this.fields = options.fields;
    Object.defineProperty(this, TOOL_ERROR_BRAND, { value: true });
  }
}

/** True for a ToolError from any copy of @toolgate/core (`instanceof` is not). */
export function isToolError(value: unknown): value is ToolError {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as Record<symbol, unknown>)[TOOL_ERROR_BRAND] === true
  );
}
