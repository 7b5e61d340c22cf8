// 1. Middleware overhead in process: tools/call round trips over the in-memory transport, one trivial
// tool, the bare SDK handler vs the same tool through core with the full recommended stack.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { ExportResultCode } from '@opentelemetry/core';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { createAudit, createFileSink } from '@toolgate/audit';
import { compareCalls, formatBenchTable } from '@toolgate/bench-harness';
import { createCircuitBreakers } from '@toolgate/circuit-breaker';
import { createSilentLogger, defineTool, ok, registerTools, type ToolMiddleware } from '@toolgate/core';
import { connectTestClient, type TestClient } from '@toolgate/core/testing';
import { otel } from '@toolgate/otel';
import { redactErrors } from '@toolgate/redact-errors';
import { repeatGuard } from '@toolgate/repeat-guard';
import * as z from 'zod';

const input = { q: z.string() };
const logger = createSilentLogger();

// Spans are built, batched and handed over like in production; only the network send is skipped.
const discardingExporter: SpanExporter = {
  export: (_spans, done) => done({ code: ExportResultCode.SUCCESS }),
  shutdown: () => Promise.resolve(),
};

async function bareServer(): Promise<TestClient> {
  const server = new McpServer({ name: 'bare', version: '1.0.0' });
  server.registerTool('echo', { description: 'Echo.', inputSchema: input }, async ({ q }) => {
    const data = { ok: true, q };
    return { content: [{ type: 'text', text: JSON.stringify(data) }], structuredContent: data };
  });
  return connectTestClient(server);
}

async function coreServer(middleware: ToolMiddleware[]): Promise<TestClient> {
  const server = new McpServer({ name: 'core', version: '1.0.0' });
  const echo = defineTool({ name: 'echo', description: 'Echo.', input, handler: ({ q }) => ok({ q }) });
  registerTools(server, [echo], { middleware, logger });
  return connectTestClient(server, { sessionId: 'bench' });
}

export async function middlewareBench(): Promise<string> {
  const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(discardingExporter)] });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  trace.setGlobalTracerProvider(provider);
  const dir = await mkdtemp(join(tmpdir(), 'toolgate-bench-mw-'));
  const audit = createAudit({ sink: createFileSink(join(dir, 'audit.jsonl')), logger });
  const breakers = createCircuitBreakers({ logger });
  const full = [
    otel({ transport: 'pipe', logger }),
    audit,
    redactErrors({ logger }),
    repeatGuard(),
    breakers.middleware,
  ];
  const bare = await bareServer();
  const empty = await coreServer([]);
  const stack = await coreServer(full);
  // Each middleware alone, to show where the stack's cost comes from.
  const alone = await Promise.all(full.map((middleware) => coreServer([middleware])));
  const names = ['otel', 'audit (file)', 'redact-errors', 'repeat-guard', 'circuit-breaker'];
  const sections: string[] = [];
  try {
    for (const concurrency of [1, 64]) {
      const rows = await compareCalls(
        [
          { name: 'bare SDK handler (baseline)', call: (i) => bare.callTool('echo', { q: `v${i}` }) },
          { name: 'core, empty chain', call: (i) => empty.callTool('echo', { q: `v${i}` }) },
          {
            name: 'core + otel → audit (file) → redact-errors → repeat-guard → circuit-breaker',
            // Distinct args: repeat-guard looks every call up and stores it, never short-circuits.
            call: (i) => stack.callTool('echo', { q: `v${i}` }),
          },
          ...alone.map((client, index) => ({
            name: `core + ${names[index]} alone`,
            call: (i: number) => client.callTool('echo', { q: `v${i}` }),
          })),
        ],
        { concurrency, rounds: 15, callsPerRound: 1000, warmup: 500 },
      );
      sections.push(
        `### ${concurrency === 1 ? 'Sequential' : `${concurrency} concurrent`}\n\n${formatBenchTable(rows)}`,
      );
    }
  } finally {
    await Promise.all([bare.close(), empty.close(), stack.close(), ...alone.map((client) => client.close())]);
    await audit.close();
    breakers.shutdown();
    await provider.shutdown();
    trace.disable();
    context.disable();
    await rm(dir, { recursive: true, force: true });
  }
  return [
    '## 1. Middleware overhead, in process',
    '',
    'tools/call round trips through a real SDK client over the in-memory transport; one trivial tool (`echo`).',
    'Full stack: otel with a real SDK `BasicTracerProvider` + `BatchSpanProcessor` (exporter discards), audit to',
    'a temp file, redact-errors, repeat-guard (every call has distinct args), circuit-breaker. Median of 15',
    'interleaved rounds of 1000 calls. Target: the full stack adds under 5 µs per call (about 1.3x bare).',
    '',
    ...sections.flatMap((section) => [section, '']),
  ].join('\n');
}
