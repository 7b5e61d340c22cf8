import type { ErrorCode } from './codes.js';
import { isToolError } from './errors.js';
import { fail, type ToolResult } from './result.js';

/** What a known dependency failure means for the model. */
export interface FailureClass {
  /** The code the model sees: `unavailable`, `timeout` or `permission_denied`. */
  readonly code: Extract<ErrorCode, 'unavailable' | 'timeout' | 'permission_denied'>;
  /** Whether the same call may succeed later. */
  readonly retryable: boolean;
  /** How long to wait before retrying, when the failure says so. */
  readonly retryAfterMs?: number;
  /** A short sentence safe for the model (names no host, table, role or statement). */
  readonly message: string;
  /** A hint more precise than the code's default, when there is one. */
  readonly hint?: string;
  /** Why, for the server log and policy decisions: `pg 57014 statement timeout`, `ECONNREFUSED`. */
  readonly reason: string;
  /** What failed: the database, a network peer, or the call's own abort signal. */
  readonly source: 'database' | 'network' | 'abort';
}

// The most errors one walk visits: a chain deeper than this is a loop or an attack, not a diagnosis.
const MAX_ERRORS = 32;

// sql's adapters mark connection-level failures with this registry symbol (connect, checkout, dead
// socket); honoured here so the mark means the same everywhere.
const CONNECTION_FAILURE = Symbol.for('toolgate.sql.connectionFailure');

const DATABASE_UNAVAILABLE = 'The database is unavailable.';
const SERVICE_UNAVAILABLE = 'A service this tool depends on is unavailable.';

/**
 * SQLSTATEs meaning the database cannot serve us now: class 08 (connection exception), class 53
 * (insufficient resources: 53300 too many connections, 53000, 53100 disk full, 53200 out of memory),
 * 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now, 57P05 idle session timeout,
 * 25P03 idle-in-transaction timeout (the server closed our session), 58000 system error, 58030 I/O error.
 */
const PG_UNAVAILABLE = /^(?:08[0-9A-Z]{3}|53[0-9A-Z]{3}|57P0[1235]|25P03|58000|58030)$/;
// 40001 serialization failure, 40P01 deadlock: the transaction lost a race; the same call may pass.
const PG_CONFLICT = /^(?:40001|40P01)$/;
// Class 28: invalid authorization (28000), invalid password (28P01).
const PG_AUTH = /^28[0-9A-Z]{3}$/;

