// Shared test fixtures: an in-memory tracing and metrics SDK, the tools under test.
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  type HistogramMetricData,
  MeterProvider,
  type MetricData,
  MetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import {
  createSilentLogger,
  defineTool,
  fail,
  type IdentifyCaller,
  type Logger,
  ok,
  registerTools,
  type ToolContext,
  ToolError,
  type ToolMiddleware,
} from '@toolgate/core';
import { connectTestClient, type TestClient } from '@toolgate/core/testing';
import * as z from 'zod';
import { METRIC_MCP_SERVER_OPERATION_DURATION } from '../src/semconv.js';

/** A reader collected on demand, so a test reads exactly what was recorded so far. */
class ManualReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

export interface Telemetry {
  exporter: InMemorySpanExporter;
  tracerProvider: BasicTracerProvider;
  meterProvider: MeterProvider;
  /** The data points of `mcp.server.operation.duration` collected now. */
  durationPoints(): Promise<HistogramMetricData['dataPoints']>;
  /** The collected metric descriptor of the histogram. */
  durationMetric(): Promise<MetricData | undefined>;
  shutdown(): Promise<void>;
}

export function createTelemetry(): Telemetry {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const reader = new ManualReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const durationMetric = async (): Promise<MetricData | undefined> => {
    const { resourceMetrics, errors } = await reader.collect();
    if (errors.length > 0) throw new Error(`metric collection failed: ${String(errors[0])}`);
    return resourceMetrics.scopeMetrics
      .flatMap((scope) => scope.metrics)
      .find((metric) => metric.descriptor.name === METRIC_MCP_SERVER_OPERATION_DURATION);
  };
  return {
    exporter,
    tracerProvider,
    meterProvider,
    durationMetric,
    async durationPoints() {
      const metric = await durationMetric();
      return (metric?.dataPoints ?? []) as HistogramMetricData['dataPoints'];
    },
    async shutdown() {
      await Promise.all([tracerProvider.shutdown(), meterProvider.shutdown()]);
    },
  };
}

/** What the handler saw of the context, captured for assertions. */
export const seen: { state: ToolContext['state'] | undefined } = { state: undefined };

export const getOrder = defineTool({
  name: 'get_order',
  description: 'One order by id.',
  input: { id: z.string(), apiToken: z.string().optional(), note: z.string().optional() },
  handler: async ({ id }, ctx) => {
    seen.state = { ...ctx.state };
    if (id === 'missing') return fail('not_found', 'No order missing.', { hint: 'Check the id.' });
    if (id === 'denied') throw new ToolError('permission_denied', 'Not yours.');
    if (id === 'boom') {
      throw new TypeError('cannot read total of undefined at /srv/app/orders.js:12 password=hunter2');
    }
    if (id === 'cancel-me') {
      // Waits until the client cancels, then rejects with the signal's reason, as fetch does.
      await new Promise((_resolve, reject) => {
        if (ctx.signal.aborted) reject(ctx.signal.reason);
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
      });
    }
    if (id === 'refused') {
      throw Object.assign(new Error('connect ECONNREFUSED 10.0.0.5:5432'), { code: 'ECONNREFUSED' });
    }
    return ok({ id, status: 'shipped', secretNote: 'sk_live_abcdefghijklmnop' });
  },
});

let open: TestClient[] = [];

export async function serve(
  middleware: ToolMiddleware[],
  options: {
    logger?: Logger;
    sessionId?: string;
    authInfo?: AuthInfo;
    identify?: IdentifyCaller;
    tools?: Parameters<typeof registerTools>[1];
  } = {},
): Promise<TestClient> {
  const server = new McpServer({ name: 'otel-test', version: '1.0.0' });
  registerTools(server, options.tools ?? [getOrder], {
    middleware,
    logger: options.logger ?? createSilentLogger(),
    ...(options.identify !== undefined && { identify: options.identify }),
  });
  const client = await connectTestClient(server, {
    ...(options.sessionId !== undefined && { sessionId: options.sessionId }),
    ...(options.authInfo !== undefined && { authInfo: options.authInfo }),
  });
  open.push(client);
  return client;
}

export async function closeAll(): Promise<void> {
  const closing = open;
  open = [];
  await Promise.all(closing.map((client) => client.close()));
}
