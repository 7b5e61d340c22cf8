import { raceAbort } from '@toolgate/core';
import { type CancellableClient, sendCancelRequest } from './cancel-request.js';
import { markConnectionFailure } from './database-error.js';
import { type PreparedSettings, preparedSettings, sendStatement } from './prepared-statements.js';
import {
  hasSession,
  markSession,
  type PgQueryableOptions,
  type SessionSettings,
  sessionSettings,
} from './read-only-session.js';
import { replyOf } from './reply-deadline.js';
import { abortReason, pgTransactionStart, readOnlySettings } from './transaction-start.js';
import type { Queryable, QueryRows, QueryRunner, ReadOnlyOptions } from './types.js';

/** The part of a `pg` Client (or PoolClient) this adapter uses. */
export interface PgClientLike {
  query(config: { name?: string; text: string; values?: unknown[] }): Promise<QueryRows>;
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
 * not be sent or the server did not confirm it in time, the rollback failed, the connection broke):
 * a stray late cancel must never hit the next caller, and destroying every aborted connection made a
 * reconnect storm. With a single Client, calls are serialised (one transaction at a time on one
 * connection, shared by every adapter over that Client) and an abort stops the wait while the
 * statement itself ends at the statement timeout.
 *
 * With `readOnlySession`, the pool (or client) serves read-only tools only: see {@link PgQueryableOptions}.
 */
export function pgQueryable(
  poolOrClient: PgPoolLike | PgClientLike,
  options: PgQueryableOptions = {},
): Queryable {
  if (typeof poolOrClient !== 'object' || poolOrClient === null || typeof poolOrClient.query !== 'function') {
    throw new TypeError('pgQueryable: pass a pg Pool or Client');
  }
  const session = sessionSettings(options);
  const prepared = preparedSettings(options.preparedStatements);
  if (isPool(poolOrClient)) return poolQueryable(poolOrClient, session, prepared);
  return clientQueryable(poolOrClient, session, prepared);
}

/**
 * Whether a connection can serve the next caller after a call: `reusable` turns false only when the
 * connection itself failed (a statement got no answer from the server, a ROLLBACK failed), never
 * because of what the call's work threw.
 */
interface Outcome {
  reusable: boolean;
}

/** What runs on a checked-out client for one call; it sets `outcome.reusable` false when the connection failed. */
type ClientWork<T> = (client: PgClientLike, outcome: Outcome) => Promise<T>;

function poolQueryable(
  pool: PgPoolLike,
  session: SessionSettings | undefined,
  prepared: PreparedSettings | undefined,
): Queryable {
  const readOnly = async <T>(
    options: ReadOnlyOptions,
    work: (runner: QueryRunner) => Promise<T>,
  ): Promise<T> => {
    const start = pgTransactionStart(options.timeoutMs);
    return onPoolClient(pool, options.signal, (client, outcome) =>
      runTransaction<T>(client, start, prepared, options, work, outcome),
    );
  };
  return {
    engine: 'pg',
    readOnly,
    async readOnlyQuery(
      options: ReadOnlyOptions,
      text: string,
      values: readonly unknown[],
    ): Promise<QueryRows> {
      // Another timeout than the session's needs SET LOCAL, so a transaction (three round trips).
      if (session?.timeoutMs !== options.timeoutMs) {
        return readOnly(options, (runner) => runner.query(text, values));
      }
      readOnlySettings(options.timeoutMs);
      return onPoolClient(pool, options.signal, (client, outcome) =>
        runAlone(client, session, prepared, options, text, values, outcome),
      );
    },
  };
}

