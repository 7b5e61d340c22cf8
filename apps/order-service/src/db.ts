import { createHash } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';

/** The order statuses, in lifecycle order. Published in the `orders://schema` resource. */
export const ORDER_STATUSES = ['pending', 'paid', 'shipped', 'delivered', 'cancelled', 'refunded'] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

/** The order fields a model may see, with their meaning (also the `orders://schema` resource). */
export const ORDER_FIELDS = {
  order_id: '16-digit order id',
  customer_id: 'numeric customer id',
  customer_email: "the customer's email address",
  status: `one of ${ORDER_STATUSES.join(', ')}`,
  total_cents: 'order total in cents',
  currency: 'ISO 4217 currency code',
  item_count: 'number of items',
  created_at: 'when the order was placed (ISO 8601, UTC)',
  shipped_at: 'when it left the warehouse, if it did',
  carrier: 'carrier name, if shipped',
  tracking_number: "carrier's tracking number, if shipped",
} as const;

export const SEED_CUSTOMERS = 200;
export const SEED_ORDERS = 10_000;

// The idempotency key of the call that made each change (databases set up before it get the column on
// start): a retry whose first run committed but never heard so (a lost acknowledgement, a crash before
// idempotency stored the result) finds that change instead of making a second one.
const WRITE_CALL_KEYS_SQL = `
ALTER TABLE refunds ADD COLUMN IF NOT EXISTS call_key text;
ALTER TABLE order_cancellations ADD COLUMN IF NOT EXISTS call_key text;
`;

// Idempotent: safe to run on every start and by `db:setup` against PostgreSQL.
const SCHEMA_SQL = `
CREATE TABLE IF NOT EXISTS customers (
  id integer PRIMARY KEY,
  email text NOT NULL UNIQUE,
  name text NOT NULL
);
CREATE TABLE IF NOT EXISTS orders (
  order_id text PRIMARY KEY CHECK (order_id ~ '^[0-9]{16}$'),
  customer_id integer NOT NULL REFERENCES customers(id),
  customer_email text NOT NULL,
  status text NOT NULL CHECK (status IN (${ORDER_STATUSES.map((s) => `'${s}'`).join(', ')})),
  total_cents integer NOT NULL,
  currency text NOT NULL,
  item_count integer NOT NULL,
  created_at timestamptz NOT NULL,
  shipped_at timestamptz,
  carrier text,
  tracking_number text
);
CREATE INDEX IF NOT EXISTS orders_status_created_idx ON orders (status, created_at DESC);
CREATE INDEX IF NOT EXISTS orders_customer_created_idx ON orders (customer_id, created_at DESC);
CREATE INDEX IF NOT EXISTS orders_email_idx ON orders (customer_email text_pattern_ops);
-- Written only by request_refund and cancel_order, one row per confirmed change, never updated.
CREATE TABLE IF NOT EXISTS refunds (
  refund_id uuid PRIMARY KEY,
  order_id text NOT NULL REFERENCES orders(order_id),
  amount_cents integer NOT NULL CHECK (amount_cents > 0),
  reason text NOT NULL,
  requested_by text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS refunds_order_idx ON refunds (order_id);
CREATE TABLE IF NOT EXISTS order_cancellations (
  order_id text PRIMARY KEY REFERENCES orders(order_id),
  previous_status text NOT NULL,
  reason text NOT NULL,
  requested_by text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
${WRITE_CALL_KEYS_SQL}`;

// Deterministic: every value is arithmetic on the row number, so each seeded database holds the
// same orders. Dates are relative to the moment of seeding; on PostgreSQL, which outlives a process,
// openDatabase re-anchors them to now on every start (see reanchorSeed), so "last N days" always finds some.
const SEED_SQL = `
INSERT INTO customers (id, email, name)
SELECT g, 'customer' || lpad(g::text, 3, '0') || '@example.com', 'Customer ' || g
FROM generate_series(1, ${SEED_CUSTOMERS}) AS g
ON CONFLICT (id) DO NOTHING;

INSERT INTO orders (order_id, customer_id, customer_email, status, total_cents, currency, item_count,
                    created_at, shipped_at, carrier, tracking_number)
SELECT
  (4000000000000000 + g * 7919)::text,
  c,
  'customer' || lpad(c::text, 3, '0') || '@example.com',
  s,
  500 + (g * 7907) % 49500,
  CASE WHEN g % 5 = 0 THEN 'EUR' ELSE 'USD' END,
  1 + (g * 31) % 6,
  date_trunc('second', now()) - make_interval(days => (g * 7) % 120, secs => (g * 97) % 86400),
  CASE WHEN s IN ('shipped', 'delivered') THEN
    date_trunc('second', now()) - make_interval(days => (g * 7) % 120, secs => (g * 97) % 86400)
      + interval '1 day' END,
  CASE WHEN s IN ('shipped', 'delivered') THEN 'Parcelwise' END,
  CASE WHEN s IN ('shipped', 'delivered') THEN 'TRK' || lpad(g::text, 8, '0') END
FROM (
  SELECT g, 1 + (g * 37) % ${SEED_CUSTOMERS} AS c,
         (ARRAY['pending','paid','shipped','delivered','cancelled','refunded'])[1 + (g * 13) % 6] AS s
  FROM generate_series(1, ${SEED_ORDERS}) AS g
) AS seed
ON CONFLICT (order_id) DO NOTHING;
`;

