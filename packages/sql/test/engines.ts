import { citext } from '@electric-sql/pglite/contrib/citext';
import pg from 'pg';
import {
  type PgQueryableOptions,
  pgliteQueryable,
  pgQueryable,
  type Queryable,
  type QueryRunner,
  type ReadOnlyOptions,
} from '../src/index.js';
import { createPGlite } from './pglite.js';

// The names this worker's tests give what they make on the shared PostgreSQL server. Files of one worker
// run one after another, workers at once (--maxWorkers), so each worker (vitest's pool id, 1..maxWorkers)
// has a schema, a role and an application name of its own. Being the same on every run, a name a
// killed run left behind is dropped by the next open().
const WORKER = process.env.VITEST_POOL_ID ?? '0';
export const SCHEMA = `toolgate_sql_test_${WORKER}`;
/** A role without access to SCHEMA (see `unprivileged`). */
const NO_ACCESS_ROLE = `toolgate_sql_noaccess_${WORKER}`;
/** The application_name of the engine's own pool: what a test looks for in pg_stat_activity. */
export const APPLICATION_NAME = `toolgate_sql_test_${WORKER}`;
const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL;

if (process.env.CI === 'true' && !TEST_DATABASE_URL) {
  throw new Error(
    'TEST_DATABASE_URL must be set in CI: the SQL tests must run on a real PostgreSQL server too',
  );
}

/** What a PostgreSQL-only test reports where no server is configured (never in CI: see above). */
export const NEEDS_POSTGRES =
  'needs TEST_DATABASE_URL (a real PostgreSQL server); not set, so the pool tests did not run';

/** A database under test: the adapter the tools use and a side door for fixtures and checks. */
export interface TestDatabase {
  readonly db: Queryable;
  rows(text: string, values?: unknown[]): Promise<Record<string, unknown>[]>;
  /** A Queryable whose connection is dead (on PGlite a database of its own, closed). */
  deadQueryable(): Promise<Queryable>;
  /** A Queryable over one connection of its own (a pool of one on PostgreSQL, the same PGlite). */
  oneConnection(options?: OneConnectionOptions): Promise<OneConnection>;
  close(): Promise<void>;
}

export interface OneConnectionOptions {
  /** Holds the first statement that opens a call's transaction this long, so an abort lands inside it. */
  readonly holdFirstTransactionStartMs?: number;
  /** `pgQueryable` options (PostgreSQL only). */
  readonly pg?: PgQueryableOptions;
}

/** One connection, and what a plain statement outside any tool sees on it. */
export interface OneConnection {
  readonly db: Queryable;
  /** Resolves once a statement of this connection sleeps on the server (PGlite: a transaction started). */
  holding(): Promise<void>;
  /**
   * The connection's settings, read by a plain statement: inside a call's transaction `readOnly` is
   * `on`, and in a transaction a cancel broke the statement fails (25P02).
   */
  settings(): Promise<{ readOnly: string; statementTimeout: string }>;
  close(): Promise<void>;
}

const SETTINGS = `SELECT current_setting('transaction_read_only') AS "readOnly",
  current_setting('statement_timeout') AS "statementTimeout"`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface Engine {
  readonly name: string;
  /** Whether an abort can stop a statement that is already running. */
  readonly cancelsRunningStatements: boolean;
  open(): Promise<TestDatabase>;
}

const FIXTURE = `
DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE;
CREATE SCHEMA ${SCHEMA};
CREATE TABLE ${SCHEMA}.orders (
  id integer PRIMARY KEY,
  customer_id integer NOT NULL,
  customer_email text NOT NULL,
  status text NOT NULL,
  total_cents integer NOT NULL,
  placed_on date NOT NULL,
  created_at timestamptz NOT NULL,
  note text
);
INSERT INTO ${SCHEMA}.orders VALUES
  (1, 1, 'alice@example.com', 'shipped', 1500, '2024-01-01', now() - interval '1 day', 'gift wrap please'),
  (2, 1, 'alice@example.com', 'pending', 2500, '2024-01-02', now() - interval '10 days', NULL),
  (3, 2, 'bob@example.com', 'shipped', 500, '2024-01-03', now() - interval '2 days', 'leave at door'),
  (4, 2, 'bob_smith@example.com', 'cancelled', 9900, '2024-01-04', now() - interval '40 days', '100% refund_due'),
  (5, 3, '50%off@example.com', 'delivered', 7000, '2024-01-05', now() - interval '3 days', NULL),
  (6, 3, 'a\\b@example.com', 'paid', 3000, '2024-01-05', now() - interval '5 days', 'path a\\b'),
  (7, 4, 'carol@example.org', 'shipped', 12000, '2024-01-31', now() - interval '100 days', NULL),
  (8, 4, 'o''hara@example.com', 'paid', 100, '2024-02-01', now() - interval '12 hours', 'gift');
CREATE VIEW ${SCHEMA}.slow_orders AS SELECT o.* FROM ${SCHEMA}.orders o, pg_sleep(0.3);
CREATE VIEW ${SCHEMA}.very_slow_orders AS SELECT o.* FROM ${SCHEMA}.orders o, pg_sleep(5);
`;

