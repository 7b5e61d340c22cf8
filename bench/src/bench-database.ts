import { setupDatabase } from '@toolgate/order-service/db';
import pg from 'pg';

export const BENCH_ORDERS = 1_000_000;
export const BENCH_CUSTOMERS = 20_000;
const BENCH_DATABASE = 'toolgate_bench';

/**
 * The benchmark database: `BENCH_DATABASE_URL` as given, else database `toolgate_bench` on the server of
 * `TEST_DATABASE_URL` (else the local server), created when missing. A database of its own, so the
 * million orders never meet another package's tests.
 */
export async function benchDatabaseUrl(): Promise<string> {
  if (process.env.BENCH_DATABASE_URL) return process.env.BENCH_DATABASE_URL;
  const admin = new URL(process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test');
  const client = new pg.Client({ connectionString: admin.href });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [BENCH_DATABASE]);
    if (rowCount === 0) await client.query(`CREATE DATABASE ${BENCH_DATABASE}`);
  } finally {
    await client.end();
  }
  admin.pathname = `/${BENCH_DATABASE}`;
  return admin.href;
}

// The order-service's own seed (10,000 orders, 200 customers) extended with the same arithmetic to
// 1,000,000 orders over 20,000 customers. Deterministic, and skipped once the count is there.
// lpad(x, 3) cuts longer numbers, so ids from 1000 up are written whole; g is bigint (g * 7907 > 2^31).
const padded = (column: string): string =>
  `CASE WHEN ${column} < 1000 THEN lpad(${column}::text, 3, '0') ELSE ${column}::text END`;

const EXTEND_SQL = `
INSERT INTO customers (id, email, name)
SELECT g, 'customer' || ${padded('g')} || '@example.com', 'Customer ' || g
FROM generate_series(1, ${BENCH_CUSTOMERS}) AS g
ON CONFLICT (id) DO NOTHING;

INSERT INTO orders (order_id, customer_id, customer_email, status, total_cents, currency, item_count,
                    created_at, shipped_at, carrier, tracking_number)
SELECT
  (4000000000000000 + g * 7919)::text, c, 'customer' || ${padded('c')} || '@example.com', s,
  500 + (g * 7907) % 49500, CASE WHEN g % 5 = 0 THEN 'EUR' ELSE 'USD' END, 1 + (g * 31) % 6,
  date_trunc('second', now()) - make_interval(days => ((g * 7) % 120)::int, secs => ((g * 97) % 86400)::int),
  CASE WHEN s IN ('shipped', 'delivered') THEN
    date_trunc('second', now()) - make_interval(days => ((g * 7) % 120)::int, secs => ((g * 97) % 86400)::int)
      + interval '1 day' END,
  CASE WHEN s IN ('shipped', 'delivered') THEN 'Parcelwise' END,
  CASE WHEN s IN ('shipped', 'delivered') THEN 'TRK' || lpad(g::text, 8, '0') END
FROM (
  SELECT g, (1 + (g * 37) % ${BENCH_CUSTOMERS})::int AS c,
         (ARRAY['pending','paid','shipped','delivered','cancelled','refunded'])[(1 + (g * 13) % 6)::int] AS s
  FROM generate_series(1::bigint, ${BENCH_ORDERS}) AS g
) AS seed
ON CONFLICT (order_id) DO NOTHING;
`;

/** Creates the order-service schema and seeds 1,000,000 orders, once; later runs only count. */
export async function seedBenchDatabase(url: string, log: (line: string) => void): Promise<number> {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  try {
    await setupDatabase({ runScript: async (sql: string) => void (await pool.query(sql)) });
    const count = async (): Promise<number> =>
      Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM orders')).rows[0]!.n);
    if ((await count()) < BENCH_ORDERS) {
      log(`seeding ${BENCH_ORDERS.toLocaleString('en')} orders (once; about a minute) ...`);
      await pool.query(EXTEND_SQL);
      await pool.query('VACUUM ANALYZE orders');
    }
    return await count();
  } finally {
    await pool.end();
  }
}
