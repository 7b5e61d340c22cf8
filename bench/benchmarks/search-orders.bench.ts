// 3. search_orders at scale: 1,000,000 orders on PostgreSQL; the tool through a real client (full
// order-service stack, in-memory transport) vs the hand-written parameterized query via pg.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createSilentLogger, registerTools, type ToolDefinition } from '@toolgate/core';
import { connectTestClient, type TestClient } from '@toolgate/core/testing';
import { ORDER_STATUSES } from '@toolgate/order-service/db';
import { createOrderService, type OrderService, SERVER_INFO } from '@toolgate/order-service/service';
import { pgQueryable, sqlTool } from '@toolgate/sql';
import pg from 'pg';
import { HAND_WRITTEN_SEARCH, searchOrdersByHand } from '../src/bare-server.js';
import { benchDatabaseUrl, seedBenchDatabase } from '../src/bench-database.js';

const CALLS = Number(process.env.BENCH_SEARCH_CALLS ?? 2000);

// 500 customers spread over the table, warmed before measuring: the cache state is the same for both.
const CUSTOMERS = 500;

function argsFor(k: number): { customer_email: string; days: number; limit: number } {
  const customer = 1 + (k % CUSTOMERS) * 40;
  return {
    customer_email: `customer${customer < 1000 ? String(customer).padStart(3, '0') : customer}@`,
    // A new day count on every pass over the customers: no call repeats, so repeat-guard answers none.
    days: 90 - (Math.floor(k / CUSTOMERS) % 89),
    limit: 10,
  };
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

// The order-service limits each caller to 120 calls a minute (rate-limit): the calls are spread over
// this many authenticated callers (each with orders:read), so the limiter runs on every call but never
// refuses one. Every caller is a client of its own, as in production.
const CALLERS = Math.ceil((CALLS + CUSTOMERS) / 60);

// The order-service's search_orders declaration (apps/order-service/src/tools/orders.ts) over a
// read-only pool (readOnlySession: one round trip) whose statements are not prepared: what the
// service's read pool gives without preparedStatements, for comparison.
const SEARCH_TIMEOUT_MS = 2000;
function searchOrdersUnprepared(readPool: pg.Pool): ToolDefinition {
  return sqlTool({
    name: 'search_orders',
    title: 'Search orders',
    description: 'List orders by status, age and customer email, newest first by default.',
    db: pgQueryable(readPool, { readOnlySession: { timeoutMs: SEARCH_TIMEOUT_MS } }),
    from: 'orders',
    columns: [
      'order_id',
      'status',
      'customer_email',
      'total_cents',
      'currency',
      'item_count',
      'created_at',
      'shipped_at',
      'carrier',
      'tracking_number',
    ],
    filters: {
      status: { kind: 'enum', values: [...ORDER_STATUSES], description: 'Only orders in this status.' },
      days: {
        kind: 'withinDays',
        column: 'created_at',
        max: 90,
        default: 30,
        description: 'Only orders placed within the last N days.',
      },
      customer_email: { kind: 'prefix', maxLength: 100, description: 'Customer email prefix.' },
    },
    sort: {
      keys: { created_at: 'created_at', total: 'total_cents' },
      default: 'created_at_desc',
      tiebreaker: 'order_id',
    },
    limit: { default: 10, max: 50 },
    timeoutMs: SEARCH_TIMEOUT_MS,
    noun: 'orders',
  });
}

/** A real SDK client per caller, each over a server with `tools` behind the service's whole chain. */
async function connectCallers(
  service: OrderService,
  tools: readonly ToolDefinition[],
): Promise<TestClient[]> {
  return Promise.all(
    Array.from({ length: CALLERS }, (_, i) => {
      const server = new McpServer(SERVER_INFO);
      registerTools(server, tools, { middleware: [...service.middleware], logger: createSilentLogger() });
      return connectTestClient(server, {
        sessionId: `bench-${i}`,
        authInfo: {
          token: `bench-${i}`,
          clientId: 'bench',
          scopes: ['orders:read'],
          extra: { sub: `agent-${i}` },
        },
      });
    }),
  );
}

function callVia(clients: readonly TestClient[]): (k: number) => Promise<unknown> {
  return async (k) => {
    const result = await clients[k % clients.length]!.callTool('search_orders', argsFor(k));
    if (result.isError) throw new Error(JSON.stringify(result.content));
    return result;
  };
}

export async function searchOrdersBench(): Promise<string> {
  const url = await benchDatabaseUrl();
  const seedStarted = performance.now();
  const orders = await seedBenchDatabase(url, (line) => process.stderr.write(`${line}\n`));
  process.stderr.write(
    `search: database ready in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s\n`,
  );
  const dir = await mkdtemp(join(tmpdir(), 'toolgate-bench-search-'));
  // Two services, so each stack has its own policy state (a call never meets the other's repeat cache).
  const open = (name: string) =>
    createOrderService(
      {
        databaseUrl: url,
        carrierUrl: 'http://127.0.0.1:9',
        auditFile: join(dir, `audit-${name}.jsonl`),
        transport: 'pipe',
      },
      createSilentLogger(),
    );
  const stock = await open('stock');
  const unprepared = await open('unprepared');
  const readPool = new pg.Pool({ connectionString: url, max: 10 });
  const stockClients = await connectCallers(stock, stock.tools);
  const unpreparedClients = await connectCallers(unprepared, [
    searchOrdersUnprepared(readPool),
    ...unprepared.tools.filter((tool) => tool.name !== 'search_orders'),
  ]);
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  // The floor: the same statement, prepared, alone on a connection that is read-only with the timeout
  // (what the service's read pool sends per call), straight through pg: no MCP, no policy. What the
  // tool costs beyond it is the MCP round trip, core and the policies; what the baseline costs beyond
  // it is the two other round trips of its transaction.
  const floorPool = new pg.Pool({
    connectionString: url,
    max: 10,
    options: '-c default_transaction_read_only=on -c statement_timeout=2000',
  });
  const cases: { name: string; call: (k: number) => Promise<unknown> }[] = [
    {
      name: 'hand-written query via pg, read-only txn + statement_timeout (baseline, 3 round trips)',
      call: (k) => searchOrdersByHand(pool, argsFor(k)),
    },
    {
      name: 'floor: the same statement prepared, one round trip on a read-only connection, via pg (no MCP, no policy)',
      call: async (k) => {
        const args = argsFor(k);
        const like = `${args.customer_email.replace(/[\\%_]/g, '\\$&')}%`;
        return (
          await floorPool.query({
            name: 'search',
            text: HAND_WRITTEN_SEARCH,
            values: [args.days, like, args.limit],
          })
        ).rows;
      },
    },
    {
      name: 'search_orders, full stack, order-service as shipped (read pool: readOnlySession + preparedStatements, 1 round trip)',
      call: callVia(stockClients),
    },
    {
      name: 'search_orders, full stack, the same read pool without preparedStatements (1 round trip, parsed each call)',
      call: callVia(unpreparedClients),
    },
  ];
  try {
    // Same answer first.
    const byHand = await searchOrdersByHand(pool, argsFor(1));
    for (const clients of [stockClients, unpreparedClients]) {
      const viaTool = (await clients[0]!.callTool('search_orders', argsFor(1))).structuredContent as {
        items: { order_id: string }[];
        total: number;
      };
      if (
        JSON.stringify(viaTool.items.map((item) => item.order_id)) !==
          JSON.stringify(byHand.items.map((item) => item.order_id)) ||
        viaTool.total !== byHand.total
      ) {
        throw new Error('the tool and the hand-written query disagree');
      }
    }
    for (const bench of cases) for (let k = 0; k < CUSTOMERS; k += 1) await bench.call(k);
    // Interleaved call by call, the order alternating, so a noisy moment hits both alike.
    const samples = cases.map(() => [] as number[]);
    // Each case in each position equally often (a rotation per call).
    const rotations = cases.map((_, shift) => cases.map((__, index) => (index + shift) % cases.length));
    for (let k = CUSTOMERS; k < CUSTOMERS + CALLS; k += 1) {
      for (const index of rotations[k % rotations.length]!) {
        const bench = cases[index]!;
        const started = performance.now();
        await bench.call(k);
        samples[index]!.push((performance.now() - started) * 1000);
      }
    }
    const sorted = samples.map((values) => [...values].sort((a, b) => a - b));
    const base = sorted[0]!;
    const lines = [
      '| case | p50 µs | p99 µs | mean µs | p50 ratio | p99 ratio |',
      '|---|---:|---:|---:|---:|---:|',
      ...cases.map((bench, index) => {
        const values = sorted[index]!;
        const mean = values.reduce((sum, value) => sum + value, 0) / values.length;
        return `| ${bench.name} | ${percentile(values, 50).toFixed(0)} | ${percentile(values, 99).toFixed(0)} | ${mean.toFixed(0)} | ${(percentile(values, 50) / percentile(base, 50)).toFixed(3)}x | ${(percentile(values, 99) / percentile(base, 99)).toFixed(3)}x |`;
      }),
    ];
    return [
      '## 3. search_orders at scale',
      '',
      `${orders.toLocaleString('en')} orders on PostgreSQL, \`search_orders { customer_email: <one of ${CUSTOMERS} customers>, days: 2 to 90, limit: 10 }\`,`,
      `${CALLS} calls per case, interleaved call by call (rotating order), sequential, after a warm-up over the same customers, spread over ${CALLERS} callers`,
      "(the service's per-caller rate limit). The tool runs the same statement (page and total in one query), read-only with a statement timeout like the",
      "baseline, which sends `BEGIN READ ONLY; SET LOCAL statement_timeout`, the statement, `COMMIT`: the service's read pool carries both on the connection",
      '(set once per connection), so a call is the statement alone, and prepares it once per connection (PostgreSQL then neither parses nor analyses it again).',
      'Target: <= 1.0x the baseline. The floor row is the statement alone (no MCP, no policy), for where the time goes: the tool',
      'costs the floor plus the MCP round trip, core and the policies; the baseline costs the floor plus two more round trips.',
      '',
      ...lines,
      '',
    ].join('\n');
  } finally {
    await Promise.all([...stockClients, ...unpreparedClients].map((client) => client.close()));
    await stock.close();
    await unprepared.close();
    await readPool.end();
    await pool.end();
    await floorPool.end();
    await rm(dir, { recursive: true, force: true });
  }
}
