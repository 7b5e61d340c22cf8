// search_orders through the tool vs the same hand-written parameterized query with pg, on 1,000,000
// orders. Run: `pnpm bench` (BENCH_DATABASE_URL, else TEST_DATABASE_URL, else the local server).
import { compareCalls, formatBenchTable } from '@toolgate/bench-harness';
import { createTestContext } from '@toolgate/core/testing';
import pg from 'pg';
import { pgQueryable, type SqlToolOptions, sqlTool } from '../src/index.js';

const URL =
  process.env.BENCH_DATABASE_URL ??
  process.env.TEST_DATABASE_URL ??
  'postgres://postgres@127.0.0.1:5432/test';
const SCHEMA = 'toolgate_sql_bench';
const ROWS = 1_000_000;
const TIMEOUT_MS = 5000;
const STATUSES = ['pending', 'paid', 'shipped', 'delivered', 'cancelled'] as const;

// The indexes the declaration implies: status + created_at for the status/days filters and the sort,
// text_pattern_ops for the email prefix (LIKE 'x%' on a non-C collation).
const SEED = `
CREATE SCHEMA IF NOT EXISTS ${SCHEMA};
DROP TABLE IF EXISTS ${SCHEMA}.orders;
CREATE TABLE ${SCHEMA}.orders (
  id bigint PRIMARY KEY,
  customer_id integer NOT NULL,
  customer_email text NOT NULL,
  status text NOT NULL,
  total_cents integer NOT NULL,
  created_at timestamptz NOT NULL
);
INSERT INTO ${SCHEMA}.orders
SELECT g, (g % 20000) + 1, 'customer' || ((g % 20000) + 1) || '@example.com',
       (ARRAY['pending','paid','shipped','delivered','cancelled'])[(g / 7) % 5 + 1],
       ((g::bigint * 7919) % 100000)::int, now() - ((g % 525600) * interval '1 minute')
FROM generate_series(1, ${ROWS}) AS g;
CREATE INDEX ON ${SCHEMA}.orders (status, created_at DESC);
CREATE INDEX ON ${SCHEMA}.orders (customer_email text_pattern_ops);
`;

const pool = new pg.Pool({ connectionString: URL, max: 4, application_name: 'toolgate_sql_bench' });

async function seedIfMissing(): Promise<void> {
  const { rows } = await pool
    .query<{ n: string | null }>(
      `SELECT CASE WHEN to_regclass('${SCHEMA}.orders') IS NULL THEN NULL ELSE (SELECT count(*) FROM ${SCHEMA}.orders WHERE id <= ${ROWS}) END AS n`,
    )
    .catch(() => ({ rows: [{ n: null }] }));
  if (rows[0]?.n === String(ROWS)) return;
  process.stderr.write(`seeding ${ROWS} orders into ${SCHEMA}.orders ...\n`);
  await pool.query(SEED);
  await pool.query(`VACUUM ANALYZE ${SCHEMA}.orders`);
}

const declaration: SqlToolOptions = {
  name: 'search_orders',
  description: 'Search orders by status, age and customer email.',
  db: pgQueryable(pool),
  from: { schema: SCHEMA, table: 'orders' },
  columns: ['id', 'status', { column: 'customer_email', as: 'email' }, 'total_cents', 'created_at'],
  filters: {
    status: { kind: 'enum', values: STATUSES, description: 'Only orders in this status.' },
    days: { kind: 'withinDays', column: 'created_at', max: 365, default: 30, description: 'Within N days.' },
    customer_email: { kind: 'prefix', maxLength: 100, description: 'Email starts with.' },
  },
  sort: {
    keys: { created_at: 'created_at', total: 'total_cents' },
    default: 'created_at_desc',
    tiebreaker: 'id',
  },
  limit: { default: 20, max: 50 },
  timeoutMs: TIMEOUT_MS,
  noun: 'orders',
};