const pgliteEngine: Engine = {
  name: 'pglite',
  cancelsRunningStatements: false,
  async open() {
    // citext ships as a contrib bundle: loaded here, created by the tests that bind a citext column.
    const database = await createPGlite({ extensions: { citext } });
    await database.exec(FIXTURE);
    await database.exec(`CREATE ROLE ${NO_ACCESS_ROLE} NOLOGIN`);
    return {
      db: pgliteQueryable(database),
      async rows(text, values) {
        return (await database.query<Record<string, unknown>>(text, values)).rows;
      },
      async deadQueryable() {
        // Not this database: the tests that use it may run after, in any order. A PGlite started from
        // initdb's copy (test/pglite.ts) costs a fraction of a second.
        const dead = await createPGlite();
        await dead.close();
        return pgliteQueryable(dead);
      },
      async oneConnection(options = {}) {
        // PGlite is one connection already; the hold sits in front of the statement opening it.
        let holdMs = options.holdFirstTransactionStartMs;
        let held: () => void = () => undefined;
        const holding = new Promise<void>((resolve) => {
          held = resolve;
        });
        const db = pgliteQueryable({
          get closed() {
            return database.closed;
          },
          transaction: (callback) =>
            database.transaction((tx) =>
              callback({
                query: (text, values) => tx.query(text, values),
                async exec(text) {
                  if (text.startsWith('SET TRANSACTION READ ONLY')) {
                    held();
                    const ms = holdMs;
                    holdMs = undefined;
                    if (ms !== undefined) await sleep(ms);
                  }
                  return tx.exec(text);
                },
              }),
            ),
        });
        return {
          db,
          holding: () => holding,
          async settings() {
            return (await database.query<{ readOnly: string; statementTimeout: string }>(SETTINGS)).rows[0]!;
          },
          async close() {},
        };
      },
      async close() {
        if (!database.closed) await database.close();
      },
    };
  },
};

let oneConnections = 0;

const postgresEngine = (url: string): Engine => ({
  name: 'postgresql',
  cancelsRunningStatements: true,
  async open() {
    const pool = new pg.Pool({ connectionString: url, max: 4, application_name: APPLICATION_NAME });
    await pool.query(FIXTURE);
    await pool.query(`DROP ROLE IF EXISTS ${NO_ACCESS_ROLE}; CREATE ROLE ${NO_ACCESS_ROLE} NOLOGIN`);
    return {
      db: pgQueryable(pool),
      async rows(text, values) {
        return (await pool.query(text, values)).rows as Record<string, unknown>[];
      },
      async deadQueryable() {
        const client = new pg.Client({ connectionString: url, application_name: 'toolgate_sql_dead' });
        client.on('error', () => undefined);
        await client.connect();
        const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        await pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
        return pgQueryable(client);
      },
      async oneConnection(options = {}) {
        oneConnections += 1;
        const name = `toolgate_sql_one_${process.pid}_${oneConnections}`;
        const one = new pg.Pool({ connectionString: url, max: 1, application_name: name });
        let holdMs = options.holdFirstTransactionStartMs;
        // The first statement opening a call's transaction gets a pg_sleep between BEGIN and SET LOCAL:
        // a cancel then lands after BEGIN ran, as it can (rarely) in the real statement.
        const held = (text: string): string => {
          if (holdMs === undefined || !text.startsWith('BEGIN READ ONLY; ')) return text;
          const seconds = holdMs / 1000;
          holdMs = undefined;
          return text.replace('; ', `; SELECT pg_sleep(${seconds}); `);
        };
        const poolLike = {
          get totalCount() {
            return one.totalCount;
          },
          query: (text: string, values?: unknown[]) => one.query(text, values),
          async connect() {
            const client = await one.connect();
            return new Proxy(client, {
              get(target, property, receiver) {
                if (property === 'query') {
                  return (config: { name?: string; text: string; values?: unknown[] }) =>
                    target.query({ ...config, text: held(config.text) });
                }
                return Reflect.get(target, property, receiver);
              },
            });
          },
        };
        return {
          db: pgQueryable(poolLike as never, options.pg),
          async holding() {
            for (let i = 0; i < 500; i += 1) {
              const { rows } = await pool.query(
                `SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event = 'PgSleep'`,
                [name],
              );
              if (rows.length > 0) return;
              await sleep(10);
            }
            throw new Error('the held transaction start never ran');
          },
          async settings() {
            return (await one.query(SETTINGS)).rows[0];
          },
          close: () => one.end(),
        };
      },
      async close() {
        await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE; DROP ROLE IF EXISTS ${NO_ACCESS_ROLE}`);
        await pool.end();
      },
    };
  },
});

/** PGlite always; the real server too when TEST_DATABASE_URL is set. */
export const ENGINES: Engine[] = TEST_DATABASE_URL
  ? [pgliteEngine, postgresEngine(TEST_DATABASE_URL)]
  : [pgliteEngine];

/** A Queryable that records every transaction and statement before passing it on. */
export interface RecordingQueryable extends Queryable {
  readonly transactions: ReadOnlyOptions[];
  readonly statements: { text: string; values: readonly unknown[] }[];
}

export function recording(inner: Queryable): RecordingQueryable {
  const transactions: ReadOnlyOptions[] = [];
  const statements: { text: string; values: readonly unknown[] }[] = [];
  return {
    engine: inner.engine,
    transactions,
    statements,
    readOnly(options, work) {
      transactions.push(options);
      return inner.readOnly(options, (runner: QueryRunner) =>
        work({
          query(text, values) {
            statements.push({ text, values });
            return runner.query(text, values);
          },
        }),
      );
    },
  };
}

/** The same database, each transaction switched to a role without access to the schema. */
export function unprivileged(inner: Queryable): Queryable {
  return {
    engine: inner.engine,
    readOnly(options, work) {
      return inner.readOnly(options, async (runner) => {
        await runner.query(`SET LOCAL ROLE ${NO_ACCESS_ROLE}`, []);
        return work(runner);
      });
    },
  };
}
