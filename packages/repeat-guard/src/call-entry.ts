import { isToolResult, type ToolResult } from '@toolgate/core';

/** What the store remembers about one call key. */
export interface CallEntry {
  /** Real executions of this call in the current window. */
  readonly count: number;
  /** When the window began (the first execution), ms since the epoch. */
  readonly firstAt: number;
  /** When `result` was produced, ms since the epoch. */
  readonly at: number;
  /** The latest result the model saw for this call, exactly as the chain below returned it. */
  readonly result: ToolResult;
}

interface StoredCallEntry {
  v: 1;
  n: number;
  f: number;
  t: number;
  r: ToolResult;
}

export function encodeCallEntry(entry: CallEntry): string {
  const stored: StoredCallEntry = { v: 1, n: entry.count, f: entry.firstAt, t: entry.at, r: entry.result };
  return JSON.stringify(stored);
}

/**
 * Parses a stored entry; anything else (a foreign value under our key, a truncated write, an older
 * format) reads as absent, so the call simply runs.
 */
export function decodeCallEntry(text: string | undefined): CallEntry | undefined {
  if (text === undefined) return undefined;
  let stored: Partial<StoredCallEntry>;
  try {
    stored = JSON.parse(text) as Partial<StoredCallEntry>;
  } catch {
    return undefined;
  }
  if (
    typeof stored !== 'object' ||
    stored === null ||
    stored.v !== 1 ||
    !Number.isInteger(stored.n) ||
    typeof stored.f !== 'number' ||
    typeof stored.t !== 'number' ||
    !isToolResult(stored.r)
  ) {
    return undefined;
  }
  return { count: stored.n!, firstAt: stored.f, at: stored.t, result: stored.r };
}
