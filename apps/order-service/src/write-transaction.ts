import type { PGlite, Transaction } from '@electric-sql/pglite';
import { ToolError } from '@toolgate/core';
import type pg from 'pg';
import type { OrderDatabase } from './db.js';

/** Runs parameterized statements inside one read-write transaction. */
export interface WriteRunner {
  query(
    text: string,
    values: readonly unknown[],
  ): Promise<{ rows: Record<string, unknown>[]; rowCount: number }>;
}

/** The write side of the order database: one read-write transaction per call, with a statement timeout. */
export interface WriteTransactions {
  readWrite<T>(
    options: { timeoutMs: number; signal?: AbortSignal },
    work: (runner: WriteRunner) => Promise<T>,
  ): Promise<T>;
}

/**
 * Read-write transactions for the write tools only; the read tools keep their read-only ones. Every
 * statement runs under `statement_timeout`, and an abort before COMMIT rolls the whole change back.
 * The handler returns a failure result (nothing to change) without throwing, so the transaction
 * commits only what the handler wrote: callers write nothing before they have checked everything.
 */
export function writeTransactions(db: OrderDatabase): WriteTransactions {
  return {
    readWrite: (options, work) => {
      const timeoutMs = Math.max(1, Math.floor(options.timeoutMs));
      if (db.pglite) return pgliteWrite(db.pglite, timeoutMs, options.signal, work);
      return pgWrite(db.pool!, timeoutMs, options.signal, work);
    },
  };
}

async function pgWrite<T>(
  pool: pg.Pool,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  work: (runner: WriteRunner) => Promise<T>,
): Promise<T> {
  signal?.throwIfAborted();
  const client = await pool.connect();
  // pg-pool listens for errors on idle clients only: a connection that dies while this transaction
  // holds it emits 'error', which Node would throw as an uncaught exception, ending the process (every
  // call in flight, the audit buffer). The statement in flight rejects anyway.
  let broken = false;
  const onError = (): void => {
    broken = true;
  };
  client.on('error', onError);
  // A statement whose reply never comes (a silent partition, a lost acknowledgement) fails after this
  // bound and its connection is dropped, instead of holding one of the pool's connections for good.
  let lost: unknown;
  const send = async (text: string, values?: unknown[]) => {
    try {
      return await client.query({
        text,
        values,
        query_timeout: timeoutMs + REPLY_MARGIN_MS,
      } as pg.QueryConfig);
    } catch (error) {
      if (!isServerError(error)) lost = error;
      throw error;
    }
  };
  let clean = false;
  let committing = false;
  try {
    // The server ends a transaction whose client stopped talking (the row lock it holds would
    // otherwise block every later change of that order until the server's TCP keepalive, hours).
    await send(
      `BEGIN READ WRITE; SET LOCAL statement_timeout = ${timeoutMs}; ` +
        `SET LOCAL idle_in_transaction_session_timeout = ${timeoutMs + REPLY_MARGIN_MS}`,
    );
    const result = await work({
      query: async (text, values) => {
        signal?.throwIfAborted();
        const answer = await send(text, values as unknown[]);
        return { rows: answer.rows, rowCount: answer.rowCount ?? 0 };
      },
    });
    signal?.throwIfAborted();
    committing = true;
    await send('COMMIT');
    clean = true;
    return result;
  } catch (error) {
    if (lost !== undefined) {
      // The connection is gone or silent: a ROLLBACK would wait behind it. Dropping the connection
      // ends the transaction on the server, unless its COMMIT had already arrived.
      throw committing ? commitOutcomeUnknown(lost) : connectionLost(lost);
    }
    await client.query('ROLLBACK').then(
      () => {
        clean = true;
      },
      () => undefined,
    );
    throw committing ? error : (notDoneInTime(error) ?? error);
  } finally {
    client.off('error', onError);
    client.release(clean && !broken ? undefined : true);
  }
}

/** How much longer than the statement timeout a reply may take before the connection counts as lost. */
const REPLY_MARGIN_MS = 1000;

// PostgreSQL's own errors carry a severity; anything else means the connection failed.
function isServerError(error: unknown): boolean {
  return typeof error === 'object' && error !== null && 'severity' in error;
}

// PostgreSQL gave up on a statement: its statement timeout (often while waiting for the order's row
// lock, held by another change of it), a lock it would not wait for, or a deadlock.
const NOT_DONE_IN_TIME = new Set(['57014', '55P03', '40P01']);

/**
 * A write PostgreSQL stopped before COMMIT, rolled back: said so, with a retry of the same call. Left
 * to the generic mapping, a read query's advice ("narrower arguments, a lower limit") would reach the
 * model, which could retry a refund with another amount.
 */
function notDoneInTime(error: unknown): ToolError | undefined {
  const code = isServerError(error) ? (error as { code?: unknown }).code : undefined;
  if (typeof code !== 'string' || !NOT_DONE_IN_TIME.has(code)) return undefined;
  // `unavailable`, not `timeout`: idempotency holds a timed-out call's claim (its side effect may still
  // run), and the retry this answer asks for would wait on it; this one was rolled back.
  return new ToolError(
    'unavailable',
    'The change did not finish in time (the order may be busy); nothing was changed.',
    {
      hint: 'Call again in a few seconds with the same arguments; do not change them.',
      retryAfterMs: 2000,
      cause: error,
    },
  );
}

/** A statement before COMMIT got no answer: the server rolls the transaction back when the connection goes. */
function connectionLost(cause: unknown): ToolError {
  return new ToolError('unavailable', 'The database stopped answering; nothing was changed.', {
    retryAfterMs: 2000,
    cause,
  });
}

/**
 * COMMIT was sent and its answer lost: the change may have been made. Said so, never "nothing was
 * done"; the write tools find a change already made by the same call when it is retried.
 */
function commitOutcomeUnknown(cause: unknown): ToolError {
  return new ToolError(
    'unavailable',
    'The connection to the database was lost while the change was being saved; it may have been made.',
    {
      hint: 'Do not make a different change. Repeat this exact call in a few seconds: if the change was made, it answers with it instead of making it again.',
      retryAfterMs: 2000,
      cause,
    },
  );
}

async function pgliteWrite<T>(
  pglite: PGlite,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  work: (runner: WriteRunner) => Promise<T>,
): Promise<T> {
  signal?.throwIfAborted();
  return pglite.transaction(async (tx: Transaction) => {
    await tx.exec(`SET LOCAL statement_timeout = ${timeoutMs}`);
    const result = await work({
      query: async (text, values) => {
        signal?.throwIfAborted();
        const answer = await tx.query(text, values as unknown[]);
        return { rows: answer.rows as Record<string, unknown>[], rowCount: answer.affectedRows ?? 0 };
      },
    });
    // Thrown inside the transaction: PGlite rolls it back.
    signal?.throwIfAborted();
    return result;
  });
}
