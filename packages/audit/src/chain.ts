import { hash as digest } from 'node:crypto';
import { canonicalJson } from '@toolgate/core';
import type { AuditRecord, ChainHead } from './types.js';

/** The `prevHash` of a chain's first record. */
export const GENESIS_HASH = '0'.repeat(64);

/** A record before it joins the chain. */
export type UnsealedRecord = Omit<AuditRecord, 'seq' | 'prevHash' | 'hash'>;

/** A record on the chain and its exact JSON line. */
export interface SealedRecord {
  readonly record: AuditRecord;
  readonly line: string;
}

/** SHA-256 (hex) of a record's canonical JSON without its `hash`: what `hash` must equal. */
export function hashOfCanonical(canonical: string): string {
  return digest('sha256', canonical, 'hex');
}

/** Every field a record may have, in canonical (sorted) order. */
const RECORD_KEYS = [
  'aborted',
  'args',
  'clientId',
  'decisions',
  'durationMs',
  'incidentId',
  'outcome',
  'prevHash',
  'principal',
  'requestId',
  'resultBytes',
  'seq',
  'sessionId',
  'spanId',
  'time',
  'tool',
  'traceId',
  'unknownTool',
] as const satisfies readonly (keyof AuditRecord)[];

/**
 * `canonicalJson(record)` without sorting the keys of a record's fixed top level on every call (the
 * writer's hottest step): the same text, since RECORD_KEYS is that sorted order. Strings and finite
 * numbers are written as canonicalJson writes them; everything else goes through it.
 */
function canonicalRecord(record: Omit<AuditRecord, 'hash'>, argsText: string): string {
  let out = '';
  for (const key of RECORD_KEYS) {
    const value: unknown = record[key];
    if (value === undefined) continue;
    const text =
      key === 'args'
        ? argsText
        : typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value))
          ? JSON.stringify(value)
          : canonicalJson(value);
    out += `${out === '' ? '{' : ','}"${key}":${text}`;
  }
  return `${out}}`;
}

/**
 * Links a record after `head` (completing the object given): sets `seq` and `prevHash`, hashes its canonical form and returns the
 * line to store. The line is that canonical text with `hash` appended, so parsing it and
 * re-canonicalising without `hash` gives back exactly what was hashed.
 */
export function sealRecord(
  unsealed: UnsealedRecord,
  head: ChainHead | undefined,
  maxArgsChars = Number.POSITIVE_INFINITY,
): SealedRecord {
  // Completed in place (the unsealed record is the writer's own fresh object): no copies per record.
  const record = unsealed as AuditRecord;
  record.seq = (head?.seq ?? 0) + 1;
  record.prevHash = head?.hash ?? GENESIS_HASH;
  let argsText = canonicalJson(record.args);
  // Keeps a hostile megabyte argument from becoming a megabyte record; everything else stays.
  if (argsText.length > maxArgsChars) {
    record.args = `[Truncated: ${argsText.length} characters]`;
    argsText = JSON.stringify(record.args);
  }
  const canonical = canonicalRecord(record, argsText);
  record.hash = hashOfCanonical(canonical);
  return { record, line: `${canonical.slice(0, -1)},"hash":"${record.hash}"}` };
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
  const isHash = (text: unknown): boolean => typeof text === 'string' && /^[0-9a-f]{64}$/.test(text);
  if (!Number.isSafeInteger(record.seq) || !isHash(record.hash) || !isHash(record.prevHash)) return undefined;
  return record as AuditRecord;
}
