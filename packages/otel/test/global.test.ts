// The defaults: the global tracer provider, meter provider and propagator of @opentelemetry/api,
// registered by the app after the middleware was created (as when the SDK starts after imports).
import { context, metrics, propagation, SpanKind, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createOtel } from '../src/index.js';
import { ATTR_GEN_AI_TOOL_NAME } from '../src/semconv.js';
import { closeAll, createTelemetry, seen, serve } from './harness.js';

const middleware = createOtel();
const telemetry = createTelemetry();

function registerGlobals(): void {
  trace.setGlobalTracerProvider(telemetry.tracerProvider);
  metrics.setGlobalMeterProvider(telemetry.meterProvider);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
}

afterEach(closeAll);

afterAll(async () => {
  await telemetry.shutdown();
  trace.disable();
  metrics.disable();
  propagation.disable();
  context.disable();
});

describe('otel: global providers registered after the middleware was made', () => {
  it('records nothing before the SDK is registered, then the span, the metric and the parent', async () => {
    const c = await serve([middleware]);
    const meta = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' };
    // Served (and the histogram looked up) while only the no-op API exists.
    expect((await c.callTool('get_order', { id: 'A-0' }, { meta })).isError).toBeUndefined();
    expect(telemetry.exporter.getFinishedSpans()).toEqual([]);
    expect(seen.state).toEqual({});
    registerGlobals();
    const result = await c.callTool('get_order', { id: 'A-1' }, { meta });
    expect(result.isError).toBeUndefined();
    const spans = telemetry.exporter.getFinishedSpans();
    expect(spans.map((span) => [span.name, span.kind])).toEqual([['tools/call get_order', SpanKind.SERVER]]);
    expect(spans[0]!.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(spans[0]!.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(seen.state?.trace?.traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    const points = await telemetry.durationPoints();
    expect(points.map((point) => [point.attributes[ATTR_GEN_AI_TOOL_NAME], point.value.count])).toEqual([
      ['get_order', 1],
    ]);
  });
});
