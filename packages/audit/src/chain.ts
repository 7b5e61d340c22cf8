import { hash as digest } from 'node:crypto';
import { canonicalJson } from '@toolgate/core';
import type { ChainKey } from './chain-key.js';
import { createQuoted } from './quoted.js';
import type { CapturedRecord } from './record.js';
import type { AuditRecord, AuditRow, ChainAnchor, ChainHead } from './types.js';

/** The `prevHash` of a chain's first record. */
export const GENESIS_HASH = '0'.repeat(64);

/** A record on the chain: its exact JSON line and the row a sink may copy into columns. */
export interface SealedRecord {
  readonly line: string;
  readonly row: AuditRow;
}

/**
 * SHA-256 (hex) of a record's canonical JSON without its `hash`: what `hash` must equal. The text, or
 * its UTF-8 bytes (the writer hashes what it encoded into the batch): the same hash either way.
 */
export function hashOfCanonical(canonical: string | Uint8Array): string {
  return digest('sha256', canonical, 'hex');
}

/**
 * Links a captured record after `head` in chain `chainId` (see `canonicalOf`), and gives its row;
 * with `key`, the record names it and is hashed under it. The writer seals whole batches with
 * `canonicalOf` directly and builds rows only when a sink asks.
 */
export function sealRecord(
  captured: CapturedRecord,
  head: ChainHead | undefined,
  chainId: string,
  key?: ChainKey,
): SealedRecord {
  const seq = (head?.seq ?? 0) + 1;
  const prevHash = head?.hash ?? GENESIS_HASH;
  const canonical = canonicalOf(captured, prevHash, seq, chainIdField(chainId), undefined, key?.field);
  const hash = key === undefined ? hashOfCanonical(canonical) : key.hash(canonical);
  return { line: lineOf(canonical, hash), row: rowOf(captured, chainId, seq, hash) };
}

/** A chain anchor as canonical JSON, the value of a first record's `after` (its three fields only). */
export function anchorJson({ chainId, seq, hash }: ChainAnchor): string {
  return canonicalJson({ chainId, seq, hash });
}

/** Whether a value is a chain anchor: a chain id, a positive safe-integer seq and a SHA-256 hex hash. */
export function isChainAnchor(value: unknown): value is ChainAnchor {
  if (typeof value !== 'object' || value === null) return false;
  const { chainId, seq, hash } = value as Partial<ChainAnchor>;
  return (
    typeof chainId === 'string' &&
    Number.isSafeInteger(seq) &&
    (seq as number) >= 1 &&
    typeof hash === 'string' &&
    HASH.test(hash)
  );
}

const HASH = /^[0-9a-f]{64}$/;

/** `,"chainId":"..."` for a chain: the one field every record of a writer shares, escaped once. */
export function chainIdField(chainId: string): string {
  return `,"chainId":${JSON.stringify(chainId)}`;
}

/**
 * A record's canonical JSON without `hash`: the fields in sorted key order (`aborted`, `args`,
 * `bindings`, ..., `unknownTool`), exactly what core's canonicalJson gives for that record. Hash it,
 * then store `lineOf(canonical, hash)`, so parsing the line and re-canonicalising without `hash`
 * gives back exactly what was hashed.
 *
 * The pieces are concatenated: V8 keeps the result as a rope and flattens it once, when the writer
 * encodes it into the batch's bytes (measured: 1.1-1.35 µs a record to build and encode, against
 * 1.6-1.7 µs joining a reused array of the pieces). Between the values that change from call to call
 * (args, duration, hash, request id, sizes, seq, time), the fields come in runs that most records
 * repeat (caller to decisions, outcome, principal, session, tool): each run's text is kept from the
 * record before while its values are the same (`CallerRun`, `FieldRun`), so a record is a dozen
 * pieces, not 35.
 *
 * `keyField` (a keyed chain's `,"keyId":"..."`, see `ChainKey`) goes in its sorted place, after
 * `incidentId`.
 */
