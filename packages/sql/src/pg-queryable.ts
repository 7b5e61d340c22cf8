import { raceAbort } from '@toolgate/core';
import { type CancellableClient, sendCancelRequest } from './cancel-request.js';
import { markConnectionFailure } from './database-error.js';
import { abortReason, readOnlySettings } from './transaction-start.js';
import type { Queryable, QueryRows, QueryRunner, ReadOnlyOptions } from './types.js';

/** The part of a `pg` Client (or PoolClient) this adapter uses. */
export interface PgClientLike {
  query(config: { text: string; values?: unknown[] }): Promise<QueryRows>;
}

/** A client checked out of a pool: pg's PoolClient is an EventEmitter that emits `error`. */
export interface PgPoolClientLike extends PgClientLike {
  release(destroy?: boolean | Error): void;
  on?(event: 'error', listener: (error: Error) => void): unknown;
  off?(event: 'error', listener: (error: Error) => void): unknown;
}

/** The part of a `pg` Pool this adapter uses. */
export interface PgPoolLike {
  connect(): Promise<PgPoolClientLike>;
  query(text: string, values?: unknown[]): Promise<unknown>;
  readonly totalCount: number;
}

function isPool(value: PgPoolLike | PgClientLike): value is PgPoolLike {
  return typeof (value as PgPoolLike).connect === 'function' && 'totalCount' in value;
}

/**
 * A Queryable over `pg`. With a Pool, each call checks out one client for its transaction (calls run
 * in parallel). An aborted call cancels its statement with the protocol's cancel request, sent over
 * a connection of its own (never through the pool, which may be exhausted by the very statements it
 * should stop); once the server took the request and the transaction rolled back, the connection
 * goes back to the pool clean. It is destroyed only when that cannot be made sure (the cancel could
 * not be sent, the rollback failed, the connection broke): a stray late cancel must never hit the
 * next caller, and destroying every aborted connection made a reconnect storm. With a single Client, calls are serialised (one transaction
 * at a time on one connection) and an abort stops the wait while the statement itself ends at the
 * statement timeout.
 */
export function pgQueryable(poolOrClient: PgPoolLike | PgClientLike): Queryable {
  if (typeof poolOrClient !== 'object' || poolOrClient === null || typeof poolOrClient.query !== 'function') {
    throw new TypeError('pgQueryable: pass a pg Pool or Client');
  }
  if (isPool(poolOrClient)) return poolQueryable(poolOrClient);
  return clientQueryable(poolOrClient);
}

function poolQueryable(pool: PgPoolLike): Queryable {
  return {
    engine: 'pg',
    async readOnly<T>(options: ReadOnlyOptions, work: (runner: QueryRunner) => Promise<T>): Promise<T> {
      const signal = options.signal;
      if (signal?.aborted) throw abortReason(signal);
      const settings = readOnlySettings(options.timeoutMs);
      let client: PgPoolClientLike;
      const checkout = pool.connect();
      try {
        client = await raceAbort(checkout, signal);
      } catch (error) {
        // Aborted while waiting for a connection: the pool may still hand one over later. Give it
        // back at once, or every abort under load leaks a connection until the pool is exhausted.
        checkout.then(
          (late) => late.release(),
          () => undefined,
        );
        throw signal?.aborted ? error : markConnectionFailure(error);
      }
      if (signal?.aborted) {
        // Aborted as the connection arrived: nothing ran on it, so it goes back as it came.
        client.release();
        throw abortReason(signal);
      }
      // pg-pool listens for errors on idle clients only; a connection that dies while checked out
      // would emit an unhandled 'error' and take the process down. The query in flight rejects anyway.
      let broken = false;
      const onClientError = (): void => {
        broken = true;
      };
      client.on?.('error', onClientError);
      const release = (destroy: boolean): void => {
        client.off?.('error', onClientError);
        client.release(destroy || broken);
      };
      let cancel: Promise<boolean> | undefined;
      const onAbort = (): void => {
        cancel = sendCancelRequest(client as CancellableClient);
      };
      // Reusable after an abort only when the server took the cancel (so none can land later).
      const cancelSettled = async (): Promise<boolean> => (cancel === undefined ? true : await cancel);
      const outcome = { rolledBack: true };
      const transaction = runTransaction<T>(client, settings, options, work, outcome).then(
        async (value) => {
          release(!(await cancelSettled()));
          return value;
        },
        async (error: unknown) => {
          release(isBroken(error) || !outcome.rolledBack || !(await cancelSettled()));
          throw error;
        },
      );
      // The caller may have gone (aborted); the transaction settles on its own.
      transaction.catch(() => undefined);
      // Registered before raceAbort's own listener, so the cancel request goes out before the call
      // rejects; removed as soon as the transaction settles, so a late abort never cancels a
      // statement of the next caller on this connection.
      signal?.addEventListener('abort', onAbort, { once: true });
      transaction.then(
        () => signal?.removeEventListener('abort', onAbort),
        () => signal?.removeEventListener('abort', onAbort),
      );
      return raceAbort(transaction, signal);
    },
  };
}

function clientQueryable(client: PgClientLike): Queryable {
  // One connection holds one transaction at a time; later calls wait their turn.
  let queue: Promise<unknown> = Promise.resolve();
  return {
    engine: 'pg',
    readOnly<T>(options: ReadOnlyOptions, work: (runner: QueryRunner) => Promise<T>): Promise<T> {
      const signal = options.signal;
      if (signal?.aborted) return Promise.reject(abortReason(signal));
      const settings = readOnlySettings(options.timeoutMs);
      const transaction = queue.then(() => runTransaction<T>(client, settings, options, work));
      queue = transaction.catch(() => undefined);
      return raceAbort(transaction, signal);
    },
  };
}

async function runTransaction<T>(
  client: PgClientLike,
  settings: string,
  options: ReadOnlyOptions,
  work: (runner: QueryRunner) => Promise<T>,
  outcome: { rolledBack: boolean } = { rolledBack: true },
): Promise<T> {
  if (options.signal?.aborted) throw abortReason(options.signal);
  try {
    // No parameters, so pg sends both statements in one simple-protocol round trip.
    await client.query({ text: `BEGIN READ ONLY; ${settings}` });
  } catch (error) {
    throw isBroken(error) ? markConnectionFailure(error) : error;
  }
  try {
    const result = await work({
      query: (text, values) => client.query({ text, values: values as unknown[] }),
    });
    await client.query({ text: 'COMMIT' });
    return result;
  } catch (error) {
    if (isBroken(error)) {
      outcome.rolledBack = false;
    } else {
      await client.query({ text: 'ROLLBACK' }).then(
        () => undefined,
        () => {
          outcome.rolledBack = false;
        },
      );
    }
    throw error;
  }
}

// pg's server errors carry a severity; anything else thrown mid-transaction is the connection's.
function isBroken(error: unknown): boolean {
  return typeof error !== 'object' || error === null || !('severity' in error);
}