/** An open database: embedded PGlite by default, PostgreSQL when a URL is given. */
export interface OrderDatabase {
  readonly kind: 'pglite' | 'postgres';
  readonly pglite: PGlite | undefined;
  readonly pool: pg.Pool | undefined;
  /**
   * PostgreSQL only: a pool of its own for the read-only tools, whose connections are made read-only
   * with a statement timeout once (`@toolgate/sql`'s `readOnlySession`): a read is one round trip.
   */
  readonly readPool: pg.Pool | undefined;
  /** Runs SQL text written by this app (schema, seed); never model input. */
  runScript(sql: string): Promise<void>;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** PostgreSQL connection string; embedded PGlite when absent. @default process.env.DATABASE_URL */
  url?: string | undefined;
  /** Apply the schema and the seed (always on for PGlite, which starts empty). @default false */
  setup?: boolean;
}

export async function openDatabase(options: OpenDatabaseOptions = {}): Promise<OrderDatabase> {
  if (options.url) {
    // The connect timeout (also the longest wait for a free connection) is shorter than the orders-db
    // breaker's 5 s deadline: a database that drops packets fails the call within its deadline, as a
    // counted failure, instead of leaving it to hang.
    const pool = new pg.Pool({ connectionString: options.url, max: 4, connectionTimeoutMillis: 2000 });
    const readPool = new pg.Pool({ connectionString: options.url, max: 10, connectionTimeoutMillis: 2000 });
    // An idle client's error (the server went away) must not crash the process; the next query reports it.
    pool.on('error', () => {});
    readPool.on('error', () => {});
    const database: OrderDatabase = {
      kind: 'postgres',
      pglite: undefined,
      pool,
      readPool,
      runScript: async (sql) => {
        await pool.query(sql);
      },
      close: async () => {
        await Promise.all([pool.end(), readPool.end()]);
      },
    };
    if (options.setup) await setupDatabase(database);
    else await addWriteCallKeys(pool);
    await reanchorSeed(pool);
    return database;
  }
  const pglite = await openPglite();
  const database: OrderDatabase = {
    kind: 'pglite',
    pglite,
    pool: undefined,
    readPool: undefined,
    runScript: async (sql) => {
      await pglite.exec(sql);
    },
    close: () => pglite.close(),
  };
  return database;
}

/**
 * The seeded PGlite data directory the build leaves beside this module (`pnpm build` runs
 * `dist/pglite-image.js`), named by a digest of the schema and seed it holds, so an image built from
 * other SQL is never loaded. Loading it takes about a quarter of what creating and seeding takes (the
 * embedded PostgreSQL's initdb and 10,000 inserts): every start on PGlite pays it, the demo's and each
 * test server's.
 */
const PGLITE_IMAGE_NAME = `pglite-seed-${createHash('sha256').update(SCHEMA_SQL).update(SEED_SQL).digest('hex').slice(0, 16)}.tar.gz`;
export const PGLITE_IMAGE = fileURLToPath(new URL(`./${PGLITE_IMAGE_NAME}`, import.meta.url));

/**
 * Where an image may be: beside this module, and, when this module runs from `src/` (the tests, `tsx`),
 * in the build's `dist/` beside it. The name's digest is of this module's own SQL, so an image the build
 * made from other SQL is never found.
 */
const PGLITE_IMAGES = [
  PGLITE_IMAGE,
  ...(import.meta.url.includes('/src/')
    ? [fileURLToPath(new URL(`../dist/${PGLITE_IMAGE_NAME}`, import.meta.url))]
    : []),
];

/**
 * Embedded PGlite with the schema and the seed: loaded from the build's image when there is one (its
 * dates re-anchored to now, so it reads exactly as a database seeded at this second), else created and
 * seeded here (running from source, or an image that does not load).
 */
