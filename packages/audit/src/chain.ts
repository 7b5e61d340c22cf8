import { hash as digest } from 'node:crypto';
import type { CapturedRecord } from './record.js';
import type { AuditRecord, AuditRow, ChainHead } from './types.js';

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
 * Links a captured record after `head` in chain `chainId`: the canonical JSON is put together from
 * the parts serialised at capture with `prevHash` and `seq` between them (their sorted places), hashed,
 * and the line to store is that text with `hash` appended, so parsing it and re-canonicalising
 * without `hash` gives back exactly what was hashed.
 */
export function sealRecord(
  captured: CapturedRecord,
  head: ChainHead | undefined,
  chainId: string,
): SealedRecord {
  const seq = (head?.seq ?? 0) + 1;
  const canonical = `{${captured.pre},"prevHash":"${head?.hash ?? GENESIS_HASH}",${captured.mid},"seq":${seq},${captured.post}}`;
  const hash = hashOfCanonical(canonical);
  return {
    line: `${canonical.slice(0, -1)},"hash":"${hash}"}`,
    row: {
      chainId,
      seq,
      time: captured.time,
      tool: captured.tool,
      outcome: captured.outcome,
      principal: captured.principal,
      caller: captured.caller,
      incidentId: captured.incidentId,
      hash,
    },
  };
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
