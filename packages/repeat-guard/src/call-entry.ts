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
 * format, a value longer than `limit`) reads as absent, so the call simply runs. Never throws: a
 * forged value (nested deep enough to exhaust the stack in a check, say) is a value we cannot answer
 * from, not a reason to fail the call.
 */
export function decodeCallEntry(text: string | undefined, limit: number): CallEntry | undefined {
  if (text === undefined) return undefined;
  // The guard never writes an entry longer than the tool's `maxResultSize` (see `encodedEntry`): a
  // longer one is someone else's (a huge value put under our key), and parsing it, let alone sending
  // it to the model, would cost what the limit exists to prevent. Checked before any parse.
  if (typeof text !== 'string' || text.length > limit) return undefined;
  try {
    return decodeWithin(text);
  } catch {
    return undefined;
  }
}

function decodeWithin(text: string): CallEntry | undefined {
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
    if (result.structuredContent !== undefined || result.isError === true) return undefined;
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
 * throw, or replay garbage: it reads as absent, and the call runs. So does a failure without an error
 * envelope core's boundary takes (see `hasEnvelope`): the guard never remembers one. Read only when an
 * entry is found, never on a first call.
 */
function isReplayable(value: unknown): value is ToolResult {
  if (!isWellFormedResult(value)) return false;
  if (value.isError === true) return hasEnvelope(value);
  // A success's reserved error key is dropped by core's boundary; one that is there must still be an
  // envelope core would pass on (its message text), not a foreign shape.
  const envelope: unknown = value._meta?.[ERROR_META_KEY];
  if (envelope === undefined) return true;
  if (!isRecord(envelope)) return false;
  return !isErrorCode(envelope.error) || typeof envelope.message === 'string';
}

/**
 * Whether a failure carries the envelope core's boundary takes as one (`_meta["toolgate/error"]` with
 * a known code and a text message). Any other failure (a raw `isError` result a middleware below
 * returned) is answered by the boundary as `internal` with its text withheld (logged under the incident
 * id): core's `errorOf` would read that raw text as the message, so an answer rebuilt from it would show
 * the model, on the repeat, exactly what the boundary kept from it the first time. Such a failure is
 * never remembered, and never answered from when read back.
 */
export function hasEnvelope(result: ToolResult): boolean {
  const envelope: unknown = result._meta?.[ERROR_META_KEY];
  return isRecord(envelope) && isErrorCode(envelope.error) && typeof envelope.message === 'string';
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
 * "Plain" is checked field by field (`isBareResult`, `isBareText`): the count must bound what is held,
 * and a field the text-only count does not see (a content part's `_meta` or `annotations`, a field of
 * the result's own) can be of any size.
 */
export function measureCallEntry(entry: CallEntry, limit: number): number | undefined {
  const result = entry.result;
  if (isBareResult(result) && (result.structuredContent === undefined || mirrorsStructuredContent(result))) {
    let chars = ENTRY_OVERHEAD;
    let bound = ENTRY_OVERHEAD;
    let plain = true;
    for (const part of result.content) {
      if (!isBareText(part)) {
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

/**
 * A result of `content`, `structuredContent` and `isError` alone (no `_meta`, no field of its own):
 * what a text-only measure or copy (`measureCallEntry`, the memory store's compaction) sees whole.
 * `for...in` reads the object's own enumerable string keys without allocating (the marks `ok()` leaves
 * are symbols, which it skips).
 */
export function isBareResult(result: ToolResult): boolean {
  for (const key in result) {
    if (key !== 'content' && key !== 'structuredContent' && key !== 'isError') return false;
  }
  return true;
}

/** A content part that is `{ type: 'text', text }` and nothing else (no `_meta`, no `annotations`). */
export function isBareText(part: ToolResult['content'][number]): part is { type: 'text'; text: string } {
  if (part.type !== 'text' || typeof part.text !== 'string') return false;
  for (const key in part) {
    if (key !== 'type' && key !== 'text') return false;
  }
  return true;
}
