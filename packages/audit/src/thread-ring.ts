import type { CapturedRecord } from './record.js';

/**
 * The shared memory between calls and the writer thread (`thread: true`): a control block, the
 * writer's counters and head, and a ring of captured records. One producer (the calls' thread) writes
 * records at `WRITE`; one consumer (the writer thread) reads them at `READ`. Plain writes of a record's
 * bytes happen before the `Atomics.store` that publishes it, and `Atomics.load` of that offset happens
 * before the reads, so the consumer never sees a record half written.
 */

/** Int32 slots of the control block. */
export const WRITE = 0;
export const READ = 1;
/** 1 while the writer thread waits for records: the producer then wakes it (`Atomics.notify`). */
export const SLEEPING = 2;
/** Seqlock of the counters and head: odd while the writer thread rewrites them. */
export const STATS_VERSION = 4;
const CONTROL_SLOTS = 8;

/** Float64 slots of the writer thread's counters. */
export const STAT_WRITTEN = 0;
export const STAT_DROPPED = 1;
export const STAT_REJECTED = 2;
export const STAT_RETRIES = 3;
export const STAT_DUPLICATES = 4;
export const STAT_PENDING = 5;
export const STAT_PENDING_BYTES = 6;
/** The chain's head seq (0: none yet); its hash is the 64 bytes after the counters. */
export const STAT_HEAD_SEQ = 7;
/**
 * Records the writer thread has taken from the ring (wrapping Int32 arithmetic), under the same
 * seqlock as the counters: a record is counted either in the ring or in the writer, never both or neither.
 */
export const STAT_CONSUMED = 8;
/** When the writer's outstanding write began (epoch ms), 0 when none (`AuditStats.writingMs`). */
export const STAT_WRITING_SINCE = 9;
const STAT_SLOTS = 10;

const CONTROL_BYTES = CONTROL_SLOTS * 4;
const STATS_OFFSET = CONTROL_BYTES;
const HEAD_HASH_OFFSET = STATS_OFFSET + STAT_SLOTS * 8;
const RING_OFFSET = HEAD_HASH_OFFSET + 64;

/** A record's length word saying "the next record starts at the ring's beginning". */
const WRAP = 0xffffffff;

/** Optional fields present in a record, and its booleans. */
const ABORTED = 1;
const UNKNOWN_TOOL = 2;
const NUMERIC_ID = 4;
const HAS_PREVIEW = 8;
const HAS_BINDINGS = 16;
const HAS_CLIENT = 32;
const HAS_INCIDENT = 64;
const HAS_PRINCIPAL = 128;
const HAS_SESSION = 256;
const HAS_SPAN = 512;
const HAS_TRACE = 1024;

/**
 * A record's fixed part: length, ack id, flags, byte estimate (4 × u32), then duration, start, result
 * size and a numeric request id (4 × f64), then the UTF-16 lengths of its 14 text fields (14 × u32).
 * The texts follow as one UTF-16LE run: every JavaScript string survives it exactly, lone surrogates
 * included, where UTF-8 would replace them.
 */
const FIXED = 16 + 32 + 14 * 4;

export interface RingViews {
  readonly control: Int32Array;
  readonly stats: Float64Array;
  readonly headHash: Uint8Array;
  readonly ring: Buffer;
  /**
   * The ring as 32-bit and 64-bit words (records start 8-aligned): element stores the compiler inlines,
   * where a DataView over shared memory is a builtin call per field.
   */
  readonly words: Uint32Array;
  readonly doubles: Float64Array;
  readonly capacity: number;
}

/** Shared memory for a ring of `capacity` bytes (rounded up to a multiple of 8). */
export function createRingMemory(capacity: number): SharedArrayBuffer {
  return new SharedArrayBuffer(RING_OFFSET + ((capacity + 7) & ~7));
}

export function ringViews(memory: SharedArrayBuffer): RingViews {
  const capacity = memory.byteLength - RING_OFFSET;
  return {
    control: new Int32Array(memory, 0, CONTROL_SLOTS),
    stats: new Float64Array(memory, STATS_OFFSET, STAT_SLOTS),
    headHash: new Uint8Array(memory, HEAD_HASH_OFFSET, 64),
    ring: Buffer.from(memory, RING_OFFSET, capacity),
    words: new Uint32Array(memory, RING_OFFSET, capacity >>> 2),
    doubles: new Float64Array(memory, RING_OFFSET, capacity >>> 3),
    capacity,
  };
}

/** Ring bytes a record takes (8-aligned). */
export function recordSize(textChars: number): number {
  return (FIXED + textChars * 2 + 7) & ~7;
}

/** The record's 14 texts in order, joined (the lengths say where each ends). */
export function recordText(captured: CapturedRecord): string {
  let text = captured.args;
  if (captured.argsPreview !== undefined) text += captured.argsPreview;
  if (captured.bindings !== undefined) text += captured.bindings;
  text += captured.decisions;
  text += captured.caller;
  if (captured.clientId !== undefined) text += captured.clientId;
  if (captured.incidentId !== undefined) text += captured.incidentId;
  text += captured.outcome;
  if (captured.principal !== undefined) text += captured.principal;
  if (typeof captured.requestId === 'string') text += captured.requestId;
  if (captured.sessionId !== undefined) text += captured.sessionId;
  if (captured.spanId !== undefined) text += captured.spanId;
  if (captured.traceId !== undefined) text += captured.traceId;
  text += captured.tool;
  return text;
}