// Exactly what a careful developer writes by hand for the same call.
const HAND_WRITTEN = `SELECT "id", "status", "customer_email" AS "email", "total_cents", "created_at",
  (SELECT count(*) FROM "${SCHEMA}"."orders" WHERE "status" = $1 AND "created_at" >= now() - make_interval(days => $2) AND "customer_email" LIKE $3 ESCAPE E'\\\\') AS "_toolgate_total"
  FROM "${SCHEMA}"."orders" WHERE "status" = $1 AND "created_at" >= now() - make_interval(days => $2) AND "customer_email" LIKE $3 ESCAPE E'\\\\'
  ORDER BY "created_at" DESC, "id" DESC LIMIT $4`;

function argsFor(index: number): {
  status: (typeof STATUSES)[number];
  days: number;
  customer_email: string;
  limit: number;
} {
  // One customer's orders of one status in the last year: a typical support question, answered from
  // the email index in well under a millisecond, so the tool's own overhead is what shows.
  return {
    status: STATUSES[index % 5]!,
    days: 365,
    customer_email: `customer${1000 + (index % 9000)}@`,
    limit: 20,
  };
}

async function handWrittenInTransaction(index: number): Promise<unknown[]> {
  const args = argsFor(index);
  const client = await pool.connect();
  try {
    await client.query(`BEGIN READ ONLY; SET LOCAL statement_timeout = ${TIMEOUT_MS}`);
    const { rows } = await client.query(HAND_WRITTEN, [
      args.status,
      args.days,
      `${args.customer_email}%`,
      args.limit,
    ]);
    await client.query('COMMIT');
    return rows;
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
}

async function handWrittenBare(index: number): Promise<unknown[]> {
  const args = argsFor(index);
  return (await pool.query(HAND_WRITTEN, [args.status, args.days, `${args.customer_email}%`, args.limit]))
    .rows;
}

const tool = sqlTool(declaration);
const ctx = createTestContext({ tool });

async function throughTool(index: number): Promise<unknown> {
  const result = await tool.handler(argsFor(index), ctx);
  if (result.isError) throw new Error(JSON.stringify(result.content));
  return result;
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** Per-call latencies, cases interleaved call by call: median and p99 in µs. */
async function latencies(
  cases: { name: string; call: (i: number) => Promise<unknown> }[],
  calls: number,
): Promise<string> {
  const samples = cases.map(() => [] as number[]);
  for (let i = 0; i < calls; i += 1) {
    for (const [index, bench] of cases.entries()) {
      const started = performance.now();
      await bench.call(i);
      samples[index]!.push((performance.now() - started) * 1000);
    }
  }
  const baseline = [...samples[0]!].sort((a, b) => a - b);
  const lines = ['| case | median µs | p99 µs | median ratio | p99 ratio |', '|---|---:|---:|---:|---:|'];
  for (const [index, bench] of cases.entries()) {
    const sorted = [...samples[index]!].sort((a, b) => a - b);
    const median = percentile(sorted, 50);
    const p99 = percentile(sorted, 99);
    lines.push(
      `| ${bench.name} | ${median.toFixed(0)} | ${p99.toFixed(0)} | ${(median / percentile(baseline, 50)).toFixed(3)}x | ${(p99 / percentile(baseline, 99)).toFixed(3)}x |`,
    );
  }
  return lines.join('\n');
}

await seedIfMissing();
const cases = [
  { name: 'hand-written pg, read-only txn + statement_timeout (baseline)', call: handWrittenInTransaction },
  { name: 'sqlTool search_orders (handler: build, txn, rows, ok())', call: throughTool },
  { name: 'hand-written pg, bare query (no txn)', call: handWrittenBare },
];
const rows = await compareCalls(cases, { callsPerRound: 200, rounds: 15, warmup: 200 });
process.stdout.write(
  `\n## search_orders on ${ROWS.toLocaleString('en')} orders, sequential\n\n${formatBenchTable(rows)}\n`,
);
process.stdout.write(
  `\n## per-call latency (1000 calls each, interleaved)\n\n${await latencies(cases, 1000)}\n`,
);
await pool.end();
