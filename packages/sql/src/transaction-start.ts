const starts = new Map<number, string>();

/**
 * The statements that open a call's transaction, for a timeout in ms. `SET` takes no parameters, so
 * the timeout is written into the text; it is checked to be a positive integer first.
 */
export function readOnlySettings(timeoutMs: number): string {
  let text = starts.get(timeoutMs);
  if (text === undefined) {
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
      throw new TypeError(`timeoutMs must be a positive integer, got ${String(timeoutMs)}`);
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
