// Added cost of @toolgate/otel per tools/call: with no SDK registered (the API's no-op path), and with
// a real SDK (BasicTracerProvider + BatchSpanProcessor to a no-op exporter, a MeterProvider, the
// AsyncLocalStorage context manager), against the bare core chain. Two measurements each: a full
// round trip over the in-memory transport (what a server pays), and the chain called directly
// (the middleware's own cost, free of transport noise).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { ExportResultCode } from '@opentelemetry/core';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
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
import { createOtel } from '../src/index.js';

const echo = defineTool({
  name: 'echo',
  description: 'Echo.',
  input: { q: z.string() },
  handler: ({ q }) => ok({ q }),
});
const logger = createSilentLogger();

async function serverWith(middleware: ToolMiddleware[]): Promise<TestClient> {
  const server = new McpServer({ name: 'bench', version: '1.0.0' });
  registerTools(server, [echo], { middleware, logger });
  return connectTestClient(server);
}

const signal = new AbortController().signal;
const answer = ok({ q: 'v' });
const handlerStep = (): Promise<typeof answer> => Promise.resolve(answer);

const contextFor = (index: number): ToolContext =>
  createTestContext({
    tool: echo as ToolDefinition,
    args: { q: `v${index}` },
    request: { id: index, signal },
    logger,
  });

async function compare(title: string, middleware: ToolMiddleware, floor?: ToolMiddleware): Promise<void> {
  const bare = await serverWith([]);
  const traced = await serverWith([middleware]);
  const floored = floor === undefined ? undefined : await serverWith([floor]);
  const trips = [
    { name: 'core chain, no otel', call: (i: number) => bare.callTool('echo', { q: `v${i}` }) },
    { name: `core + otel (${title})`, call: (i: number) => traced.callTool('echo', { q: `v${i}` }) },
  ];
  if (floored !== undefined) {
    trips.splice(1, 0, {
      name: 'core + SDK floor (startSpan + end + histogram.record)',
      call: (i: number) => floored.callTool('echo', { q: `v${i}` }),
    });
  }
  const roundTrip = await compareCalls(trips, { rounds: 15, callsPerRound: 1000 });
  console.log(`\n### tools/call round trip, ${title}\n`);
  console.log(formatBenchTable(roundTrip));
  if (floored !== undefined) {
    const [, floorRow, otelRow] = roundTrip;
    console.log(
      `\nthroughput of core + otel relative to core + SDK floor: ${(floorRow!.usPerCall / otelRow!.usPerCall).toFixed(3)}x`,
    );
  }
  await Promise.all([bare.close(), traced.close(), floored?.close()]);

  const bareChain = compose([]);
  const tracedChain = compose([middleware]);
  const cases = [
    { name: 'core chain, no otel', call: (i: number) => bareChain(contextFor(i), handlerStep) },
    { name: `core + otel (${title})`, call: (i: number) => tracedChain(contextFor(i), handlerStep) },
  ];
  if (floor !== undefined) {
    const floorChain = compose([floor]);
    cases.splice(1, 0, {
      name: 'SDK floor: startSpan + end + histogram.record',
      call: (i: number) => floorChain(contextFor(i), handlerStep),
    });
  }
  const direct = await compareCalls(cases, { rounds: 15, callsPerRound: 20_000, warmup: 5000 });
  console.log(`\n### the chain alone (no transport), ${title}\n`);
  console.log(formatBenchTable(direct));
}

// 1. Nothing registered: the default global API is a no-op.
await compare('no SDK: no-op API', createOtel());

// 2. A real SDK, as a server exporting to a collector would run it (the exporter itself is a no-op).
const noopExporter: SpanExporter = {
  export: (_spans, done) => done({ code: ExportResultCode.SUCCESS }),
  shutdown: async () => {},
};
class IdleReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(noopExporter)] });
const meterProvider = new MeterProvider({ readers: [new IdleReader()] });
// What the SDK itself costs per call, whoever calls it: one span started and ended, one histogram point.
const floorTracer = tracerProvider.getTracer('bench-floor');
const floorHistogram = meterProvider.getMeter('bench-floor').createHistogram('bench.floor.duration');
const floorAttributes = { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'echo' };
const sdkFloor: ToolMiddleware = async (_ctx, next) => {
  const span = floorTracer.startSpan('tools/call echo');
  try {
    return await next();
  } finally {
    span.end();
    floorHistogram.record(0.001, floorAttributes);
  }
};
await compare('SDK + BatchSpanProcessor', createOtel({ tracerProvider, meterProvider }), sdkFloor);
await Promise.all([tracerProvider.shutdown(), meterProvider.shutdown()]);
context.disable();
