import type { PGlite, Transaction } from '@electric-sql/pglite';
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
  let clean = false;
  try {
    await client.query('BEGIN READ WRITE');
    await client.query(`SET LOCAL statement_timeout = ${timeoutMs}`);
    const result = await work({
      query: async (text, values) => {
        signal?.throwIfAborted();
        const answer = await client.query(text, values as unknown[]);
        return { rows: answer.rows, rowCount: answer.rowCount ?? 0 };
      },
    });
    signal?.throwIfAborted();
    await client.query('COMMIT');
    clean = true;
    return result;
  } catch (error) {
    await client.query('ROLLBACK').then(
      () => {
        clean = true;
      },
      () => undefined,
    );
    throw error;
  } finally {
    client.release(clean ? undefined : true);
  }
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
