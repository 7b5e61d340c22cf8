import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { isAbortError, withDeadline } from '@toolgate/core';
import copyStreams from 'pg-copy-streams';
import { doneWithBytesWhenSettled } from './batch-bytes.js';
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
  /**
   * Store each batch with one `COPY ... FROM STDIN` when `client` is node-postgres (a `pg.Pool` or
   * `pg.Client`); other clients (PGlite, wrappers) always use the INSERT. COPY needs the same
   * INSERT privilege. @default true
   */
  copy?: boolean;
  /**
   * With a `pg.Pool`: how long one statement may take (a batch's COPY or INSERT, the set-up and head
   * read at start) before it counts as a transient failure. Its connection is then discarded and the
   * writer retries the batch on a new one, so a silent partition (no reset) costs this long rather
   * than the kernel's (about 15 minutes on Linux, or never when only the reply is lost). The server
   * process of a discarded connection, if still there with that statement, is ended
   * (`pg_terminate_backend`) before the next statement, so rows it holds uncommitted cannot block
   * the retry. @default 30000
   */
  timeoutMs?: number;
}

/**
 * A PostgreSQL table, one row per record. `record` holds the exact canonical JSON (type `json`, which
 * keeps the text as written, so the hash still verifies); the other columns copy fields for queries
 * (the verifier checks them against the record). `(chain, seq)` is the primary key; `chain` is the
 * writer's chain id, so replicas sharing a table never touch each other's rows.
 *
 * With node-postgres a batch is one `COPY ... FROM STDIN` (text format, built from the batch's
 * bytes). Other clients use one INSERT for every batch: `unnest`ed arrays and newline-joined texts
 * (one round trip, ten parameters, whatever the batch size). Either is one statement, so a batch is
 * stored whole or not at all: a row of it already there fails the whole statement (a unique
 * violation), which leaves none of its rows. The sink then reads the hashes stored at the batch's
 * seqs: all equal to the batch's means the batch committed before but its reply was lost (the writer
 * moves on); any other means another writer holds this chain, a permanent error, and its chain keeps
 * every row it had (an ON CONFLICT DO NOTHING here once stored the rows that did not collide, breaking
 * the chain of both writers).
 * Grant the writer INSERT and SELECT only.
 */
