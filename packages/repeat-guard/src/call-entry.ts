import { isToolResult, mirrorsStructuredContent, type ToolResult } from '@toolgate/core';

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
  /** 1: `r` was an `ok()` result stored without its structuredContent, which is `JSON.parse(r.content[0].text)`. */
  s?: 1;
}

export function encodeCallEntry(entry: CallEntry): string {
  const result = entry.result;
  if (mirrorsStructuredContent(result)) {
    // The text already holds the structured content as JSON: serialise the data once, not twice.
    const { structuredContent: _mirrored, ...rest } = result;
    const stored: StoredCallEntry = { v: 1, n: entry.count, f: entry.firstAt, t: entry.at, r: rest, s: 1 };
    return JSON.stringify(stored);
  }
  const stored: StoredCallEntry = { v: 1, n: entry.count, f: entry.firstAt, t: entry.at, r: result };
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
  let result = stored.r;
  if (stored.s === 1) {
    const first = result.content[0];
    if (first?.type !== 'text') return undefined;
    try {
      result = { ...result, structuredContent: JSON.parse(first.text) as Record<string, unknown> };
    } catch {
      return undefined;
    }
  }
  return { count: stored.n!, firstAt: stored.f, at: stored.t, result };
}
