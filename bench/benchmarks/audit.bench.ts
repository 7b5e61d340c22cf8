// 4. Audit throughput: records per second the file sink and the PostgreSQL sink sustain, window by
// window (a chain that slowed as it grew would show in the later windows), and peak memory.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type AuditSink,
  createAudit,
  createFileSink,
  createPostgresSink,
  verifyAuditFile,
  verifyAuditTable,
} from '@toolgate/audit';
import {
  compose,
  createSilentLogger,
  defineTool,
  ok,
  type ToolContext,
  type ToolDefinition,
} from '@toolgate/core';
import { createTestContext } from '@toolgate/core/testing';
import pg from 'pg';
import * as z from 'zod';
import { benchDatabaseUrl } from '../src/bench-database.js';

const WINDOWS = 5;
const PER_WINDOW = Number(process.env.BENCH_AUDIT_RECORDS ?? 40_000) / WINDOWS;
// Calls in flight at once, as a busy server would push them.
const IN_FLIGHT = 256;
const logger = createSilentLogger();
const tool = defineTool({
  name: 'search_orders',
  description: 'Search orders.',
  input: { customer_email: z.string(), days: z.number(), api_key: z.string().optional() },
  handler: () => ok({ items: [] }),
});
const signal = new AbortController().signal;
const answer = ok({ items: [{ order_id: '4000000000007919', status: 'paid' }] }, { total: 1 });

function contextFor(index: number): ToolContext {
  // A realistic record: a few args, one of them a secret the audit must redact.
  return createTestContext({
    tool: tool as unknown as ToolDefinition,
    args: { customer_email: `customer${index % 20_000}@`, days: 30, api_key: 'sk_live_0123456789abcdef' },
    request: { id: index, sessionId: 'bench', signal },
    logger,
  });
}

interface SinkRun {
  windows: number[];
  peakRssMb: number;
  peakHeapMb: number;
  verified: string;
}

async function measure(
  sink: AuditSink,
  verify: () => Promise<{ intact: boolean; records: number }>,
): Promise<SinkRun> {
  const audit = createAudit({ sink, logger });
  const chain = compose([audit]);
  const handler = (): Promise<typeof answer> => Promise.resolve(answer);
  let peakRss = 0;
  let peakHeap = 0;
  const sample = (): void => {
    const usage = process.memoryUsage();
    peakRss = Math.max(peakRss, usage.rss);
    peakHeap = Math.max(peakHeap, usage.heapUsed);
  };
  const sampler = setInterval(sample, 20);
  const windows: number[] = [];
  let index = 0;
  // Window -1 warms the JIT and the sink up and is not reported.
  for (let window = -1; window < WINDOWS; window += 1) {
    const started = performance.now();
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < PER_WINDOW) {
        next += 1;
        index += 1;
        await chain(contextFor(index), handler);
      }
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
    // A window counts once the sink has stored every record of it.
    await audit.flush();
    if (window >= 0) windows.push(PER_WINDOW / ((performance.now() - started) / 1000));
  }
  clearInterval(sampler);
  sample();
  await audit.close();
  const result = await verify();
  return {
    windows,
    peakRssMb: peakRss / 2 ** 20,
    peakHeapMb: peakHeap / 2 ** 20,
    verified:
      result.intact && result.records === index
        ? `intact, ${result.records} records`
        : `BROKEN (${JSON.stringify(result)})`,
  };
}

export async function auditBench(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'toolgate-bench-audit-'));
  const url = await benchDatabaseUrl();
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  const table = 'toolgate_bench_audit.records';
  try {
    await pool.query('DROP SCHEMA IF EXISTS toolgate_bench_audit CASCADE');
    const file = join(dir, 'audit.jsonl');
    // BENCH_AUDIT_SINKS=file or =postgres measures one sink only (profiling).
    const only = process.env.BENCH_AUDIT_SINKS?.split(',');
    const runs: [string, SinkRun][] = [];
    if (!only || only.includes('file')) {
      runs.push([
        'file sink (append-only JSON lines)',
        await measure(createFileSink(file), () => verifyAuditFile(file)),
      ]);
    }
    if (!only || only.includes('postgres')) {
      runs.push([
        'PostgreSQL sink (one multi-row INSERT per batch)',
        await measure(createPostgresSink({ client: pool, table }), () =>
          verifyAuditTable({ client: pool, table }),
        ),
      ]);
    }
    const lines = [
      `| sink | records/s (all) | first window | last window | last/first | peak RSS MB | peak heap MB | chain |`,
      '|---|---:|---:|---:|---:|---:|---:|---|',
      ...runs.map(([name, run]) => {
        const all = (PER_WINDOW * WINDOWS) / run.windows.reduce((sum, rate) => sum + PER_WINDOW / rate, 0);
        return `| ${name} | ${all.toFixed(0)} | ${run.windows[0]!.toFixed(0)} | ${run.windows.at(-1)!.toFixed(0)} | ${(run.windows.at(-1)! / run.windows[0]!).toFixed(3)}x | ${run.peakRssMb.toFixed(0)} | ${run.peakHeapMb.toFixed(0)} | ${run.verified} |`;
      }),
    ];
    return [
      '## 4. Audit throughput',
      '',
      `${(PER_WINDOW * WINDOWS).toLocaleString('en')} records per sink in ${WINDOWS} windows after a warm-up window, ${IN_FLIGHT} calls in flight, through the audit`,
      'middleware (args redacted, canonical JSON, SHA-256 chain, batched writes of up to 4096 records); a window ends when',
      'the sink has stored all its records. Peak memory of the whole bench process while the sink ran. The chain',
      'is verified afterwards (`verifyAuditFile` / `verifyAuditTable`).',
      '',
      ...lines,
      '',
    ].join('\n');
  } finally {
    await pool.query('DROP SCHEMA IF EXISTS toolgate_bench_audit CASCADE').catch(() => undefined);
    await pool.end();
    await rm(dir, { recursive: true, force: true });
  }
}