/**
 * Writes a record at `at` (room for `size` bytes checked by the caller): its fixed part, then `text`
 * (`recordText(captured)`).
 */
export function encodeRecord(
  views: RingViews,
  at: number,
  size: number,
  captured: CapturedRecord,
  text: string,
  ackId: number,
): void {
  const { words, doubles, ring } = views;
  const word = at >>> 2;
  const double = at >>> 3;
  const requestId = captured.requestId;
  let flags = 0;
  if (captured.aborted) flags |= ABORTED;
  if (captured.unknownTool) flags |= UNKNOWN_TOOL;
  if (typeof requestId === 'number') flags |= NUMERIC_ID;
  words[word] = size;
  words[word + 1] = ackId;
  words[word + 3] = captured.bytes;
  doubles[double + 2] = captured.durationMs;
  doubles[double + 3] = captured.startedAt;
  doubles[double + 4] = captured.resultBytes;
  doubles[double + 5] = typeof requestId === 'number' ? requestId : 0;
  const lengths = word + 12;
  const { argsPreview, bindings, clientId, incidentId, principal, sessionId, spanId, traceId } = captured;
  words[lengths] = captured.args.length;
  words[lengths + 1] = argsPreview === undefined ? 0 : argsPreview.length;
  words[lengths + 2] = bindings === undefined ? 0 : bindings.length;
  words[lengths + 3] = captured.decisions.length;
  words[lengths + 4] = captured.caller.length;
  words[lengths + 5] = clientId === undefined ? 0 : clientId.length;
  words[lengths + 6] = incidentId === undefined ? 0 : incidentId.length;
  words[lengths + 7] = captured.outcome.length;
  words[lengths + 8] = principal === undefined ? 0 : principal.length;
  words[lengths + 9] = typeof requestId === 'string' ? requestId.length : 0;
  words[lengths + 10] = sessionId === undefined ? 0 : sessionId.length;
  words[lengths + 11] = spanId === undefined ? 0 : spanId.length;
  words[lengths + 12] = traceId === undefined ? 0 : traceId.length;
  words[lengths + 13] = captured.tool.length;
  if (argsPreview !== undefined) flags |= HAS_PREVIEW;
  if (bindings !== undefined) flags |= HAS_BINDINGS;
  if (clientId !== undefined) flags |= HAS_CLIENT;
  if (incidentId !== undefined) flags |= HAS_INCIDENT;
  if (principal !== undefined) flags |= HAS_PRINCIPAL;
  if (sessionId !== undefined) flags |= HAS_SESSION;
  if (spanId !== undefined) flags |= HAS_SPAN;
  if (traceId !== undefined) flags |= HAS_TRACE;
  words[word + 2] = flags;
  ring.write(text, at + FIXED, text.length * 2, 'utf16le');
}

/** A record read back from the ring, and its ack id (0: nobody waits for it). */
export interface DecodedRecord {
  readonly captured: CapturedRecord;
  readonly ackId: number;
  /** Ring bytes it took. */
  readonly size: number;
}

/** Whether the length word at `at` sends the reader back to the ring's beginning. */
export function isWrap(views: RingViews, at: number): boolean {
  return views.words[at >>> 2] === WRAP;
}

export function writeWrap(views: RingViews, at: number): void {
  views.words[at >>> 2] = WRAP;
}

export function decodeRecord(views: RingViews, at: number): DecodedRecord {
  const { words, doubles, ring } = views;
  const word = at >>> 2;
  const double = at >>> 3;
  const size = words[word]!;
  const ackId = words[word + 1]!;
  const flags = words[word + 2]!;
  let chars = 0;
  for (let index = 0; index < 14; index += 1) chars += words[word + 12 + index]!;
  const text = ring.toString('utf16le', at + FIXED, at + FIXED + chars * 2);
  let from = 0;
  const next = (index: number): string => {
    const length = words[word + 12 + index]!;
    const piece = text.slice(from, from + length);
    from += length;
    return piece;
  };
  const nextIf = (index: number, flag: number): string | undefined =>
    (flags & flag) === 0 ? undefined : next(index);
  const args = next(0);
  const argsPreview = nextIf(1, HAS_PREVIEW);
  const bindings = nextIf(2, HAS_BINDINGS);
  const decisions = next(3);
  const caller = next(4);
  const clientId = nextIf(5, HAS_CLIENT);
  const incidentId = nextIf(6, HAS_INCIDENT);
  const outcome = next(7);
  const principal = nextIf(8, HAS_PRINCIPAL);
  const stringId = (flags & NUMERIC_ID) === 0 ? next(9) : undefined;
  const sessionId = nextIf(10, HAS_SESSION);
  const spanId = nextIf(11, HAS_SPAN);
  const traceId = nextIf(12, HAS_TRACE);
  const tool = next(13);
  const captured: CapturedRecord = {
    args,
    argsPreview,
    bindings,
    decisions,
    aborted: (flags & ABORTED) !== 0,
    caller,
    clientId,
    durationMs: doubles[double + 2]!,
    incidentId,
    outcome,
    principal,
    requestId: stringId ?? doubles[double + 5]!,
    resultBytes: doubles[double + 4]!,
    sessionId,
    spanId,
    traceId,
    startedAt: doubles[double + 3]!,
    tool,
    unknownTool: (flags & UNKNOWN_TOOL) !== 0,
    bytes: words[word + 3]!,
    ack: undefined,
  };
  return { captured, ackId, size };
}