async function openPglite(): Promise<PGlite> {
  let image: Buffer | undefined;
  for (const path of PGLITE_IMAGES) {
    image ??= await readFile(path).catch(() => undefined);
  }
  if (image !== undefined) {
    let loaded: PGlite | undefined;
    try {
      loaded = await PGlite.create({ loadDataDir: new Blob([image]) });
      await loaded.query(REANCHOR_SQL, [ANCHOR_ORDER_ID, '0 seconds']);
      return loaded;
    } catch {
      // A damaged image, or one a PGlite of another version cannot read: seeded afresh below.
      await loaded?.close().catch(() => undefined);
    }
  }
  const pglite = await PGlite.create();
  await setupDatabase({ runScript: async (sql) => void (await pglite.exec(sql)) });
  return pglite;
}

/** Creates and seeds a PGlite database and writes its data directory to `path` (atomically). */
export async function writePgliteImage(path: string = PGLITE_IMAGE): Promise<void> {
  const pglite = await PGlite.create();
  try {
    await setupDatabase({ runScript: async (sql) => void (await pglite.exec(sql)) });
    const image = await pglite.dumpDataDir('gzip');
    const partial = `${path}.${process.pid}.partial`;
    await writeFile(partial, Buffer.from(await image.arrayBuffer()));
    await rename(partial, path);
  } finally {
    await pglite.close();
  }
}

/** Creates the tables and indexes and inserts the seed, idempotently. */
export async function setupDatabase(database: Pick<OrderDatabase, 'runScript'>): Promise<void> {
  await database.runScript(SCHEMA_SQL);
  await database.runScript(SEED_SQL);
}

/**
 * Gives a database set up by an earlier version the write tables' `call_key` column. Skipped where the
 * schema is missing or the user may not alter it (a read-only role, which cannot write either).
 */
async function addWriteCallKeys(pool: pg.Pool): Promise<void> {
  try {
    // Looked up first: ALTER TABLE waits for (and queues) every lock on the table, even with IF NOT EXISTS.
    const present = await pool.query(
      `SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
         AND table_name IN ('refunds', 'order_cancellations') AND column_name = 'call_key'`,
    );
    if (present.rowCount === 2) return;
    await pool.query(WRITE_CALL_KEYS_SQL);
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code !== '42P01' && code !== '42501') throw error;
  }
}

// Row g = 120 of the seed was placed 0 days and (120 * 97) s before the moment of seeding, so that
// moment can be read back from the data itself (also in databases seeded before this existed).
const ANCHOR_ORDER_ID = String(4000000000000000 + 120 * 7919);
const ANCHOR_OFFSET_SECONDS = (120 * 97) % 86400;
const SEEDED_ROW = `(order_id::bigint - 4000000000000000) % 7919 = 0
  AND order_id::bigint BETWEEN 4000000000007919 AND ${4000000000000000 + SEED_ORDERS * 7919}`;

// Moves the seeded rows by the time since seeding ($1: the anchor order, $2: the least shift that moves).
const REANCHOR_SQL = `WITH anchor AS (
    SELECT date_trunc('second', now()) - (created_at + make_interval(secs => ${ANCHOR_OFFSET_SECONDS})) AS shift
    FROM orders WHERE order_id = $1
  ), moved AS (
    UPDATE orders SET created_at = created_at + anchor.shift, shipped_at = shipped_at + anchor.shift
    FROM anchor WHERE anchor.shift > $2::interval AND ${SEEDED_ROW}
    RETURNING 1
  )
  SELECT CASE WHEN (SELECT count(*) FROM moved) > 0 THEN (SELECT shift::text FROM anchor) END AS shift`;

/**
 * Moves the seeded orders' dates forward so the seed looks placed now, when it was seeded more than
 * an hour ago: a PostgreSQL seeded by `db:setup` 90 days back would otherwise find nothing for
 * "last 30 days". Only seeded rows move. An advisory lock keeps replicas starting together from
 * shifting twice. Skipped where the schema is missing or the user may not write (read-only role).
 */
export async function reanchorSeed(pool: pg.Pool): Promise<{ shiftedBy: string | null }> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query("SELECT pg_advisory_xact_lock(hashtext('toolgate order-service seed anchor'))");
    const { rows } = await client.query<{ shift: string | null }>(REANCHOR_SQL, [ANCHOR_ORDER_ID, '1 hour']);
    await client.query('COMMIT');
    return { shiftedBy: rows[0]?.shift ?? null };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    // 42P01: no orders table yet (db:setup not run); 42501: a read-only role. Neither stops a start.
    const code = (error as { code?: string }).code;
    if (code === '42P01' || code === '42501') return { shiftedBy: null };
    throw error;
  } finally {
    client.release();
  }
}
