import { hash } from 'node:crypto';
import type { QueryRows } from './types.js';

/** The adapter's prepared-statement settings, checked once (see `PgQueryableOptions.preparedStatements`). */
export interface PreparedSettings {
  /** Statements one connection keeps prepared at most; later texts run unnamed there. */
  readonly maxPerConnection: number;
}

const DEFAULT_MAX_PER_CONNECTION = 100;

/** Checks the option; `undefined` when statements are not to be prepared. */
export function preparedSettings(option: unknown): PreparedSettings | undefined {
  if (option === undefined || option === false) return undefined;
  if (option === true) return { maxPerConnection: DEFAULT_MAX_PER_CONNECTION };
  const max = (option as { maxPerConnection?: unknown } | null)?.maxPerConnection;
  if (typeof option !== 'object' || option === null || (max !== undefined && !isPositiveInteger(max))) {
    throw new TypeError(
      'pgQueryable: preparedStatements must be true, false or { maxPerConnection: a positive integer }',
    );
  }
  return { maxPerConnection: (max as number | undefined) ?? DEFAULT_MAX_PER_CONNECTION };
}

function isPositiveInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 1;
}

// On the connection itself, under a registry symbol (as the read-only session is): every adapter and
// copy of this package sharing a pool counts the same statements.
const PREPARED = Symbol.for('toolgate.sql.preparedStatementNames');

// A statement's name is a digest of its text: the same text gets the same name on every connection
// and from every adapter, and two texts never share one (pg refuses a name reused for another text).
const names = new Map<string, string>();
const MAX_NAMES = 1024;

function nameOf(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `toolgate_${hash('sha256', text, 'base64url').slice(0, 32)}`;
    if (names.size >= MAX_NAMES) names.clear();
    names.set(text, name);
  }
  return name;
}

/** The part of a pg Client a statement is sent through. */
interface StatementClient {
  query(config: { name?: string; text: string; values?: unknown[] }): Promise<QueryRows>;
}

/**
 * Sends one of a tool's statements on `client`: named when `prepared` is on and the statement is
 * prepared there already or the connection has room for one more (pg sends the Parse once per
 * connection, then only Bind and Execute, and PostgreSQL skips parsing and analysing it again),
 * unnamed otherwise. When PostgreSQL refuses the prepared statement for good (`isStalePrepared`),
 * the connection names nothing from then on, and a statement `alone` (its own implicit transaction)
 * is sent again at once, unnamed; inside a transaction the error stands (the transaction is spoiled).
 */
export function sendStatement(
  client: StatementClient,
  prepared: PreparedSettings | undefined,
  text: string,
  values: readonly unknown[],
  alone: boolean,
): Promise<QueryRows> {
  const name = prepared === undefined ? undefined : nameOn(client, prepared, text);
  if (name === undefined) return client.query({ text, values: values as unknown[] });
  return client.query({ name, text, values: values as unknown[] }).catch((error: unknown) => {
    if (!isStalePrepared(error)) throw error;
    Object.defineProperty(client, PREPARED, { value: STOPPED, configurable: true, writable: true });
    if (!alone) throw error;
    return client.query({ text, values: values as unknown[] });
  });
}

/** The name `text` runs under on `connection`, or undefined when it runs unnamed there. */
function nameOn(connection: object, prepared: PreparedSettings, text: string): string | undefined {
  let held = (connection as { [PREPARED]?: Set<string> })[PREPARED];
  if (held === undefined) {
    held = new Set();
    Object.defineProperty(connection, PREPARED, { value: held, configurable: true, writable: true });
  }
  if (held === STOPPED) return undefined;
  const name = nameOf(text);
  if (!held.has(name)) {
    if (held.size >= prepared.maxPerConnection) return undefined;
    held.add(name);
  }
  return name;
}

/** A connection whose prepared statements went stale: it runs every statement unnamed from then on. */
const STOPPED: Set<string> = new Set();

/**
 * Whether `error` says a named statement can no longer run as prepared on its connection: its result
 * type changed under it (`0A000`, "cached plan must not change result type", after an `ALTER COLUMN
 * ... TYPE` of a selected column), or the server no longer has it (`26000`, after a `DEALLOCATE` or
 * behind a pooler that moved the session). PostgreSQL keeps refusing that statement on the connection
 * (and node-postgres would skip its Parse again), so the connection stops naming statements.
 */
function isStalePrepared(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message, routine } = error as { code?: unknown; message?: unknown; routine?: unknown };
  if (code === '26000') return true;
  if (code !== '0A000') return false;
  // The server function that refuses it, whatever the server's message language; else the message.
  return (
    routine === 'RevalidateCachedQuery' ||
    (typeof message === 'string' && message.includes('cached plan must not change'))
  );
}
