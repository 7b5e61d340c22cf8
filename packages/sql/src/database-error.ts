import { isToolError, ToolError } from '@toolgate/core';

// A registry symbol: adapters mark connection-level failures so the mapping survives duplicate copies.
const CONNECTION_FAILURE = Symbol.for('toolgate.sql.connectionFailure');

// SQLSTATEs meaning "the database is not reachable or not accepting us now".
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300', '53000', '58000', '58030']);
// Node socket errors a driver surfaces for a dead or unreachable server.
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);
// Driver errors without a code: pg's dead-connection messages and PGlite after close().
const CONNECTION_MESSAGES =
  /Connection terminated|not queryable|Client was closed|Connection ended|timeout exceeded when trying to connect|Cannot use a pool after calling end|PGlite is closed/i;

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
 * Turns a database failure into the result contract: a ToolError for the codes the model can act on
 * (`timeout`, `unavailable`, `permission_denied`), or the original error (core and redact-errors
 * answer `internal` and log it) for anything else, such as a column that does not exist.
 */
export function toToolError(error: unknown, signal: AbortSignal | undefined, timeoutMs: number): unknown {
  if (isToolError(error)) return error;
  const code = codeOf(error);
  if (code === '57014' || signal?.aborted === true) {
    return new ToolError(
      'timeout',
      signal?.aborted === true && code !== '57014'
        ? 'The query was cancelled before it finished.'
        : `The query ran past its ${timeoutMs} ms limit.`,
      { hint: 'Retry once with narrower filters (fewer days, a longer prefix).', cause: error },
    );
  }
  if (code === '42501') {
    return new ToolError('permission_denied', 'The database refused access to this data.', { cause: error });
  }
  if (isConnectionFailure(error, code)) {
    return new ToolError('unavailable', 'The database is unavailable.', { cause: error });
  }
  return error;
}

function isConnectionFailure(error: unknown, code: string | undefined): boolean {
  if (
    typeof error === 'object' &&
    error !== null &&
    (error as Record<symbol, unknown>)[CONNECTION_FAILURE] === true
  ) {
    return true;
  }
  if (
    code !== undefined &&
    (code.startsWith('08') || UNAVAILABLE_STATES.has(code) || SOCKET_CODES.has(code))
  ) {
    return true;
  }
  return error instanceof Error && CONNECTION_MESSAGES.test(error.message);
}

function codeOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}
