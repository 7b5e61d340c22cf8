// Records per second through the audit middleware into one sink, for profiling one sink at a time:
//   node --cpu-prof --import tsx bench/throughput.ts file|postgres [records]
// Same record shape as bench/benchmarks/audit.bench.ts (three args, one a secret), 256 calls in
// flight, a context built per call (createTestContext) as that bench does. PostgreSQL:
// TEST_DATABASE_URL or the local server. CPU µs per record (user + system, this process) is
// printed beside the rate: on a shared machine it moves less than the wall-clock rate. Each call
// starts in a turn of the event loop of its own, as a transport hands calls over; ARRIVAL=burst runs
// them as one burst of microtasks instead (the writer cannot write until it ends).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compose, createSilentLogger, defineTool, ok, type ToolDefinition } from '@toolgate/core';
import { createTestContext } from '@toolgate/core/testing';
import pg from 'pg';
import * as z from 'zod';
import {
  type AuditSink,
  createAudit,
  createFileSink,
  createPostgresSink,
  verifyAuditFile,
  verifyAuditTable,
} from '../src/index.js';

const kind = process.argv[2] ?? 'file';
const RECORDS = Number(process.argv[3] ?? 200_000);
const IN_FLIGHT = Number(process.env.IN_FLIGHT ?? 256);
const logger = createSilentLogger();
const tool = defineTool({
  name: 'search_orders',
  description: 'Search orders.',
  input: { customer_email: z.string(), days: z.number(), api_key: z.string().optional() },
  handler: () => ok({ items: [] }),
});
const answer = ok({ items: [{ order_id: '4000000000007919', status: 'paid' }] }, { total: 1 });
const signal = new AbortController().signal;
const contextFor = (index: number) =>
  createTestContext({
    tool: tool as unknown as ToolDefinition,
    args: { customer_email: `customer${index % 20_000}@`, days: 30, api_key: 'sk_live_0123456789abcdef' },
    request: { id: index, sessionId: 'bench', signal },
    logger,
  });

const dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-throughput-'));
const pool = new pg.Pool({
  connectionString: process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  max: 2,
});
const table = `toolgate_audit_throughput_${process.pid}`;
const path = join(dir, 'audit.jsonl');
const sink: AuditSink = kind === 'file' ? createFileSink(path) : createPostgresSink({ client: pool, table });
const audit = createAudit({
  sink,
  logger,
  ...(process.env.BATCH_SIZE && { batchSize: Number(process.env.BATCH_SIZE) }),
});
const chain = compose([audit]);
const handler = () => Promise.resolve(answer);
let peakRss = 0;
const sampler = setInterval(() => {
  peakRss = Math.max(peakRss, process.memoryUsage().rss);
}, 20);
const started = performance.now();
const cpuBefore = process.cpuUsage();
let next = 0;
const turn = process.env.ARRIVAL !== 'burst';
await Promise.all(
  Array.from({ length: IN_FLIGHT }, async () => {
    while (next < RECORDS) {
      next += 1;
      if (turn) await new Promise<void>((resolve) => setImmediate(resolve));
      await chain(contextFor(next), handler);
    }
  }),
);
await audit.flush();
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpuBefore);
clearInterval(sampler);
await audit.close();
const verified =
  kind === 'file' ? await verifyAuditFile(path) : await verifyAuditTable({ client: pool, table });
console.log(
  `${kind}: ${RECORDS} records in ${seconds.toFixed(2)} s = ${(RECORDS / seconds).toFixed(0)} records/s, ${((cpu.user + cpu.system) / RECORDS).toFixed(2)} CPU µs/record; peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MB; chain ${verified.intact ? 'intact' : 'BROKEN'} (${verified.records})`,
);
if (kind !== 'file') await pool.query(`DROP TABLE IF EXISTS ${table}`);
await pool.end();
await rm(dir, { recursive: true, force: true });
