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

// JSON escapes a character into at most 6 ("\\u001f"); the rest of an entry's JSON (field names, counts,
// times, the content parts' brackets) stays well under this many characters per part plus this overhead.
const MAX_ESCAPE = 6;
const PART_OVERHEAD = 32;
const ENTRY_OVERHEAD = 128;

/**
 * The characters `entry` counts in the memory store, or undefined when its JSON would be longer than
 * `limit` (or is not JSON: nothing to replay). A plain result whose text is far under the limit is
 * measured by its text alone, without serialising it; anything else is measured by its exact JSON.
 */
export function measureCallEntry(entry: CallEntry, limit: number): number | undefined {
  const result = entry.result;
  if (
    result._meta === undefined &&
    (result.structuredContent === undefined || mirrorsStructuredContent(result))
  ) {
    let chars = ENTRY_OVERHEAD;
    let bound = ENTRY_OVERHEAD;
    let plain = true;
    for (const part of result.content) {
      if (part.type !== 'text') {
        plain = false;
        break;
      }
      chars += part.text.length + PART_OVERHEAD;
      bound += part.text.length * MAX_ESCAPE + PART_OVERHEAD;
    }
    if (plain && bound <= limit) return chars;
  }
  let text: string;
  try {
    text = encodeCallEntry(entry);
  } catch {
    return undefined; // not JSON (a BigInt, a cycle): the SDK cannot send it either
  }
  return text.length > limit ? undefined : text.length;
}
