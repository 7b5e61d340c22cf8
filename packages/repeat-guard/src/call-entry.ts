import {
  ERROR_META_KEY,
  isErrorCode,
  isWellFormedResult,
  mirrorsStructuredContent,
  type ToolResult,
} from '@toolgate/core';

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
    !isReplayable(stored.r)
  ) {
    return undefined;
  }
  let result = stored.r;
  if (stored.s === 1) {
    if (result.structuredContent !== undefined) return undefined;
    const first = result.content[0];
    if (first?.type !== 'text') return undefined;
    let structured: unknown;
    try {
      structured = JSON.parse(first.text);
    } catch {
      return undefined;
    }
    if (!isRecord(structured)) return undefined;
    result = { ...result, structuredContent: structured };
  }
  return { count: stored.n!, firstAt: stored.f, at: stored.t, result };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A result the guard can answer with: what the chain below returns and core passes on (core's
 * `isWellFormedResult`). A damaged or forged value (a content part that is null or not an object, text
 * that is not a string, structured content or `_meta` that is not an object) would make the answer
 * throw, or replay garbage: it reads as absent, and the call runs. Read only when an entry is found,
 * never on a first call.
 */
function isReplayable(value: unknown): value is ToolResult {
  if (!isWellFormedResult(value)) return false;
  // An error envelope core's boundary would not pass on (its message not text) is not one the chain
  // returned and the guard remembered as such.
  const envelope: unknown = value._meta?.[ERROR_META_KEY];
  if (envelope === undefined) return true;
  if (!isRecord(envelope)) return false;
  return !isErrorCode(envelope.error) || typeof envelope.message === 'string';
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
