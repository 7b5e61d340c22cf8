import { hash as digest } from 'node:crypto';
import { canonicalJson } from '@toolgate/core';
import type { CapturedRecord } from './record.js';
import type { AuditRecord, AuditRow, ChainAnchor, ChainHead } from './types.js';

/** The `prevHash` of a chain's first record. */
export const GENESIS_HASH = '0'.repeat(64);

/** A record on the chain: its exact JSON line and the row a sink may copy into columns. */
export interface SealedRecord {
  readonly line: string;
  readonly row: AuditRow;
}

/** SHA-256 (hex) of a record's canonical JSON without its `hash`: what `hash` must equal. */
export function hashOfCanonical(canonical: string): string {
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
 */
export function canonicalOf(
  captured: CapturedRecord,
  prevHash: string,
  seq: number,
  chainField: string,
  after?: string,
): string {
  let body = captured.aborted ? '{"aborted":true,' : '{';
  if (after !== undefined) body += `"after":${after},`;
  body += `"args":${captured.args}`;
  if (captured.bindings !== undefined) body += `,"bindings":${captured.bindings}`;
  body += `,"caller":${JSON.stringify(captured.caller)}${chainField}`;
  if (captured.clientId !== undefined) body += `,"clientId":${JSON.stringify(captured.clientId)}`;
  body += `,"decisions":${captured.decisions},"durationMs":${JSON.stringify(Math.round(captured.durationMs * 1000) / 1000)}`;
  if (captured.incidentId !== undefined) body += `,"incidentId":${JSON.stringify(captured.incidentId)}`;
  body += `,"outcome":${JSON.stringify(captured.outcome)},"prevHash":"${prevHash}"`;
  if (captured.principal !== undefined) body += `,"principal":${JSON.stringify(captured.principal)}`;
  body += `,"requestId":${JSON.stringify(captured.requestId)},"resultBytes":${captured.resultBytes},"seq":${seq}`;
  if (captured.sessionId !== undefined) body += `,"sessionId":${JSON.stringify(captured.sessionId)}`;
  if (captured.spanId !== undefined) body += `,"spanId":${JSON.stringify(captured.spanId)}`;
  body += `,"time":"${isoTime(captured.startedAt)}","tool":${JSON.stringify(captured.tool)}`;
  if (captured.traceId !== undefined) body += `,"traceId":${JSON.stringify(captured.traceId)}`;
  return captured.unknownTool ? `${body},"unknownTool":true}` : `${body}}`;
}

/**
 * The stored line: the canonical JSON with `hash` appended as its last (sorted) key. Hashing has
 * flattened `canonical`, so the slice shares its characters instead of walking the pieces again.
 */
export function lineOf(canonical: string, hash: string): string {
  return `${canonical.slice(0, -1)},"hash":"${hash}"}`;
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