export function createPostgresSink(options: PostgresSinkOptions): AuditSink {
  const { client } = options;
  const table = parseTableName(options.table ?? 'toolgate_audit');
  const createTable = options.createTable ?? true;
  const target = copyTargetOf(client);
  const copyTarget = options.copy === false ? undefined : target;
  const timeoutMs = options.timeoutMs ?? 30_000;
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new RangeError('createPostgresSink: timeoutMs must be a positive number');
  }
  const lending: Lending | undefined =
    target?.pool === undefined ? undefined : { pool: target.pool, timeoutMs, table: table.sql, stale: [] };
  // Through a pool, each statement runs on a lent connection under the deadline; any other client as given.
  const query: AuditQueryable['query'] =
    lending === undefined
      ? (text, params) => client.query(text, params)
      : (text, params) => onLentConnection(lending, text, (lent) => lent.query(text, params));
  const copy = `COPY ${table.sql} (chain, seq, time, tool, outcome, principal, caller, incident_id, hash, record) FROM STDIN`;
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
    RETURNING 1`;
  // Done with a batch's bytes once write() settles: COPY's payload and the INSERT's text are copies.
  return doneWithBytesWhenSettled({
    async head(chainId: string): Promise<ChainHead | undefined> {
      if (createTable) await ensureTable(query, table);
      // One round trip: the chain's last record, and whether the table has the caller column (a
      // table made by an earlier version gets it added once, below).
      const { rows } = await query(
        `SELECT (SELECT record::text FROM ${table.sql} WHERE chain = $1 ORDER BY seq DESC LIMIT 1) AS record,
            EXISTS (SELECT 1 FROM pg_attribute
              WHERE attrelid = to_regclass($2) AND attname = 'caller' AND NOT attisdropped) AS has_caller`,
        [chainId, table.sql],
      );
      if (createTable && (rows[0] as { has_caller?: boolean } | undefined)?.has_caller === false) {
        // Only when missing: ALTER TABLE needs the table's owner, and a writer granted INSERT and
        // SELECT must not need that on every start. (With createTable: false, add it yourself.)
        await query(`ALTER TABLE ${table.sql} ADD COLUMN IF NOT EXISTS caller text`);
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
      const { rows } = await query(
        `SELECT chain, seq::text AS seq, hash FROM ${table.sql} WHERE chain <> $1
          ORDER BY time DESC, seq DESC LIMIT 1`,
        [chainId],
      );
      const row = rows[0] as { chain: string; seq: string; hash: string } | undefined;
      return row === undefined ? undefined : { chainId: row.chain, seq: Number(row.seq), hash: row.hash };
    },
    async write(batch: AuditBatch) {
      if (batch.rows.length === 0) return undefined;
      try {
        const copied = copyTarget === undefined ? 0 : await copyBatch(copyTarget, lending, copy, batch);
        if (copied !== batch.rows.length) await insertBatch(batch);
        return undefined;
      } catch (error) {
        // 23505: a row of the batch is there already, so the statement stored none of them. The rows
        // stored at its seqs say whether it is this batch (stored before its reply was lost) or
        // another writer's.
        if ((error as { code?: unknown }).code !== '23505') throw error;
      }
      return storedBefore(batch);
    },
  });

  /** One INSERT of the whole batch: every row, or (an error) none. */
  async function insertBatch(batch: AuditBatch): Promise<void> {
    const { rows: batchRows } = batch;
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
    await query(insert, [
      batch.chainId,
      seqs[0],
      times,
      tools,
      outcomes,
      principals,
      callers,
      incidents,
      hashes,
      linesText(batch.bytes),
    ]);
  }

  /**
   * After a unique violation: whether every row of the batch is stored already, each with the batch's
   * hash (it committed, its reply was lost), or another writer holds this chain (a permanent error).
   */
  async function storedBefore(batch: AuditBatch): Promise<{ alreadyStored: true }> {
    const { rows: batchRows } = batch;
    const seqs = batchRows.map((row) => String(row.seq));
    const stored = await query(
      `SELECT seq::text AS seq, hash FROM ${table.sql} WHERE chain = $1 AND seq = ANY($2::bigint[])`,
      [batch.chainId, seqs],
    );
    const found = new Map((stored.rows as { seq: string; hash: string }[]).map((row) => [row.seq, row.hash]));
    for (let index = 0; index < batchRows.length; index += 1) {
      const hash = found.get(seqs[index]!);
      if (hash !== batchRows[index]!.hash) {
        throw new AuditSinkError(
          `audit table ${table.sql}: chain ${batch.chainId} seq ${seqs[index]} holds another record (hash ${hash ?? 'none'}); another writer uses this chain id`,
          { permanent: true },
        );
      }
    }
    return { alreadyStored: true };
  }
}

async function ensureTable(query: AuditQueryable['query'], table: AuditTableName): Promise<void> {
  const create = async (): Promise<void> => {
    if (table.schema) await query(`CREATE SCHEMA IF NOT EXISTS "${table.schema}"`);
    await query(
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
    if (isAbortError(error)) throw error;
    // Two processes creating the table at once: IF NOT EXISTS can still race; the loser finds it made.
    const { rows } = await query('SELECT to_regclass($1) AS found', [table.sql]);
    if ((rows[0] as { found?: unknown } | undefined)?.found == null) throw error;
  }
}

/** PostgreSQL text refuses NUL; the record column keeps the exact value (JSON escapes it). */
export function textColumn(value: string): string {
  return value.includes('\0') ? value.replaceAll('\0', '\uFFFD') : value;
}

/** A batch's lines as one newline-joined text (its bytes decoded once, without the last newline). */
function linesText(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, Math.max(0, bytes.length - 1)).toString('utf8');
}

/** node-postgres, as the COPY path needs it: a pool lends a client, a client is used directly. */
type CopyTarget =
  | { readonly pool: PgPoolLike; readonly client?: undefined }
  | { readonly client: PgClientLike; readonly pool?: undefined };

interface PgClientLike {
  query(submittable: copyStreams.CopyStreamQuery): copyStreams.CopyStreamQuery;
}

/** A connection a pool lends. */
interface PgLentClient {
  /** Its server process (BackendKeyData). */
  readonly processID?: number | null;
  query(submittable: copyStreams.CopyStreamQuery): copyStreams.CopyStreamQuery;
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }>;
  release(error?: Error | boolean): void;
  on(event: 'error', listener: (error: Error) => void): unknown;
  off(event: 'error', listener: (error: Error) => void): unknown;
}

interface PgPoolLike {
  connect(): Promise<PgLentClient>;
}

/** A `pg.Pool` or `pg.Client` (recognised by their own fields), or undefined for any other client. */
function copyTargetOf(client: AuditQueryable): CopyTarget | undefined {
  const fields = client as unknown as Record<string, unknown>;
  if (typeof fields.connect !== 'function') return undefined;
  if (typeof fields.totalCount === 'number' && typeof fields.idleCount === 'number') {
    return { pool: client as unknown as PgPoolLike };
  }
  if ('connectionParameters' in fields && 'processID' in fields) {
    return { client: client as unknown as PgClientLike };
  }
  return undefined;
}

/** Runs one COPY of the batch; resolves with the rows PostgreSQL stored. */
async function copyBatch(
  target: CopyTarget,
  lending: Lending | undefined,
  sql: string,
  batch: AuditBatch,
): Promise<number> {
  const payload = copyPayload(batch);
  if (lending === undefined) return runCopy(target.client!, sql, payload);
  return onLentConnection(lending, sql, (lent) => runCopy(lent, sql, payload));
}

/** A sink's pool, its statements' time limit, and the server processes of connections it gave up on. */
interface Lending {
  readonly pool: PgPoolLike;
  readonly timeoutMs: number;
  readonly table: string;
  readonly stale: StaleBackend[];
}

/** The server process of a discarded connection, and the SHA-256 (hex) of the statement it was sent last. */
interface StaleBackend {
  readonly pid: number;
  readonly statementHash: string;
}

/**
 * Runs `statement`'s `work` on a connection the pool lends, within `timeoutMs` (connecting included).
 * Past it the promise rejects (a transient `TimeoutError`) and the connection is discarded, its
 * socket destroyed: a silent partition sends no reset, and the pool must not lend that connection
 * again. Its server process may still be inside the statement: see `endStaleBackends`.
 */
function onLentConnection<T>(
  lending: Lending,
  statement: string,
  work: (lent: PgLentClient) => Promise<T>,
): Promise<T> {
  const { pool, timeoutMs, table, stale } = lending;
  return withDeadline(
    async (signal) => {
      const lent = await pool.connect();
      // A connection lost while lent is also emitted as the client's 'error', which the pool listens
      // to only while the client is idle: the statement's own rejection reports it, this keeps it
      // from crashing. A discarded connection keeps it: its socket is destroyed after it is released.
      lent.on('error', ignore);
      // Lent after the deadline (the pool had none free): a fresh connection, back to the pool.
      if (signal.aborted) {
        lent.release();
        lent.off('error', ignore);
        throw signal.reason;
      }
      const onTimeout = (): void => {
        noteStale(stale, lent, statement);
        discard(lent, signal.reason);
      };
      signal.addEventListener('abort', onTimeout, { once: true });
      try {
        if (stale.length > 0) await endStaleBackends(lent, stale);
        const value = await work(lent);
        lent.release();
        lent.off('error', ignore);
        return value;
      } catch (error) {
        if (signal.aborted) throw error;
        // PostgreSQL refused the statement (it answered with a SQLSTATE): the connection is fine.
        // Anything else (the connection dropped) and the pool must not lend it again.
        if (!hasSqlState(error)) noteStale(stale, lent, statement);
        lent.release(hasSqlState(error) ? undefined : (error as Error));
        lent.off('error', ignore);
        throw error;
      } finally {
        signal.removeEventListener('abort', onTimeout);
      }
    },
    { timeoutMs, what: `audit table ${table}: a statement` },
  );
}

/** Remembers a discarded connection's server process, to be ended before the next statement. */
function noteStale(stale: StaleBackend[], lent: PgLentClient, statement: string): void {
  const pid = lent.processID;
  if (typeof pid === 'number' && stale.length < MAX_STALE) {
    stale.push({ pid, statementHash: createHash('sha256').update(statement).digest('hex') });
  }
}

/** Discarded connections remembered at most (each retry of a hung batch adds one). */
const MAX_STALE = 64;

/**
 * Ends the server processes of discarded connections, found by process id and the statement they
 * were sent last (a reused id running anything else is left alone; the statement travels as its
 * SHA-256, so no batch statement is sent again, and one longer than the server's
 * `track_activity_query_size` is never matched). A COPY whose end was lost to a
 * silent partition (or an INSERT whose Sync was) keeps the rows it inserted, uncommitted, in the
 * table's primary key until the server notices the connection is gone (with default keepalives,
 * over two hours), and every retry of the batch waits on them. pg_cancel_backend does not reach a
 * COPY waiting for data; pg_terminate_backend does, and any role may end its own processes. Refused,
 * the retries wait for the server, as before.
 */
async function endStaleBackends(lent: PgLentClient, stale: StaleBackend[]): Promise<void> {
  const ended = stale.splice(0);
  try {
    await lent.query(
      `SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a
        JOIN unnest($1::int[], $2::text[]) AS s(pid, hash)
          ON a.pid = s.pid AND encode(sha256(convert_to(a.query, 'UTF8')), 'hex') = s.hash
        WHERE a.pid <> pg_backend_pid()`,
      [ended.map((backend) => backend.pid), ended.map((backend) => backend.statementHash)],
    );
  } catch (error) {
    // PostgreSQL refused: the statement goes on, and its retries wait for the server, as before.
    if (hasSqlState(error)) return;
    // The new connection failed too: the next one tries again.
    stale.unshift(...ended);
    throw error;
  }
}

/** A lent connection that did not answer in time: out of the pool, its socket destroyed. */
function discard(lent: PgLentClient, reason: unknown): void {
  lent.release(reason instanceof Error ? reason : new Error('audit: statement timed out'));
  // node-postgres has no public way to drop a connection at once: end() waits for a goodbye the
  // partition never delivers, holding the statement (and its batch) until the kernel gives up.
  (lent as { connection?: { stream?: { destroy?: () => void } } }).connection?.stream?.destroy?.();
}

function ignore(): void {}

function hasSqlState(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code);
}

async function runCopy(client: PgClientLike, sql: string, payload: Buffer): Promise<number> {
  const stream = client.query(copyStreams.from(sql));
  const finished = once(stream, 'finish');
  stream.end(payload);
  await finished;
  return stream.rowCount;
}

/**
 * The batch in COPY's text format: one line per record, its columns separated by tabs, the record
 * column copied from the batch's bytes (only a backslash needs doubling: JSON never holds a raw
 * tab, newline or carriage return). Other texts are escaped (backslash, tab, newline, CR) and freed
 * of NUL (`textColumn`); `\N` is NULL.
 */
function copyPayload(batch: AuditBatch): Buffer {
  const { rows, bytes } = batch;
  const lines = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  const chain = copyText(batch.chainId);
  let out = Buffer.allocUnsafe(lines.length * 2 + rows.length * 256);
  let at = 0;
  let start = 0;
  // The next backslash in the lines at or after `start` (-1: none left): one scan for the batch.
  let backslash = lines.indexOf(BACKSLASH);
  for (let index = 0; index < rows.length; index += 1) {
    const row = rows[index]!;
    const end = lines.indexOf(NEWLINE, start);
    const prefix = `${chain}\t${row.seq}\t${row.time}\t${copyText(row.tool)}\t${copyText(row.outcome)}\t${row.principal === undefined ? '\\N' : copyText(row.principal)}\t${copyText(row.caller)}\t${row.incidentId === undefined ? '\\N' : copyText(row.incidentId)}\t${row.hash}\t`;
    // Room for the prefix (3 bytes per UTF-16 unit at most) and the line with every byte doubled.
    const needed = prefix.length * 3 + (end - start) * 2 + 1;
    if (out.length - at < needed) {
      const grown = Buffer.allocUnsafe(Math.max(out.length * 2, at + needed));
      out.copy(grown, 0, 0, at);
      out = grown;
    }
    at += out.write(prefix, at, 'utf8');
    while (backslash !== -1 && backslash < end) {
      at += lines.copy(out, at, start, backslash + 1);
      out[at++] = BACKSLASH;
      start = backslash + 1;
      backslash = lines.indexOf(BACKSLASH, start);
    }
    at += lines.copy(out, at, start, end + 1);
    start = end + 1;
  }
  return out.subarray(0, at);
}

const BACKSLASH = 0x5c;
const NEWLINE = 0x0a;
const COPY_SPECIAL = /[\\\t\n\r\0]/;

/** A text column's value in COPY's text format. */
function copyText(value: string): string {
  if (!COPY_SPECIAL.test(value)) return value;
  return textColumn(value).replace(/[\\\t\n\r]/g, (char) =>
    char === '\\' ? '\\\\' : char === '\t' ? '\\t' : char === '\n' ? '\\n' : '\\r',
  );
}
