import { raceAbort } from '@toolgate/core';
import { markConnectionFailure, statementTimeoutError } from './database-error.js';
import { abortReason, readOnlySettings } from './transaction-start.js';
import type { Queryable, QueryRows } from './types.js';

/** The part of a PGlite transaction this adapter uses. */
export interface PGliteTransactionLike {
  query(text: string, values?: unknown[]): Promise<QueryRows>;
  exec(text: string): Promise<unknown>;
}

/** The part of a PGlite instance this adapter uses. */
export interface PGliteLike {
  transaction<T>(callback: (tx: PGliteTransactionLike) => Promise<T>): Promise<T>;
  readonly closed: boolean;
}

/**
 * A Queryable over embedded PGlite, through its `transaction()` API. PGlite runs one transaction at
 * a time, so concurrent calls queue for it: the statement timeout counts from when the call's own
 * transaction starts, never the wait behind others (1,000 concurrent searches would otherwise time
 * out by queueing alone). The wait itself is bounded by the call's abort (its deadline): an aborted
 * call leaves the queue at once and its transaction, when its turn comes, runs nothing.
 *
 * PGlite runs statements on the event loop's thread and cannot interrupt one (no timer signal in
 * WebAssembly), so the statement timeout is enforced after the fact: a result that arrives later
 * than `timeoutMs` is discarded and the call fails with a timeout, and an abort is noticed between
 * statements.
 */
export function pgliteQueryable(db: PGliteLike): Queryable {
  if (typeof db !== 'object' || db === null || typeof db.transaction !== 'function') {
    throw new TypeError('pgliteQueryable: pass a PGlite instance');
  }
  return {
    engine: 'pglite',
    async readOnly(options, work) {
      const signal = options.signal;
      if (signal?.aborted) throw abortReason(signal);
      const settings = readOnlySettings(options.timeoutMs);
      let started = 0;
      const checkpoint = (): void => {
        if (signal?.aborted) throw abortReason(signal);
        if (performance.now() - started > options.timeoutMs) {
          throw statementTimeoutError(
            `canceling statement due to statement timeout (${options.timeoutMs} ms)`,
          );
        }
      };
      try {
        const transaction = db.transaction(async (tx) => {
          // Our turn: a call aborted while it queued runs nothing; the clock starts now.
          if (signal?.aborted) throw abortReason(signal);
          started = performance.now();
          // Written like the pg adapter's statements so the transaction has the same guarantees.
          await tx.exec(`SET TRANSACTION READ ONLY; ${settings}`);
          return work({
            query: async (text, values) => {
              checkpoint();
              const result = await tx.query(text, values as unknown[]);
              checkpoint();
              return result;
            },
          });
        });
        // The queue's turn may come after the caller gave up: it then settles unobserved.
        transaction.catch(() => undefined);
        return await raceAbort(transaction, signal);
      } catch (error) {
        throw db.closed ? markConnectionFailure(error) : error;
      }
    },
  };
}
