// Added cost of @toolgate/audit per tools/call against the bare core chain: records built, redacted,
// hash-chained and written, to a no-op function sink (the middleware's own work) and to the file
// sink on a temp file (the default production shape). Every case flushes every 256 calls, so the
// writer's batched work (redaction, canonical JSON, SHA-256, the write) is inside the measurement,
// not deferred past it. Two measurements: a full round trip over the in-memory transport, and the
// chain called directly (the middleware's cost free of transport noise).
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { compareCalls, formatBenchTable } from '@toolgate/bench-harness';
import {
  compose,
  createSilentLogger,
  defineTool,
  ok,
  registerTools,
  type ToolContext,
  type ToolDefinition,
  type ToolMiddleware,
} from '@toolgate/core';
import { connectTestClient, createTestContext, type TestClient } from '@toolgate/core/testing';
import * as z from 'zod';
import { type AuditMiddleware, createAudit, createFileSink, createFunctionSink } from '../src/index.js';

const echo = defineTool({
  name: 'echo',
  description: 'Echo.',
  input: { q: z.string(), token: z.string().optional() },
  handler: ({ q }) => ok({ q }),
});
const logger = createSilentLogger();
const dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-bench-'));
const FLUSH_EVERY = 256;

async function serverWith(middleware: ToolMiddleware[]): Promise<TestClient> {
  const server = new McpServer({ name: 'bench', version: '1.0.0' });
  registerTools(server, [echo], { middleware, logger });
  return connectTestClient(server);
}

function audits(): { noop: AuditMiddleware; file: AuditMiddleware; keyed: AuditMiddleware; path: string } {
  const path = join(dir, `audit-${Math.random().toString(36).slice(2)}.jsonl`);
  return {
    noop: createAudit({ sink: createFunctionSink(() => {}), logger }),
    file: createAudit({ sink: createFileSink(path), logger }),
    // HMAC-SHA256 under a key instead of SHA-256.
    keyed: createAudit({ sink: createFileSink(`${path}.keyed`), logger, key: 'k'.repeat(32) }),
    path,
  };
}

/** One call, and every FLUSH_EVERY calls a flush, so the writer's batch work is paid inside the round. */
function flushing(audit: AuditMiddleware | undefined, call: (i: number) => Promise<unknown>) {
  return async (i: number): Promise<void> => {
    await call(i);
    if (audit && i % FLUSH_EVERY === 0) await audit.flush();
  };
}

const signal = new AbortController().signal;
const answer = ok({ q: 'v' });
const handlerStep = (): Promise<typeof answer> => Promise.resolve(answer);

const contextFor = (index: number): ToolContext =>
  createTestContext({
    tool: echo as ToolDefinition,
    args: { q: `v${index}`, token: 'Bearer abc.def' },
    request: { id: index, signal },
    logger,
  });

// 1. Round trip through a real client.
{
  const { noop, file, keyed, path } = audits();
  const bare = await serverWith([]);
  const withNoop = await serverWith([noop]);
  const withFile = await serverWith([file]);
  const args = (i: number) => ({ q: `v${i}`, token: 'Bearer abc.def' });
  const rows = await compareCalls(
    [
      { name: 'core chain, no audit', call: (i) => bare.callTool('echo', args(i)) },
      { name: 'core + audit → no-op sink', call: flushing(noop, (i) => withNoop.callTool('echo', args(i))) },
      { name: 'core + audit → file sink', call: flushing(file, (i) => withFile.callTool('echo', args(i))) },
    ],
    { rounds: 15, callsPerRound: 1000 },
  );
  console.log('\n### @toolgate/audit: tools/call round trip\n');
  console.log(formatBenchTable(rows));
  await Promise.all([
    noop.close(),
    file.close(),
    keyed.close(),
    bare.close(),
    withNoop.close(),
    withFile.close(),
  ]);
  console.log(`\n(file sink wrote ${(await stat(path)).size} bytes)`);
}

// 2. The chain alone, no transport.
{
  const { noop, file, keyed } = audits();
  const bareChain = compose([]);
  const noopChain = compose([noop]);
  const fileChain = compose([file]);
  const keyedChain = compose([keyed]);
  const rows = await compareCalls(
    [
      { name: 'core chain, no audit', call: (i) => bareChain(contextFor(i), handlerStep) },
      {
        name: 'core + audit → no-op sink',
        call: flushing(noop, (i) => noopChain(contextFor(i), handlerStep)),
      },
      {
        name: 'core + audit → file sink',
        call: flushing(file, (i) => fileChain(contextFor(i), handlerStep)),
      },
      {
        name: 'core + audit → file sink, keyed',
        call: flushing(keyed, (i) => keyedChain(contextFor(i), handlerStep)),
      },
    ],
    { rounds: 15, callsPerRound: 20_000, warmup: 5000 },
  );
  console.log('\n### @toolgate/audit: the chain alone (no transport)\n');
  console.log(formatBenchTable(rows));
  await Promise.all([noop.close(), file.close(), keyed.close()]);
}
// 3. Durable mode's cost: the answer waits for the sink's acknowledgement of its batch. Sequential
// calls pay a whole batch cycle each (batchDelayMs + one write); concurrent calls share batches.
for (const concurrency of [1, 64]) {
  const path = (name: string) => join(dir, `${name}-${concurrency}.jsonl`);
  const plain = createAudit({ sink: createFileSink(path('default')), logger });
  const durable = createAudit({ sink: createFileSink(path('durable')), logger, durable: true });
  const durableNoDelay = createAudit({
    sink: createFileSink(path('durable0')),
    logger,
    durable: true,
    batchDelayMs: 0,
  });
  const servers = await Promise.all([
    serverWith([]),
    serverWith([plain]),
    serverWith([durable]),
    serverWith([durableNoDelay]),
  ]);
  const args = (i: number) => ({ q: `v${i}`, token: 'Bearer abc.def' });
  const [bare, withPlain, withDurable, withDurableNoDelay] = servers;
  const rows = await compareCalls(
    [
      { name: 'core chain, no audit', call: (i) => bare!.callTool('echo', args(i)) },
      {
        name: 'audit → file, default mode',
        call: flushing(plain, (i) => withPlain!.callTool('echo', args(i))),
      },
      { name: 'audit → file, durable', call: (i) => withDurable!.callTool('echo', args(i)) },
      {
        name: 'audit → file, durable, batchDelayMs 0',
        call: (i) => withDurableNoDelay!.callTool('echo', args(i)),
      },
    ],
    { rounds: 9, callsPerRound: concurrency === 1 ? 300 : 3000, concurrency, warmup: 300 },
  );
  console.log(`\n### @toolgate/audit: durable vs default, round trip, ${concurrency} call(s) in flight\n`);
  console.log(formatBenchTable(rows));
  await Promise.all([
    plain.close(),
    durable.close(),
    durableNoDelay.close(),
    ...servers.map((s) => s.close()),
  ]);
}
await rm(dir, { recursive: true, force: true });
