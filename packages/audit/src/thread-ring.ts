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
/** Records the writer thread has taken from the ring (wrapping Int32). */
export const CONSUMED = 3;
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
const STAT_SLOTS = 8;

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
  readonly view: DataView;
  readonly capacity: number;
}

/** Shared memory for a ring of `capacity` bytes (a multiple of 8). */
export function createRingMemory(capacity: number): SharedArrayBuffer {
  return new SharedArrayBuffer(RING_OFFSET + capacity);
}

export function ringViews(memory: SharedArrayBuffer): RingViews {
  const capacity = memory.byteLength - RING_OFFSET;
  return {
    control: new Int32Array(memory, 0, CONTROL_SLOTS),
    stats: new Float64Array(memory, STATS_OFFSET, STAT_SLOTS),
    headHash: new Uint8Array(memory, HEAD_HASH_OFFSET, 64),
    ring: Buffer.from(memory, RING_OFFSET, capacity),
    view: new DataView(memory, RING_OFFSET, capacity),
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
  const { view, ring } = views;
  const requestId = captured.requestId;
  let flags = 0;
  if (captured.aborted) flags |= ABORTED;
  if (captured.unknownTool) flags |= UNKNOWN_TOOL;
  if (typeof requestId === 'number') flags |= NUMERIC_ID;
  view.setUint32(at, size, true);
  view.setUint32(at + 4, ackId, true);
  view.setUint32(at + 12, captured.bytes, true);
  view.setFloat64(at + 16, captured.durationMs, true);
  view.setFloat64(at + 24, captured.startedAt, true);
  view.setFloat64(at + 32, captured.resultBytes, true);
  view.setFloat64(at + 40, typeof requestId === 'number' ? requestId : 0, true);
  let lengths = at + 48;
  view.setUint32(lengths, captured.args.length, true);
  lengths += 4;
  flags |= optional(view, lengths, captured.argsPreview, HAS_PREVIEW);
  lengths += 4;
  flags |= optional(view, lengths, captured.bindings, HAS_BINDINGS);
  lengths += 4;
  view.setUint32(lengths, captured.decisions.length, true);
  lengths += 4;
  view.setUint32(lengths, captured.caller.length, true);
  lengths += 4;
  flags |= optional(view, lengths, captured.clientId, HAS_CLIENT);
  lengths += 4;
  flags |= optional(view, lengths, captured.incidentId, HAS_INCIDENT);
  lengths += 4;
  view.setUint32(lengths, captured.outcome.length, true);
  lengths += 4;
  flags |= optional(view, lengths, captured.principal, HAS_PRINCIPAL);
  lengths += 4;
  view.setUint32(lengths, typeof requestId === 'string' ? requestId.length : 0, true);
  lengths += 4;
  flags |= optional(view, lengths, captured.sessionId, HAS_SESSION);
  lengths += 4;
  flags |= optional(view, lengths, captured.spanId, HAS_SPAN);
  lengths += 4;
  flags |= optional(view, lengths, captured.traceId, HAS_TRACE);
  lengths += 4;
  view.setUint32(lengths, captured.tool.length, true);
  view.setUint32(at + 8, flags, true);
  ring.write(text, at + FIXED, text.length * 2, 'utf16le');
}

function optional(view: DataView, at: number, value: string | undefined, flag: number): number {
  view.setUint32(at, value === undefined ? 0 : value.length, true);
  return value === undefined ? 0 : flag;
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
  return views.view.getUint32(at, true) === WRAP;
}

export function writeWrap(views: RingViews, at: number): void {
  views.view.setUint32(at, WRAP, true);
}

export function decodeRecord(views: RingViews, at: number): DecodedRecord {
  const { view, ring } = views;
  const size = view.getUint32(at, true);
  const ackId = view.getUint32(at + 4, true);
  const flags = view.getUint32(at + 8, true);
  const lengths: number[] = [];
  let chars = 0;
  for (let index = 0; index < 14; index += 1) {
    const length = view.getUint32(at + 48 + index * 4, true);
    lengths.push(length);
    chars += length;
  }
  const text = ring.toString('utf16le', at + FIXED, at + FIXED + chars * 2);
  let from = 0;
  const next = (index: number): string => {
    const piece = text.slice(from, from + lengths[index]!);
    from += lengths[index]!;
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
    durationMs: view.getFloat64(at + 16, true),
    incidentId,
    outcome,
    principal,
    requestId: stringId ?? view.getFloat64(at + 40, true),
    resultBytes: view.getFloat64(at + 32, true),
    sessionId,
    spanId,
    traceId,
    startedAt: view.getFloat64(at + 24, true),
    tool,
    unknownTool: (flags & UNKNOWN_TOOL) !== 0,
    bytes: view.getUint32(at + 12, true),
    ack: undefined,
  };
  return { captured, ackId, size };
}
