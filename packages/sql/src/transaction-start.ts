import { REPLY_GRACE_MS } from './reply-deadline.js';

const starts = new Map<number, string>();

/** PostgreSQL's largest statement_timeout (INT_MAX ms); a larger SET is refused on every call. */
export const MAX_TIMEOUT_MS = 2_147_483_647;

/** Whether `value` is a statement timeout PostgreSQL takes: an integer from 1 to MAX_TIMEOUT_MS ms. */
export function isTimeoutMs(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= MAX_TIMEOUT_MS;
}

/**
 * The statements that open a call's transaction, for a timeout in ms. `SET` takes no parameters, so
 * the timeout is written into the text; it is checked to be a positive integer first.
 */
export function readOnlySettings(timeoutMs: number): string {
  let text = starts.get(timeoutMs);
  if (text === undefined) {
    if (!isTimeoutMs(timeoutMs)) {
      throw new TypeError(
        `timeoutMs must be a positive integer no larger than ${MAX_TIMEOUT_MS}, got ${String(timeoutMs)}`,
      );
    }
    text = `SET LOCAL statement_timeout = ${timeoutMs}`;
    starts.set(timeoutMs, text);
  }
  return text;
}

const pgStarts = new Map<number, string>();

/**
 * What opens a call's transaction on PostgreSQL (one simple-protocol round trip): read-only, the
 * statement timeout, and `idle_in_transaction_session_timeout` at the bound the adapter waits for a
 * reply (`timeoutMs` + REPLY_GRACE_MS). A client a partition cut off closes its end, but the server
 * may never hear of it: without that bound it kept the session, and the table locks its transaction
 * holds, until TCP gave up (minutes to hours), and a migration's lock, with every reader queued
 * behind it, waited as long.
 */
export function pgTransactionStart(timeoutMs: number): string {
  let text = pgStarts.get(timeoutMs);
  if (text === undefined) {
    const idleMs = Math.min(MAX_TIMEOUT_MS, timeoutMs + REPLY_GRACE_MS);
    text = `BEGIN READ ONLY; ${readOnlySettings(timeoutMs)}; SET LOCAL idle_in_transaction_session_timeout = ${idleMs}`;
    pgStarts.set(timeoutMs, text);
  }
  return text;
}

/** The error an aborted call rejects with. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new Error('The operation was aborted.');
}