// Node socket and DNS errors of a peer that is down or unreachable.
const NETWORK_UNAVAILABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EPIPE',
  'EAI_AGAIN',
  'ENOTFOUND',
  // undici: the socket closed or the client was closed or destroyed under the request.
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
]);
// Timeouts of a peer, from Node and undici. Other UND_ERR_* codes (invalid argument, not supported,
// content-length mismatch) are programming errors and stay unclassified (`internal`).
const NETWORK_TIMEOUT = new Set([
  'ETIMEDOUT',
  'ESOCKETTIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);
// Drivers that report a dead connection in words, without a code: node-postgres, pg-pool, PGlite.
const CONNECTION_MESSAGE =
  /^(?:Connection terminated|Client has encountered a connection error|Client was closed and is not queryable|Connection ended|timeout exceeded when trying to connect|Cannot use a pool after calling end|PGlite is closed)/i;

/**
 * The one mapping from a database or network failure to a model-facing code, used by redact-errors,
 * sql and anything else that classifies. Looks at the error, then its `cause` chain and the members
 * of an `AggregateError` (breadth first, outermost first; the first known failure wins):
 *
 * - `timeout` (retryable): AbortError, TimeoutError, `ABORT_ERR`, `UND_ERR_ABORTED`, ETIMEDOUT and
 *   undici's connect/headers/body timeouts, PostgreSQL 57014 (statement timeout or cancel).
 * - `unavailable` (retryable): pg connection errors (08xxx, 53xxx, 57P01-57P03, 57P05, 25P03, 58000,
 *   58030), dropped-connection messages of pg and PGlite, Node network errors (ECONNREFUSED,
 *   ECONNRESET, EHOSTUNREACH, ENETUNREACH, EPIPE, EAI_AGAIN, ENOTFOUND, ...), undici socket errors,
 *   and 40001/40P01 (serialization failure, deadlock: the same call may pass on a retry).
 * - `unavailable` (NOT retryable): 28000/28P01 authentication failures. These are the server's own
 *   database credentials, not the caller's rights: `permission_denied` would tell the model this user
 *   may not do this, which is false; the dependency is unusable until an operator fixes the config.
 * - `permission_denied`: 42501 insufficient privilege (the role the tool runs under, often bound
 *   to the caller, may not read this).
 *
 * `undefined` for anything else, and for a `ToolError` (it already carries the code its author chose).
 */
export function classifyFailure(error: unknown): FailureClass | undefined {
  if (isToolError(error)) return undefined;
  for (const item of errorChain(error)) {
    let known: FailureClass | undefined;
    try {
      known = classifyOne(item as Fields, item);
    } catch {
      // A hostile getter (name, code, message) makes that error unknown, it does not break the call.
    }
    if (known) return known;
  }
  return undefined;
}

interface Fields {
  name?: unknown;
  code?: unknown;
  message?: unknown;
}

function classifyOne({ name, code, message }: Fields, item: object): FailureClass | undefined {
  if (
    name === 'AbortError' ||
    name === 'TimeoutError' ||
    code === 'ABORT_ERR' ||
    code === 'UND_ERR_ABORTED'
  ) {
    const reason = typeof name === 'string' && name !== 'Error' ? name : String(code);
    return timeout('abort', 'The call was stopped before it finished.', reason);
  }
  if (typeof code === 'string') {
    if (code === '57014') {
      return {
        ...timeout('database', 'The database query took too long.', 'pg 57014 statement timeout'),
        hint: 'The query ran past its time limit. Retry once with narrower arguments (a shorter period, a lower limit).',
      };
    }
    if (code === '42501') {
      return {
        code: 'permission_denied',
        retryable: false,
        message: 'This operation is not permitted.',
        reason: 'pg 42501 insufficient privilege',
        source: 'database',
      };
    }
    if (PG_AUTH.test(code)) {
      return {
        ...unavailable(
          'database',
          DATABASE_UNAVAILABLE,
          `pg ${code} authentication failed (server credentials)`,
        ),
        retryable: false,
        hint: 'The service cannot sign in to its database. Do not retry; tell the user the service is misconfigured.',
      };
    }
    if (PG_CONFLICT.test(code)) {
      return {
        ...unavailable(
          'database',
          'The database could not complete the call because of a conflicting one.',
          `pg ${code} ${code === '40001' ? 'serialization failure' : 'deadlock'}`,
        ),
        hint: 'Another change got in the way. Retry the same call once.',
      };
    }
    if (PG_UNAVAILABLE.test(code)) return unavailable('database', DATABASE_UNAVAILABLE, `pg ${code}`);
    if (NETWORK_UNAVAILABLE.has(code)) return unavailable('network', SERVICE_UNAVAILABLE, code);
    if (NETWORK_TIMEOUT.has(code)) {
      return timeout('network', 'A service this tool depends on did not answer in time.', code);
    }
  }
  if ((item as Record<symbol, unknown>)[CONNECTION_FAILURE] === true) {
    return unavailable('database', DATABASE_UNAVAILABLE, 'database connection failure');
  }
  if (typeof message === 'string' && CONNECTION_MESSAGE.test(message)) {
    return unavailable('database', DATABASE_UNAVAILABLE, 'database connection lost');
  }
  return undefined;
}

function unavailable(source: FailureClass['source'], message: string, reason: string): FailureClass {
  return { code: 'unavailable', retryable: true, message, reason, source };
}

function timeout(source: FailureClass['source'], message: string, reason: string): FailureClass {
  return { code: 'timeout', retryable: true, message, reason, source };
}

/**
 * The error, then its `cause` chain and the members of an `AggregateError` (Node's connect to
 * `localhost` tries ::1 and 127.0.0.1 and throws one), breadth first, each object once.
 */
function errorChain(error: unknown): object[] {
  const chain: object[] = [];
  const queue: unknown[] = [error];
  const seen = new Set<unknown>();
  while (queue.length > 0 && chain.length < MAX_ERRORS) {
    const item = queue.shift();
    if (typeof item !== 'object' || item === null || seen.has(item)) continue;
    seen.add(item);
    chain.push(item);
    try {
      const { cause, errors } = item as { cause?: unknown; errors?: unknown };
      if (cause !== undefined) queue.push(cause);
      if (Array.isArray(errors)) queue.push(...errors.slice(0, MAX_ERRORS));
    } catch {
      // A throwing getter on a hostile error ends the walk of that branch, not the call.
    }
  }
  return chain;
}

/**
 * True when the caller cancelled the call (its request signal aborted) and `error` is what that cancel
 * made: the signal's own reason (an MCP client's `notifications/cancelled` reason is a string the client
 * chose, and libraries such as fetch reject with it as it is), an error it caused, or an `AbortError`.
 * Such a failure is the caller's doing, not an incident: answer it with `cancelledResult`, log it below
 * error level, and keep the client's reason text out of the log.
 */
export function isCallerCancel(
  ctx: { readonly request: { readonly signal: AbortSignal } },
  error: unknown,
): boolean {
  const signal = ctx.request.signal;
  if (!signal.aborted) return false;
  const reason: unknown = signal.reason;
  if (error === reason) return true;
  for (const item of errorChain(error)) {
    if (item === reason) return true;
    try {
      const name = (item as { name?: unknown }).name;
      if (name === 'AbortError') return true;
    } catch {
      // A hostile getter: not a cancel we can recognise.
    }
  }
  return false;
}

/** The answer to a call its caller cancelled: `timeout`, naming the tool the model called. */
export function cancelledResult(toolName: string): ToolResult {
  return fail('timeout', `${toolName} was cancelled before it finished.`, {
    hint: 'The request was cancelled. Call again only if the answer is still needed.',
  });
}
