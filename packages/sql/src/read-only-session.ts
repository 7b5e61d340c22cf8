import { isTimeoutMs, MAX_TIMEOUT_MS } from './transaction-start.js';

/** Options of `pgQueryable`. */
export interface PgQueryableOptions {
  /**
   * Declares the Pool (or Client) dedicated to read-only tools. The adapter then makes each of its
   * connections read-only (`default_transaction_read_only = on`) with this statement timeout, once
   * per connection, and a tool call whose timeout equals it runs its one statement alone: one round
   * trip instead of three (`BEGIN READ ONLY; SET LOCAL ...`, the statement, `COMMIT`). A tool with
   * another timeout keeps the transaction. Anything else that uses these connections runs read-only
   * with this timeout too, so give the tools a pool of their own.
   * @default undefined (no session settings: every call opens its own read-only transaction)
   */
  readonly readOnlySession?: { readonly timeoutMs: number };
  /**
   * Prepares each statement text once per connection (a named statement: PostgreSQL parses and
   * analyses it once, then each call only binds and runs it; it still plans each call's values unless
   * its plan cache finds a generic plan as good). `true` keeps up to 100 per connection; later texts run
   * unnamed there. Not behind PgBouncer in transaction mode before 1.21 (it cannot route them).
   * @default false
   */
  readonly preparedStatements?: boolean | { readonly maxPerConnection?: number };
}

/** The session a dedicated pool's connections get, checked once. */
export interface SessionSettings {
  readonly timeoutMs: number;
  /** The statements that set it on a connection (no parameters: one simple-protocol round trip). */
  readonly text: string;
}

// Stored on the connection itself, under a registry symbol: two adapters (or two copies of this
// package) sharing a pool with different timeouts see what the connection really has, never a
// bookkeeping of their own that the other one made stale.
const SESSION_TIMEOUT = Symbol.for('toolgate.sql.readOnlySessionTimeoutMs');

/** Checks the options; `undefined` when no read-only session is asked for. */
export function sessionSettings(options: PgQueryableOptions): SessionSettings | undefined {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError('pgQueryable: options must be an object');
  }
  const session = options.readOnlySession;
  if (session === undefined) return undefined;
  const timeoutMs = session?.timeoutMs;
  if (!isTimeoutMs(timeoutMs)) {
    throw new TypeError(
      `pgQueryable: readOnlySession.timeoutMs must be a positive integer (ms) no larger than ${MAX_TIMEOUT_MS}`,
    );
  }
  return {
    timeoutMs,
    text: `SET default_transaction_read_only = on; SET statement_timeout = ${timeoutMs}`,
  };
}

/** Whether this connection already runs read-only with the session's timeout. */
export function hasSession(connection: object, session: SessionSettings): boolean {
  return (connection as { [SESSION_TIMEOUT]?: number })[SESSION_TIMEOUT] === session.timeoutMs;
}

/** Records that the session's statements ran on this connection. */
export function markSession(connection: object, session: SessionSettings): void {
  Object.defineProperty(connection, SESSION_TIMEOUT, {
    value: session.timeoutMs,
    configurable: true,
    writable: true,
  });
}
