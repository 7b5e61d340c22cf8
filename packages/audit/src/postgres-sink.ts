import { parseRecordLine } from './chain.js';
import { type AuditTableName, parseTableName } from './pg-table.js';
import { AuditSinkError } from './sink-errors.js';
import type { AuditBatch, AuditQueryable, AuditSink, ChainAnchor, ChainHead } from './types.js';

export interface PostgresSinkOptions {
  /** A `pg.Pool`, a `pg.Client` or a PGlite instance; the caller owns (and ends) it. */
  client: AuditQueryable;
  /** The table, `name` or `schema.name`. @default 'toolgate_audit' */
  table?: string;
  /** Create the schema and table when missing. @default true */
  createTable?: boolean;
}

/**
 * A PostgreSQL table, one row per record. `record` holds the exact canonical JSON (type `json`, which
 * keeps the text as written, so the hash still verifies); the other columns copy fields for queries
 * (the verifier checks them against the record). `(chain, seq)` is the primary key; `chain` is the
 * writer's chain id, so replicas sharing a table never touch each other's rows.
 *
 * A batch is one INSERT of `unnest`ed arrays and newline-joined texts (one round trip, ten
 * parameters, whatever the batch size) with ON CONFLICT DO NOTHING. When a retry finds rows already there (the INSERT committed but
 * its reply was lost), it compares their hashes with the batch's: equal means the batch is stored and
 * the writer moves on; different means another writer holds this chain, a permanent error.
 * Grant the writer INSERT and SELECT only.
 */
export function createPostgresSink(options: PostgresSinkOptions): AuditSink {
  const { client } = options;
  const table = parseTableName(options.table ?? 'toolgate_audit');
  const createTable = options.createTable ?? true;
  // Seqs of a batch are consecutive, so one first seq and the row's ordinality give them all. The
  // records, hashes and times never hold a raw newline (JSON escapes it; the others are hex and ISO
  // times, both made here), so each travels as one newline-joined text split on the server: pg's
  // array-literal escaping of 1,000s of quote-heavy JSON lines cost more than the INSERT itself.
  // Other strings (tool, outcome, principal, caller, incident id) stay arrays.
  const insert = `INSERT INTO ${table.sql} (chain, seq, time, tool, outcome, principal, caller, incident_id, hash, record)
    SELECT $1::text, $2::bigint + u.n - 1, t::timestamptz, tl, o, p, c, i, h, r::json
      FROM unnest(string_to_array($3::text, E'\\n'), $4::text[], $5::text[], $6::text[], $7::text[],
                  $8::text[], string_to_array($9::text, E'\\n'), string_to_array($10::text, E'\\n')) WITH ORDINALITY
        AS u(t, tl, o, p, c, i, h, r, n)
    ON CONFLICT (chain, seq) DO NOTHING
    RETURNING 1`;
  return {
    async head(chainId: string): Promise<ChainHead | undefined> {
      if (createTable) await ensureTable(client, table);
      // One round trip: the chain's last record, and whether the table has the caller column (a
      // table made by an earlier version gets it added once, below).
      const { rows } = await client.query(
        `SELECT (SELECT record::text FROM ${table.sql} WHERE chain = $1 ORDER BY seq DESC LIMIT 1) AS record,
            EXISTS (SELECT 1 FROM pg_attribute
              WHERE attrelid = to_regclass($2) AND attname = 'caller' AND NOT attisdropped) AS has_caller`,
        [chainId, table.sql],
      );
      if (createTable && (rows[0] as { has_caller?: boolean } | undefined)?.has_caller === false) {
        // Only when missing: ALTER TABLE needs the table's owner, and a writer granted INSERT and
        // SELECT must not need that on every start. (With createTable: false, add it yourself.)
        await client.query(`ALTER TABLE ${table.sql} ADD COLUMN IF NOT EXISTS caller text`);
      }
      const text = (rows[0] as { record?: string | null } | undefined)?.record;
      if (text === undefined || text === null) return undefined;
      const record = parseRecordLine(text);
      if (!record)
        throw new AuditSinkError(
          `audit table ${table.sql}: the last record of chain ${chainId} is not an audit record`,
          { permanent: true },
        );
      return { seq: record.seq, hash: record.hash };
    },
    async anchor(chainId: string): Promise<ChainAnchor | undefined> {
      // The newest record of any other chain (a scan of the table, once per writer start).
      const { rows } = await client.query(
        `SELECT chain, seq::text AS seq, hash FROM ${table.sql} WHERE chain <> $1
          ORDER BY time DESC, seq DESC LIMIT 1`,
        [chainId],
      );
      const row = rows[0] as { chain: string; seq: string; hash: string } | undefined;
      return row === undefined ? undefined : { chainId: row.chain, seq: Number(row.seq), hash: row.hash };
    },
    async write(batch: AuditBatch) {
      const { rows: batchRows, lines } = batch;
      const n = batchRows.length;
      const seqs = new Array<string>(n);
      const tools = new Array<string>(n);
      const principals = new Array<string | null>(n);
      const callers = new Array<string | null>(n);
      const incidents = new Array<string | null>(n);
      let times = '';
      const outcomes = new Array<string>(n);
      let hashes = '';
      for (let index = 0; index < n; index += 1) {
        const row = batchRows[index]!;
        const separator = index === 0 ? '' : '\n';
        seqs[index] = String(row.seq);
        times += separator + row.time;
        tools[index] = textColumn(row.tool);
        outcomes[index] = textColumn(row.outcome);
        principals[index] = row.principal === undefined ? null : textColumn(row.principal);
        callers[index] = textColumn(row.caller);
        incidents[index] = row.incidentId === undefined ? null : textColumn(row.incidentId);
        hashes += separator + row.hash;
      }
      const { rows } = await client.query(insert, [
        batch.chainId,
        seqs[0],
        times,
        tools,
        outcomes,
        principals,
        callers,
        incidents,
        hashes,
        lines.join('\n'),
      ]);
      if (rows.length === n) return undefined;
      // Some rows were there already: this batch committed before (a lost reply), or another writer
      // is using this chain id.
      const stored = await client.query(
        `SELECT seq::text AS seq, hash FROM ${table.sql} WHERE chain = $1 AND seq = ANY($2::bigint[])`,
        [batch.chainId, seqs],
      );
      const found = new Map(
        (stored.rows as { seq: string; hash: string }[]).map((row) => [row.seq, row.hash]),
      );
      for (let index = 0; index < n; index += 1) {
        const hash = found.get(seqs[index]!);
        if (hash !== batchRows[index]!.hash) {
          throw new AuditSinkError(
            `audit table ${table.sql}: chain ${batch.chainId} seq ${seqs[index]} holds another record (hash ${hash ?? 'none'}); another writer uses this chain id`,
            { permanent: true },
          );
        }
      }
      return { alreadyStored: true };
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
        caller text,
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
export function textColumn(value: string): string {
  return value.includes('\0') ? value.replaceAll('\0', '\uFFFD') : value;
}
