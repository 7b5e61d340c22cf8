import { classifyFailure, type FailureClass, isToolError, ToolError } from '@toolgate/core';

// A registry symbol: adapters mark connection-level failures (connect, checkout, dead socket) and
// core's classifyFailure honours the mark, so the mapping survives duplicate package copies.
const CONNECTION_FAILURE = Symbol.for('toolgate.sql.connectionFailure');

const NARROWER = 'Retry once with narrower filters (fewer days, a longer prefix).';

/** Marks an error an adapter knows to be a connection failure (connect, checkout, dead socket). */
export function markConnectionFailure(error: unknown): unknown {
  if (typeof error === 'object' && error !== null) {
    Object.defineProperty(error, CONNECTION_FAILURE, { value: true });
    return error;
  }
  const wrapped = new Error(String(error));
  Object.defineProperty(wrapped, CONNECTION_FAILURE, { value: true });
  return wrapped;
}

/** An adapter's own timeout, shaped like PostgreSQL's (SQLSTATE 57014) so one mapping serves all. */
export function statementTimeoutError(message: string): Error {
  return Object.assign(new Error(message), { code: '57014' });
}

/**
 * Turns a database failure into the result contract through core's one classifier (`classifyFailure`),
 * worded for a SQL tool: a ToolError for the codes the model can act on (`timeout`, `unavailable`,
 * `permission_denied`), or the original error (core and redact-errors answer `internal` and log it)
 * for anything else, such as a column that does not exist.
 */
export function toToolError(
  error: unknown,
  signal: AbortSignal | undefined,
  timeoutMs: number,
  boundValues = 0,
): unknown {
  if (isToolError(error)) return error;
  const known = classifyFailure(error);
  const statementTimeout = known?.reason === 'pg 57014 statement timeout';
  // The call's own deadline or cancel: whatever the driver threw on the way out, it is a timeout.
  if (statementTimeout || signal?.aborted === true) {
    return new ToolError(
      'timeout',
      statementTimeout || signal?.reason?.name === 'TimeoutError'
        ? `The query ran past its ${timeoutMs} ms limit.`
        : 'The query was cancelled before it finished.',
      { hint: NARROWER, cause: error },
    );
  }
  if (known === undefined) return dataExceptionOf(error, boundValues) ?? error;
  return new ToolError(known.code, sqlMessage(known), {
    ...(known.hint === undefined ? {} : { hint: known.hint }),
    retryable: known.retryable,
    ...(known.retryAfterMs === undefined ? {} : { retryAfterMs: known.retryAfterMs }),
    cause: error,
  });
}

// Data exceptions a value the model sent can raise in a parameterized read: a number the column type
// cannot hold (22003), a date or time out of range (22008) or malformed (22007), text the column type
// cannot read (22P02, e.g. a string filter on a uuid column). The schema let them through, the database
// did not: the model's to fix, not an incident. Also text the database's encoding cannot hold
// (22P05, an emoji sent to a LATIN1 database; 22021, a character not in its repertoire).
const VALUE_REFUSED = new Set(['22003', '22007', '22008', '22P02', '22P05', '22021']);
const UNSTORABLE_TEXT = new Set(['22P05', '22021']);

// PostgreSQL names the parameter it could not read: `unnamed portal parameter $2 = '...'`.
const PARAMETER_CONTEXT = /\bportal parameter \$(\d{1,5})\b/;

function dataExceptionOf(error: unknown, boundValues: number): ToolError | undefined {
  const { code, where } =
    typeof error === 'object' && error !== null ? (error as { code?: unknown; where?: unknown }) : {};
  if (typeof code !== 'string' || !VALUE_REFUSED.has(code)) return undefined;
  // A value bound from the caller's token (the first `boundValues` parameters) that the column type
  // refuses: the credentials are at fault, and the model must not be told to change its arguments.
  const parameter = typeof where === 'string' ? PARAMETER_CONTEXT.exec(where)?.[1] : undefined;
  if (parameter !== undefined && Number(parameter) <= boundValues) {
    return new ToolError('permission_denied', "This tool cannot use the caller's credentials.", {
      hint: 'The credentials do not have the form this tool expects. Do not retry; tell the user.',
      retryable: false,
      cause: error,
    });
  }
  if (UNSTORABLE_TEXT.has(code)) {
    return new ToolError('invalid_argument', 'An argument holds characters the data cannot store.', {
      hint: 'Leave out the characters the data cannot hold (emoji, for example) and call again.',
      retryable: false,
      cause: error,
    });
  }
  return new ToolError('invalid_argument', 'An argument is outside what the data can hold.', {
    hint: 'Use a smaller number or a valid value, and call again.',
    retryable: false,
    cause: error,
  });
}

// sql's own wording where it says more than core's generic sentence.
function sqlMessage(known: FailureClass): string {
  if (known.code === 'permission_denied') return 'The database refused access to this data.';
  if (known.code === 'timeout' && known.source === 'network') return 'The database did not answer in time.';
  if (known.code === 'unavailable' && known.source === 'network') return 'The database is unavailable.';
  return known.message;
}