async function onPoolClient<T>(
  pool: PgPoolLike,
  signal: AbortSignal | undefined,
  run: ClientWork<T>,
): Promise<T> {
  if (signal?.aborted) throw abortReason(signal);
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
  const outcome: Outcome = { reusable: true };
  // The connection's health comes from `outcome`, never from the error the call rejects with: a
  // ToolError the work threw (a claim the read-back refused, a resolver's own refusal) carries no
  // server severity, yet its transaction was rolled back and the connection is sound. Judged by the
  // error, every such call destroyed its connection, and a tenant whose token spelled its id `+42`
  // made each of its calls cost the server a new connection (a reconnect storm on demand).
  const transaction = run(client, outcome).then(
    async (value) => {
      release(!(await cancelSettled()));
      return value;
    },
    async (error: unknown) => {
      release(!outcome.reusable || !(await cancelSettled()));
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
}

function clientQueryable(
  client: PgClientLike,
  session: SessionSettings | undefined,
  prepared: PreparedSettings | undefined,
): Queryable {
  // One connection holds one transaction at a time; later calls wait their turn, also the calls of
  // every other adapter over this client (one per tool is the usual way to write `db:`).
  const turns = turnsOf(client);
  const enqueue = <T>(signal: AbortSignal | undefined, run: () => Promise<T>): Promise<T> => {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    const turn = turns.last.then(run);
    turns.last = turn.catch(() => undefined);
    return raceAbort(turn, signal);
  };
  const readOnly = async <T>(
    options: ReadOnlyOptions,
    work: (runner: QueryRunner) => Promise<T>,
  ): Promise<T> => {
    const start = pgTransactionStart(options.timeoutMs);
    return enqueue(options.signal, () => runTransaction<T>(client, start, prepared, options, work));
  };
  return {
    engine: 'pg',
    readOnly,
    async readOnlyQuery(
      options: ReadOnlyOptions,
      text: string,
      values: readonly unknown[],
    ): Promise<QueryRows> {
      if (session?.timeoutMs !== options.timeoutMs) {
        return readOnly(options, (runner) => runner.query(text, values));
      }
      readOnlySettings(options.timeoutMs);
      return enqueue(options.signal, () => runAlone(client, session, prepared, options, text, values));
    },
  };
}

/** The calls waiting for one Client: the end of the last one. */
interface Turns {
  last: Promise<unknown>;
}

// Kept on the client itself, under a registry symbol, as its read-only session is: adapters made
// apart (and two copies of this package) share one line. With a line each, two calls sent together
// shared one transaction (the second BEGIN is only a warning): the later SET LOCAL statement_timeout
// bound both statements, and one caller's COMMIT or ROLLBACK ended the other's transaction.
const TURNS = Symbol.for('toolgate.sql.clientTurns');

function turnsOf(client: object): Turns {
  const held = (client as { [TURNS]?: Turns })[TURNS];
  if (held !== undefined) return held;
  const turns: Turns = { last: Promise.resolve() };
  Object.defineProperty(client, TURNS, { value: turns, configurable: true, writable: true });
  return turns;
}

async function runTransaction<T>(
  client: PgClientLike,
  start: string,
  prepared: PreparedSettings | undefined,
  options: ReadOnlyOptions,
  work: (runner: QueryRunner) => Promise<T>,
  outcome: Outcome = { reusable: true },
): Promise<T> {
  if (options.signal?.aborted) throw abortReason(options.signal);
  refuseOpenTransaction(client, outcome);
  try {
    // No parameters, so pg sends the statements in one simple-protocol round trip.
    await replyOf(client, options.timeoutMs, client.query({ text: start }));
  } catch (error) {
    if (isBroken(error)) {
      outcome.reusable = false;
      throw markConnectionFailure(error);
    }
    // BEGIN may have run before the SET failed (a cancel landing between them): the connection then
    // sits in an aborted transaction block that would refuse every later caller with 25P02.
    await rollBack(client, options.timeoutMs, outcome);
    throw error;
  }
  // Whether one of the work's statements got no answer from the server (the connection broke). The
  // work may throw anything (a ToolError after a statement answered, its own TypeError) or catch a
  // statement's failure and throw another error: what it throws says nothing about the connection,
  // so the statements themselves tell. Taken for broken, a refused claim left its transaction open:
  // on a single Client the next caller's BEGIN joined it (a warning only), and when no call came
  // within idle_in_transaction_session_timeout the server ended the session every caller shares.
  let connectionFailed = false;
  const runner: QueryRunner = {
    query: async (text, values) => {
      try {
        return await replyOf(client, options.timeoutMs, sendStatement(client, prepared, text, values, false));
      } catch (error) {
        if (isBroken(error)) connectionFailed = true;
        throw error;
      }
    },
  };
  let result: T;
  try {
    result = await work(runner);
  } catch (error) {
    if (connectionFailed) {
      outcome.reusable = false;
    } else {
      await rollBack(client, options.timeoutMs, outcome);
    }
    throw error;
  }
  try {
    await replyOf(client, options.timeoutMs, client.query({ text: 'COMMIT' }));
  } catch (error) {
    if (isBroken(error)) {
      outcome.reusable = false;
    } else {
      await rollBack(client, options.timeoutMs, outcome);
    }
    throw error;
  }
  return result;
}

// A ROLLBACK outside a transaction only warns; one that fails leaves the connection unfit for reuse.
async function rollBack(client: PgClientLike, timeoutMs: number, outcome: Outcome): Promise<void> {
  await replyOf(client, timeoutMs, client.query({ text: 'ROLLBACK' })).then(
    () => undefined,
    () => {
      outcome.reusable = false;
    },
  );
}

/**
 * The fast path: the connection is read-only with the call's statement timeout as its session
 * defaults, so the statement runs alone in its own implicit transaction, with the same guarantees
 * as `BEGIN READ ONLY; SET LOCAL statement_timeout` and one round trip instead of three. The session
 * is set the first time a connection serves this path (one more round trip, once per connection).
 */
async function runAlone(
  client: PgClientLike,
  session: SessionSettings,
  prepared: PreparedSettings | undefined,
  options: ReadOnlyOptions,
  text: string,
  values: readonly unknown[],
  outcome: Outcome = { reusable: true },
): Promise<QueryRows> {
  if (options.signal?.aborted) throw abortReason(options.signal);
  refuseOpenTransaction(client, outcome);
  if (!hasSession(client, session)) {
    try {
      await replyOf(client, options.timeoutMs, client.query({ text: session.text }));
    } catch (error) {
      if (!isBroken(error)) throw error;
      outcome.reusable = false;
      throw markConnectionFailure(error);
    }
    markSession(client, session);
  }
  try {
    return await replyOf(client, options.timeoutMs, sendStatement(client, prepared, text, values, true));
  } catch (error) {
    if (isBroken(error)) outcome.reusable = false;
    throw error;
  }
}

/**
 * Refuses to start a call on a session that is inside a transaction it did not open. pg's Client
 * records, from each ReadyForQuery, whether its session is idle (`I`), in a transaction (`T`) or in
 * a failed one (`E`). Only another user of the connection leaves it so: a writer that gave a pooled
 * connection back without COMMIT or ROLLBACK, or one running its own transaction on a Client it
 * shares with the tools. There `BEGIN READ ONLY` is only a warning: the call ran inside that
 * read-write transaction and its COMMIT committed the writer's unfinished work (its ROLLBACK, after a
 * refused claim or a timeout the model can cause, undid it while the writer went on). Nothing is sent:
 * a Pool destroys the connection (the server rolls the abandoned transaction back) and the call
 * answers `unavailable`, retryable, as for any connection it cannot use.
 */
function refuseOpenTransaction(client: PgClientLike, outcome: Outcome): void {
  const status = (client as { getTransactionStatus?: () => unknown }).getTransactionStatus?.();
  if (status !== 'T' && status !== 'E') return;
  outcome.reusable = false;
  throw markConnectionFailure(
    new Error(`the connection is inside a transaction this adapter did not open (status ${status})`),
  );
}

// pg's server errors carry a severity; anything else a statement rejects with is the connection's.
function isBroken(error: unknown): boolean {
  return typeof error !== 'object' || error === null || !('severity' in error);
}
