// Development only: where search_orders' time goes beyond the statement itself. Interleaved call by
// call: the hand-written three-statement baseline, the statement alone (prepared, one round trip on a
// read-only connection, via pg), the bare SDK running that statement, core's empty chain over the
// order-service's search_orders tool, and the order-service's full stack (as section 3 of RESULTS.md).
// npx tsx benchmarks/search-breakdown.ts [calls] [case name prefix]   (SHAPE=1 prints a result's shape)
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createSilentLogger, registerTools } from '@toolgate/core';
import { connectTestClient } from '@toolgate/core/testing';
import { createOrderService, SERVER_INFO } from '@toolgate/order-service/service';
import pg from 'pg';
import * as z from 'zod';
import { HAND_WRITTEN_SEARCH, searchOrdersByHand } from '../src/bare-server.js';
import { benchDatabaseUrl } from '../src/bench-database.js';

const CALLS = Number(process.argv[2] ?? 3000);
const only = process.argv[3];
const url = await benchDatabaseUrl();
const argsFor = (k: number) => {
  const customer = 1 + (k % 500) * 40;
  return {
    customer_email: `customer${customer < 1000 ? String(customer).padStart(3, '0') : customer}@`,
    days: 90 - (Math.floor(k / 500) % 89),
    limit: 10,
  };
};
const dir = await mkdtemp(join(tmpdir(), 'sob-'));
const svc = await createOrderService(
  { databaseUrl: url, carrierUrl: 'http://127.0.0.1:9', auditFile: join(dir, 'a.jsonl'), transport: 'pipe' },
  createSilentLogger(),
);
const clients = await Promise.all(
  Array.from({ length: Math.ceil((CALLS + 600) / 100) }, (_, i) => {
    const server = new McpServer(SERVER_INFO);
    registerTools(server, svc.tools, { middleware: [...svc.middleware], logger: createSilentLogger() });
    return connectTestClient(server, {
      sessionId: `b-${i}`,
      authInfo: { token: `b-${i}`, clientId: 'bench', scopes: ['orders:read'], extra: { sub: `agent-${i}` } },
    });
  }),
);
const pool = new pg.Pool({ connectionString: url, max: 10 });
const floorPool = new pg.Pool({
  connectionString: url,
  max: 10,
  options: '-c default_transaction_read_only=on -c statement_timeout=2000',
});
const bare = new McpServer({ name: 'bare', version: '1' });
bare.registerTool(
  'search_orders',
  {
    description: 'x',
    inputSchema: {
      customer_email: z.string().max(100),
      days: z.number().int().min(1).max(90).default(30),
      limit: z.number().int().min(1).max(50).default(10),
    },
  },
  async (a) => {
    const r = await floorPool.query({
      name: 'so',
      text: HAND_WRITTEN_SEARCH,
      values: [a.days, `${a.customer_email}%`, a.limit],
    });
    const total = r.rows.length > 0 ? Number(r.rows[0].total) : 0;
    const data = { items: r.rows.map(({ total: _t, ...row }) => row), total };
    return { content: [{ type: 'text', text: JSON.stringify(data) }], structuredContent: data };
  },
);
const bareClient = await connectTestClient(bare, { sessionId: 'bare' });
const emptyServer = new McpServer(SERVER_INFO);
registerTools(emptyServer, svc.tools, { middleware: [], logger: createSilentLogger() });
const emptyClient = await connectTestClient(emptyServer, {
  sessionId: 'e',
  authInfo: { token: 'e', clientId: 'bench', scopes: ['orders:read'], extra: { sub: 'agent-e' } },
});
const cases: [string, (k: number) => Promise<unknown>][] = [
  ['baseline 3rt', (k) => searchOrdersByHand(pool, argsFor(k))],
  [
    'floor prepared 1rt',
    async (k) => {
      const a = argsFor(k);
      const r = await floorPool.query({
        name: 'so',
        text: HAND_WRITTEN_SEARCH,
        values: [a.days, `${a.customer_email}%`, a.limit],
      });
      return r.rows;
    },
  ],
  ['bare sdk floor', async (k) => bareClient.callTool('search_orders', argsFor(k))],
  [
    'empty chain tool',
    async (k) => {
      const r = await emptyClient.callTool('search_orders', argsFor(k));
      if (r.isError) throw new Error(JSON.stringify(r.content));
      return r;
    },
  ],
  [
    'tool full stack',
    async (k) => {
      const r = await clients[k % clients.length]!.callTool('search_orders', argsFor(k));
      if (r.isError) throw new Error(JSON.stringify(r.content));
      return r;
    },
  ],
];
const use = only ? cases.filter(([n]) => n.startsWith(only)) : cases;
if (process.env.SHAPE) {
  const r = await clients[0]!.callTool('search_orders', argsFor(7));
  process.stderr.write(
    `${JSON.stringify({
      keys: Object.keys(r),
      meta: r._meta,
      n: r.content.length,
      sc: Object.keys(r.structuredContent ?? {}),
    })}\n`,
  );
}
for (const [, c] of use) for (let k = 0; k < 500; k++) await c(k);
const samples = use.map(() => [] as number[]);
for (let k = 500; k < 500 + CALLS; k++) {
  for (let j = 0; j < use.length; j++) {
    const i = (j + k) % use.length;
    const t = performance.now();
    await use[i]![1](k);
    samples[i]!.push((performance.now() - t) * 1000);
  }
}
for (let i = 0; i < use.length; i++) {
  const s = samples[i]!.sort((a, b) => a - b);
  process.stderr.write(
    `${use[i]![0]}: p50 ${s[s.length >> 1]!.toFixed(0)} p10 ${s[Math.floor(s.length * 0.1)]!.toFixed(0)} mean ${(s.reduce((a, b) => a + b, 0) / s.length).toFixed(0)}\n`,
  );
}
for (const c of clients) await c.close();
await svc.close();
await pool.end();
await floorPool.end();
