// 3. search_orders at scale: 1,000,000 orders on PostgreSQL; the tool through a real client (full
// order-service stack, in-memory transport) vs the hand-written parameterized query via pg.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSilentLogger } from '@toolgate/core';
import { connectTestClient } from '@toolgate/core/testing';
import { createOrderService } from '@toolgate/order-service/service';
import pg from 'pg';
import { searchOrdersByHand } from '../src/bare-server.js';
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

export async function searchOrdersBench(): Promise<string> {
  const url = await benchDatabaseUrl();
  const orders = await seedBenchDatabase(url, (line) => process.stderr.write(`${line}\n`));
  const dir = await mkdtemp(join(tmpdir(), 'toolgate-bench-search-'));
  const service = await createOrderService(
    {
      databaseUrl: url,
      carrierUrl: 'http://127.0.0.1:9',
      auditFile: join(dir, 'audit.jsonl'),
      transport: 'pipe',
    },
    createSilentLogger(),
  );
  const client = await connectTestClient(service.createServer(), { sessionId: 'bench' });
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  const cases: { name: string; call: (k: number) => Promise<unknown> }[] = [
    {
      name: 'hand-written query via pg, read-only txn + statement_timeout (baseline)',
      call: (k) => searchOrdersByHand(pool, argsFor(k)),
    },
    {
      name: 'search_orders tool through a real client (full order-service stack)',
      call: async (k) => {
        const result = await client.callTool('search_orders', argsFor(k));
        if (result.isError) throw new Error(JSON.stringify(result.content));
        return result;
      },
    },
  ];
  try {
    // Same answer first.
    const byHand = await searchOrdersByHand(pool, argsFor(1));
    const viaTool = (await client.callTool('search_orders', argsFor(1))).structuredContent as {
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
    for (const bench of cases) for (let k = 0; k < CUSTOMERS; k += 1) await bench.call(k);
    // Interleaved call by call, the order alternating, so a noisy moment hits both alike.
    const samples = cases.map(() => [] as number[]);
    for (let k = CUSTOMERS; k < CUSTOMERS + CALLS; k += 1) {
      const order = k % 2 === 0 ? [0, 1] : [1, 0];
      for (const index of order) {
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
      `${CALLS} calls per case, interleaved call by call (alternating order), sequential, after a warm-up over the same customers. The tool runs the same statement (page and`,
      'total in one query) in a read-only transaction with a statement timeout, like the baseline. Target: within 10%.',
      '',
      ...lines,
      '',
    ].join('\n');
  } finally {
    await client.close();
    await service.close();
    await pool.end();
    await rm(dir, { recursive: true, force: true });
  }
}
