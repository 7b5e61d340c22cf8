import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { canonicalJson } from '@toolgate/core';
import { GENESIS_HASH, hashOfCanonical, parseRecordLine } from './chain.js';
import { parseTableName } from './pg-table.js';
import type { AuditQueryable, AuditRecord } from './types.js';

/** What the verifier found: an intact chain, or the first broken link. */
export type VerifyResult =
  | {
      readonly intact: true;
      /** Records checked. */
      readonly records: number;
      /** The last record's hash: store it elsewhere to detect a cut-off tail later. */
      readonly head: string | undefined;
    }
  | {
      readonly intact: false;
      /** Records checked before the break. */
      readonly records: number;
      /** 1-based number of the first record that does not verify (line number in a file). */
      readonly brokenAt: number;
      readonly reason: string;
    };

/**
 * Checks a chain record by record: each record must hash to its `hash`, link to the one before by
 * `prevHash` and continue its `seq`; the first must start the chain. Reports the first failure.
 */
export async function verifyAuditLines(
  lines: Iterable<string> | AsyncIterable<string>,
): Promise<VerifyResult> {
  let previous: AuditRecord | undefined;
  let count = 0;
  for await (const line of lines) {
    const number = count + 1;
    const reason = checkLine(line, number, previous);
    if (typeof reason === 'string') return { intact: false, records: count, brokenAt: number, reason };
    previous = reason;
    count = number;
  }
  return { intact: true, records: count, head: previous?.hash };
}

/** `verifyAuditLines` over a JSON-lines file written by `createFileSink`, streamed. */
export async function verifyAuditFile(path: string): Promise<VerifyResult> {
  const stream = createReadStream(path, { encoding: 'utf8' });
  const lines = createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY });
  try {
    return await verifyAuditLines(lines);
  } finally {
    lines.close();
    stream.destroy();
  }
}

export interface VerifyTableOptions {
  client: AuditQueryable;
  /** @default 'toolgate_audit' */
  table?: string;
  /** @default 'default' */
  chain?: string;
}

const PAGE = 1000;

/** `verifyAuditLines` over a chain in a table written by `createPostgresSink`, read in pages by seq. */
export async function verifyAuditTable(options: VerifyTableOptions): Promise<VerifyResult> {
  const table = parseTableName(options.table ?? 'toolgate_audit');
  const chain = options.chain ?? 'default';
  const { client } = options;
  async function* pages(): AsyncGenerator<string> {
    let after = '0';
    for (;;) {
      const { rows } = await client.query(
        // The page key is aliased apart from `seq`: ORDER BY seq must sort the bigint column, not text.
        `SELECT seq::text AS page_key, record::text AS record FROM ${table.sql}
          WHERE chain = $1 AND seq > $2::bigint ORDER BY seq LIMIT ${PAGE}`,
        [chain, after],
      );
      for (const row of rows as { page_key: string; record: string }[]) yield row.record;
      if (rows.length < PAGE) return;
      after = (rows.at(-1) as { page_key: string }).page_key;
    }
  }
  return verifyAuditLines(pages());
}

function checkLine(line: string, number: number, previous: AuditRecord | undefined): AuditRecord | string {
  const record = parseRecordLine(line);
  if (!record) return `record ${number} is not an audit record (not JSON, or no seq, hash and prevHash)`;
  const { hash, ...rest } = record;
  if (hashOfCanonical(canonicalJson(rest)) !== hash) {
    return `record ${number} (seq ${record.seq}) was altered: its content does not match its hash`;
  }
  if (!previous) {
    if (record.prevHash !== GENESIS_HASH || record.seq !== 1) {
      return `record ${number} (seq ${record.seq}) does not start the chain: the records before it were deleted`;
    }
    return record;
  }
  if (record.prevHash !== previous.hash || record.seq !== previous.seq + 1) {
    if (record.seq <= previous.seq) {
      return `record ${number} is out of order: seq ${record.seq} after seq ${previous.seq} (a record was inserted or moved)`;
    }
    if (record.seq > previous.seq + 1) {
      return `record ${number} does not follow record ${number - 1}: seq jumps from ${previous.seq} to ${record.seq} (a record was deleted or moved)`;
    }
    return `record ${number} (seq ${record.seq}) does not link to record ${number - 1}: its prevHash differs (a record was inserted or replaced)`;
  }
  return record;
}
