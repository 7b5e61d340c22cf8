import { errorChain } from './error-chain.js';
import type { ErrorClassification } from './types.js';

type Known = Required<Pick<ErrorClassification, 'code' | 'message' | 'reason'>> & ErrorClassification;

const DATABASE_UNAVAILABLE = 'The database is unavailable.';
const SERVICE_UNAVAILABLE = 'A service this tool depends on is unavailable.';

// SQLSTATE: class 08 (connection exception) and 57P01..57P03 (shutdown, crash, cannot connect now),
// 53300 (too many connections).
const PG_UNAVAILABLE = /^(?:08[0-9A-Z]{3}|57P0[123]|53300)$/;
const NETWORK_UNAVAILABLE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'UND_ERR_SOCKET',
]);
const NETWORK_TIMEOUT = /^(?:ETIMEDOUT|ESOCKETTIMEDOUT|UND_ERR_[A-Z_]*TIMEOUT)$/;
// node-postgres reports a dropped or unusable connection in words, without a code.
const PG_CONNECTION_MESSAGE =
  /^(?:Connection terminated|Client has encountered a connection error|Client was closed and is not queryable|timeout exceeded when trying to connect)/;

/**
 * The code a known failure stands for, looking through the `cause` chain and `AggregateError`
 * members (outermost first): pg connection errors and ECONNREFUSED, ENOTFOUND, EAI_AGAIN,
 * ECONNRESET → `unavailable`; AbortError, TimeoutError, ETIMEDOUT, undici timeouts and pg's statement
 * timeout (57014) → `timeout`; pg insufficient privilege (42501) → `permission_denied`.
 * `undefined` for anything else (which becomes `internal`).
 */
export function classifyError(error: unknown): ErrorClassification | undefined {
  for (const item of errorChain(error)) {
    const known = classifyOne(item as { name?: unknown; code?: unknown; message?: unknown });
    if (known) return known;
  }
  return undefined;
}

function classifyOne(item: { name?: unknown; code?: unknown; message?: unknown }): Known | undefined {
  const { name, code, message } = item;
  if (name === 'AbortError' || name === 'TimeoutError' || code === 'ABORT_ERR') {
    return { code: 'timeout', message: 'The call was stopped before it finished.', reason: String(name) };
  }
  if (typeof code === 'string') {
    if (code === '57014') {
      return {
        code: 'timeout',
        message: 'The database query took too long.',
        hint: 'The query ran past its time limit. Retry once with narrower arguments (a shorter period, a lower limit).',
        reason: 'pg 57014 statement timeout',
      };
    }
    if (code === '42501') {
      return { code: 'permission_denied', message: 'This operation is not permitted.', reason: 'pg 42501' };
    }
    if (PG_UNAVAILABLE.test(code)) {
      return { code: 'unavailable', message: DATABASE_UNAVAILABLE, reason: `pg ${code}` };
    }
    if (NETWORK_UNAVAILABLE.has(code))
      return { code: 'unavailable', message: SERVICE_UNAVAILABLE, reason: code };
    if (NETWORK_TIMEOUT.test(code)) {
      return {
        code: 'timeout',
        message: 'A service this tool depends on did not answer in time.',
        reason: code,
      };
    }
  }
  if (typeof message === 'string' && PG_CONNECTION_MESSAGE.test(message)) {
    return { code: 'unavailable', message: DATABASE_UNAVAILABLE, reason: 'pg connection lost' };
  }
  return undefined;
}
