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

/** The error an aborted call rejects with. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new Error('The operation was aborted.');
}