export function canonicalOf(
  captured: CapturedRecord,
  prevHash: string,
  seq: number,
  chainField: string,
  after?: string,
  keyField?: string,
): string {
  let s: string;
  if (after === undefined) s = captured.aborted ? '{"aborted":true,"args":' : '{"args":';
  else s = `${captured.aborted ? '{"aborted":true,' : '{'}"after":${after},"args":`;
  s += captured.args;
  if (captured.argsPreview !== undefined) {
    s += ',"argsPreview":';
    s += captured.argsPreview;
  }
  if (captured.bindings !== undefined) {
    s += ',"bindings":';
    s += captured.bindings;
  }
  s += callerRun.text(captured, chainField);
  s += durationText(captured.durationMs);
  if (captured.incidentId !== undefined) {
    s += ',"incidentId":';
    s += JSON.stringify(captured.incidentId);
  }
  if (keyField !== undefined) s += keyField;
  s += outcomeRun.text(captured.outcome);
  s += prevHash;
  s += principalRun.text(captured.principal);
  const { requestId } = captured;
  s += typeof requestId === 'number' ? numberJson(requestId) : quoted(requestId);
  s += ',"resultBytes":';
  s += String(captured.resultBytes);
  s += ',"seq":';
  s += String(seq);
  if (captured.spanId === undefined) s += sessionTimeRun.text(captured.sessionId);
  else {
    s += sessionRun.text(captured.sessionId);
    s += ',"spanId":';
    s += JSON.stringify(captured.spanId);
    s += ',"time":"';
  }
  s += isoTime(captured.startedAt);
  s += toolRun.text(captured.tool);
  if (captured.traceId !== undefined) {
    s += ',"traceId":';
    s += JSON.stringify(captured.traceId);
  }
  s += captured.unknownTool ? ',"unknownTool":true}' : '}';
  return s;
}

/**
 * The run of fields from `caller` to the `durationMs` key, kept as text with the values it was made
 * from: the next record reuses it while its values are the same (compared as strings: equal values
 * give equal text). One per process, like `quoted`; every writer's records pass through it.
 */
class CallerRun {
  #caller: string | undefined;
  #clientId: string | undefined;
  #decisions: string | undefined;
  #chainField: string | undefined;
  #text = '';

  /** `,"caller":...,"chainId":...[,"clientId":...],"decisions":[...],"durationMs":` */
  text(captured: CapturedRecord, chainField: string): string {
    const { caller, clientId, decisions } = captured;
    if (
      caller !== this.#caller ||
      clientId !== this.#clientId ||
      decisions !== this.#decisions ||
      chainField !== this.#chainField
    ) {
      this.#text =
        clientId === undefined
          ? flat(',"caller":', quoted(caller), chainField, ',"decisions":', decisions, ',"durationMs":')
          : flat(
              ',"caller":',
              quoted(caller),
              chainField,
              ',"clientId":',
              quoted(clientId),
              ',"decisions":',
              decisions,
              ',"durationMs":',
            );
      this.#caller = caller;
      this.#clientId = clientId;
      this.#decisions = decisions;
      this.#chainField = chainField;
    }
    return this.#text;
  }
}

const UNSET = Symbol('unset');

/**
 * A one-field run: `prefix`, the value's JSON and `suffix`, or `absent` for a record without the
 * field (nothing unless given); kept for the last value like `CallerRun`.
 */
class FieldRun {
  #value: string | undefined | typeof UNSET = UNSET;
  #text = '';
  readonly #prefix: string;
  readonly #suffix: string;
  readonly #absent: string;

  constructor(prefix: string, suffix: string, absent = '') {
    this.#prefix = prefix;
    this.#suffix = suffix;
    this.#absent = absent;
  }

  text(value: string | undefined): string {
    if (value !== this.#value) {
      this.#text = value === undefined ? this.#absent : flat(this.#prefix, quoted(value), this.#suffix);
      this.#value = value;
    }
    return this.#text;
  }
}

const callerRun = new CallerRun();
/** `,"outcome":"...","prevHash":"` (every record has an outcome). */
const outcomeRun = new FieldRun(',"outcome":', ',"prevHash":"');
/** `"[,"principal":...],"requestId":`: closes the prevHash before it. */
const principalRun = new FieldRun('","principal":', ',"requestId":', '","requestId":');
/** `,"sessionId":...`, or nothing: before a `spanId`. */
const sessionRun = new FieldRun(',"sessionId":', '');
/** `[,"sessionId":...],"time":"`: a record without a `spanId` opens its time in the same run. */
const sessionTimeRun = new FieldRun(',"sessionId":', ',"time":"', ',"time":"');
/** `","tool":...`: closes the time before it (every record names a tool). */
const toolRun = new FieldRun('","tool":', '');

