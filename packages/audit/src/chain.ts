import { hash as digest } from 'node:crypto';
import { canonicalJson } from '@toolgate/core';
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
 * Links a captured record after `head` in chain `chainId` (see `canonicalOf`), and gives its row.
 * The writer seals whole batches with `canonicalOf` directly and builds rows only when a sink asks.
 */
export function sealRecord(
  captured: CapturedRecord,
  head: ChainHead | undefined,
  chainId: string,
): SealedRecord {
  const seq = (head?.seq ?? 0) + 1;
  const canonical = canonicalOf(captured, head?.hash ?? GENESIS_HASH, seq, chainIdField(chainId));
  const hash = hashOfCanonical(canonical);
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
 * The pieces go into one reused array joined once: the text comes out flat (no tree of partial
 * strings to allocate, then walk again when it is hashed or encoded), and the strings most records
 * repeat (caller, tool, outcome, session, principal) are quoted once (`quoted`).
 */
export function canonicalOf(
  captured: CapturedRecord,
  prevHash: string,
  seq: number,
  chainField: string,
  after?: string,
): string {
  const p = pieces;
  let n = 0;
  try {
    p[n++] = captured.aborted ? '{"aborted":true,' : '{';
    if (after !== undefined) {
      p[n++] = '"after":';
      p[n++] = after;
      p[n++] = ',';
    }
    p[n++] = '"args":';
    p[n++] = captured.args;
    if (captured.bindings !== undefined) {
      p[n++] = ',"bindings":';
      p[n++] = captured.bindings;
    }
    p[n++] = ',"caller":';
    p[n++] = quoted(captured.caller);
    p[n++] = chainField;
    if (captured.clientId !== undefined) {
      p[n++] = ',"clientId":';
      p[n++] = quoted(captured.clientId);
    }
    p[n++] = ',"decisions":';
    p[n++] = captured.decisions;
    p[n++] = ',"durationMs":';
    p[n++] = JSON.stringify(Math.round(captured.durationMs * 1000) / 1000);
    if (captured.incidentId !== undefined) {
      p[n++] = ',"incidentId":';
      p[n++] = JSON.stringify(captured.incidentId);
    }
    p[n++] = ',"outcome":';
    p[n++] = quoted(captured.outcome);
    p[n++] = ',"prevHash":"';
    p[n++] = prevHash;
    if (captured.principal !== undefined) {
      p[n++] = '","principal":';
      p[n++] = quoted(captured.principal);
      p[n++] = ',"requestId":';
    } else {
      p[n++] = '","requestId":';
    }
    const { requestId } = captured;
    p[n++] = typeof requestId === 'number' ? JSON.stringify(requestId) : quoted(requestId);
    p[n++] = ',"resultBytes":';
    p[n++] = JSON.stringify(captured.resultBytes);
    p[n++] = ',"seq":';
    p[n++] = JSON.stringify(seq);
    if (captured.sessionId !== undefined) {
      p[n++] = ',"sessionId":';
      p[n++] = quoted(captured.sessionId);
    }
    if (captured.spanId !== undefined) {
      p[n++] = ',"spanId":';
      p[n++] = JSON.stringify(captured.spanId);
    }
    p[n++] = ',"time":"';
    p[n++] = isoTime(captured.startedAt);
    p[n++] = '","tool":';
    p[n++] = quoted(captured.tool);
    if (captured.traceId !== undefined) {
      p[n++] = ',"traceId":';
      p[n++] = JSON.stringify(captured.traceId);
    }
    p[n++] = captured.unknownTool ? ',"unknownTool":true}' : '}';
    return p.join('');
  } finally {
    // The array keeps its length (no backing store given up and grown again per record): the slots
    // this record used are emptied again, so every slot past a record's last piece is always empty
    // and join skips nothing but empty strings.
    for (let index = 0; index < n; index += 1) p[index] = '';
  }
}

/** canonicalOf's most pieces (every optional field present), and the array it fills for each record. */
const PIECES = 48;
const pieces: string[] = new Array<string>(PIECES).fill('');

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
