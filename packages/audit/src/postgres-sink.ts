import { parseRecordLine } from './chain.js';
import { type AuditTableName, parseTableName } from './pg-table.js';
import type { AuditBatch, AuditQueryable, AuditSink, ChainHead } from './types.js';

export interface PostgresSinkOptions {
  /** A `pg.Pool`, a `pg.Client` or a PGlite instance; the caller owns (and ends) it. */
  client: AuditQueryable;
  /** The table, `name` or `schema.name`. @default 'toolgate_audit' */
  table?: string;
  /** The chain this process writes; replicas sharing one table each need their own. @default 'default' */
  chain?: string;
  /** Create the schema and table when missing. @default true */
  createTable?: boolean;
}

const COLUMNS = 9;

/**
 * A PostgreSQL table, one row per record. `record` holds the exact canonical JSON (type `json`, which
 * keeps the text as written, so the hash still verifies); the other columns copy fields for queries.
 * `(chain, seq)` is the primary key: two processes writing one chain collide loudly instead of
 * interleaving. Grant the writer INSERT and SELECT only.
 */
export function createPostgresSink(options: PostgresSinkOptions): AuditSink {
  const { client } = options;
  const table = parseTableName(options.table ?? 'toolgate_audit');
  const chain = options.chain ?? 'default';
  const createTable = options.createTable ?? true;
  return {
    async head(): Promise<ChainHead | undefined> {
      if (createTable) await ensureTable(client, table);
      const { rows } = await client.query(
        `SELECT record::text AS record FROM ${table.sql} WHERE chain = $1 ORDER BY seq DESC LIMIT 1`,
        [chain],
      );
      const text = (rows[0] as { record?: string } | undefined)?.record;
      if (text === undefined) return undefined;
      const record = parseRecordLine(text);
      if (!record)
        throw new Error(`audit table ${table.sql}: the last record of chain ${chain} is not an audit record`);
      return { seq: record.seq, hash: record.hash };
    },
    async write(batch: AuditBatch): Promise<void> {
      const params: unknown[] = [];
      const rows: string[] = [];
      batch.records.forEach((record, index) => {
        const at = index * COLUMNS;
        rows.push(
          `($${at + 1}, $${at + 2}, $${at + 3}, $${at + 4}, $${at + 5}, $${at + 6}, $${at + 7}, $${at + 8}, $${at + 9}::json)`,
        );
        params.push(
          chain,
          record.seq,
          record.time,
          textColumn(record.tool),
          record.outcome,
          record.principal === undefined ? null : textColumn(record.principal),
          record.incidentId ?? null,
          record.hash,
          batch.lines[index],
        );
      });
      await client.query(
        `INSERT INTO ${table.sql} (chain, seq, time, tool, outcome, principal, incident_id, hash, record) VALUES ${rows.join(', ')}`,
        params,
      );
    },
  };
}

async function ensureTable(client: AuditQueryable, table: AuditTableName): Promise<void> {
  const create = async (): Promise<void> => {
    if (table.schema) await client.query(`CREATE SCHEMA IF NOT EXISTS "${table.schema}"`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${table.sql} (
        chain text NOT NULL,
        seq bigint NOT NULL,
        time timestamptz NOT NULL,
        tool text NOT NULL,
        outcome text NOT NULL,
        principal text,
        incident_id text,
        hash text NOT NULL,
        record json NOT NULL,
        PRIMARY KEY (chain, seq)
      )`,
    );
  };
  try {
    await create();
  } catch (error) {
    // Two processes creating the table at once: IF NOT EXISTS can still race; the loser finds it made.
    const { rows } = await client.query('SELECT to_regclass($1) AS found', [table.sql]);
    if ((rows[0] as { found?: unknown } | undefined)?.found == null) throw error;
  }
}

/** PostgreSQL text refuses NUL; the record column keeps the exact value (JSON escapes it). */
function textColumn(value: string): string {
  return value.includes('\0') ? value.replaceAll('\0', '\uFFFD') : value;
}