/** The pieces as one flat string (a join, where `+` would keep a rope): a run is one piece of a record. */
function flat(...pieces: string[]): string {
  return pieces.join('');
}

/** Durations below this many ms (11 days) are written from their integer microseconds. */
const DURATION_DIGITS_MAX_MS = 1e9;

/**
 * `JSON.stringify(Math.round(ms * 1000) / 1000)`, the duration rounded to the microsecond, written
 * from the integer microseconds: below 1e9 ms a double is exact to far less than a microsecond, so the
 * shortest text that reads back as that double is the decimal with its trailing zeros dropped, which
 * is what this writes (and JSON.stringify's number formatting costs more). Larger, negative or
 * non-finite values go through JSON.stringify itself.
 */
export function durationText(ms: number): string {
  const micros = Math.round(ms * 1000);
  if (!(micros >= 0 && micros < DURATION_DIGITS_MAX_MS * 1000)) return JSON.stringify(micros / 1000);
  const whole = Math.floor(micros / 1000);
  const fraction = micros - whole * 1000;
  if (fraction === 0) return String(whole);
  if (fraction % 100 === 0) return `${whole}.${fraction / 100}`;
  if (fraction % 10 === 0) return `${whole}.${fraction < 100 ? '0' : ''}${fraction / 10}`;
  return `${whole}.${fraction < 10 ? '00' : fraction < 100 ? '0' : ''}${fraction}`;
}

/**
 * `JSON.stringify(value)` for a number: a finite number's JSON is its `String()` (`-0` gives `0` both
 * ways), which V8 formats without the call into the runtime JSON.stringify makes.
 */
function numberJson(value: number): string {
  return Number.isFinite(value) ? String(value) : 'null';
}

/** Quoted strings remembered (a writer sees few distinct callers, tools and sessions); longer ones are not kept. */
const quoted = createQuoted(4096, 256);

/**
 * The stored line: the canonical JSON with `hash` appended as its last (sorted) key. Hashing has
 * flattened `canonical`, so the slice shares its characters instead of walking the pieces again.
 */
export function lineOf(canonical: string, hash: string): string {
  return `${canonical.slice(0, -1)}${hashTail(hash)}`;
}

/** What follows a canonical JSON's last field in its stored line: `hash`, the last sorted key, and the closing brace. */
export function hashTail(hash: string): string {
  return `,"hash":"${hash}"}`;
}

/** The columns a sink copies from a sealed record. */
export function rowOf(captured: CapturedRecord, chainId: string, seq: number, hash: string): AuditRow {
  return {
    chainId,
    seq,
    time: isoTime(captured.startedAt),
    tool: captured.tool,
    outcome: captured.outcome,
    principal: captured.principal,
    caller: captured.caller,
    incidentId: captured.incidentId,
    hash,
  };
}

let lastSecond = Number.NaN;
let secondPrefix = '';

/**
 * ISO time of a start (`2026-11-30T20:58:42.123Z`): the text up to the second is formatted once per
 * second, the milliseconds appended (a busy server stamps most records in a new millisecond).
 */
export function isoTime(time: number): string {
  const ms = Math.floor(time);
  const second = Math.floor(ms / 1000);
  if (second !== lastSecond) {
    lastSecond = second;
    secondPrefix = new Date(second * 1000).toISOString().slice(0, 20);
  }
  const milli = ms - second * 1000;
  return `${secondPrefix}${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z`;
}

/** A parsed line that has the chain fields, or undefined when it is not an audit record. */
export function parseRecordLine(line: string): AuditRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const record = value as Partial<AuditRecord>;
  const isHash = (text: unknown): boolean => typeof text === 'string' && HASH.test(text);
  if (!Number.isSafeInteger(record.seq) || !isHash(record.hash) || !isHash(record.prevHash)) return undefined;
  return record as AuditRecord;
}

/**
 * Whether a line that is no record is the start of one, left by a write cut short (a crash mid-write):
 * a record's line is one JSON object without whitespace, and no proper prefix of it parses. It holds
 * no record, so passing over it hides none: the record after it must still link to the one before.
 */
export function isCutShort(line: string): boolean {
  if (line.charCodeAt(0) !== 0x7b) return false;
  try {
    JSON.parse(line);
    return false;
  } catch {
    return true;
  }
}
