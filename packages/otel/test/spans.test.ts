import { createHash } from 'node:crypto';
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  AlwaysOffSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  ParentBasedSampler,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { defineTool, fail, ok, ToolError, type ToolMiddleware } from '@toolgate/core';
import { expectFailure, type LogEntry, parseResultText, recordingLogger } from '@toolgate/core/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createOtel, otel, sessionDigest } from '../src/index.js';
import {
  ATTR_ERROR_TYPE,
  ATTR_EXCEPTION_MESSAGE,
  ATTR_EXCEPTION_STACKTRACE,
  ATTR_EXCEPTION_TYPE,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_TOOL_CALL_ARGUMENTS,
  ATTR_GEN_AI_TOOL_CALL_RESULT,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_JSONRPC_REQUEST_ID,
  ATTR_MCP_METHOD_NAME,
  ATTR_MCP_PROTOCOL_VERSION,
  ATTR_MCP_SESSION_ID,
  ATTR_NETWORK_TRANSPORT,
  ATTR_RPC_RESPONSE_STATUS_CODE,
  ATTR_TOOLGATE_CALLER_ID,
  ATTR_TOOLGATE_CALLER_KIND,
  ATTR_TOOLGATE_DECISION_ACTION,
  ATTR_TOOLGATE_DECISION_BY,
  ATTR_TOOLGATE_DECISION_REASON,
  ATTR_TOOLGATE_ERROR_CODE,
  ATTR_TOOLGATE_INCIDENT_ID,
  ERROR_TYPE_TOOL_ERROR,
  EVENT_EXCEPTION,
  EVENT_TOOLGATE_DECISION,
  GEN_AI_OPERATION_EXECUTE_TOOL,
  MCP_METHOD_TOOLS_CALL,
} from '../src/semconv.js';
import { closeAll, createTelemetry, getOrder, seen, serve } from './harness.js';

const telemetry = createTelemetry();
const { exporter, tracerProvider, meterProvider } = telemetry;
const clientTracer = tracerProvider.getTracer('test-client');

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(
    new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  );
});

afterEach(async () => {
  await closeAll();
  exporter.reset();
  seen.state = undefined;
});

afterAll(async () => {
  await telemetry.shutdown();
  trace.disable();
  context.disable();
  propagation.disable();
});

function traced(options: Parameters<typeof createOtel>[0] = {}): ToolMiddleware {
  return createOtel({ tracerProvider, meterProvider, ...options });
}

/** What every get_order span carries, whatever the outcome. */
const callAttributes = {
  [ATTR_MCP_METHOD_NAME]: MCP_METHOD_TOOLS_CALL,
  [ATTR_TOOLGATE_CALLER_KIND]: 'local',
  [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_EXECUTE_TOOL,
  [ATTR_GEN_AI_TOOL_NAME]: 'get_order',
  [ATTR_JSONRPC_REQUEST_ID]: expect.stringMatching(/^\d+$/),
};

function toolSpans(): ReadableSpan[] {
  return exporter.getFinishedSpans().filter((span) => span.kind === SpanKind.SERVER);
}

function onlyToolSpan(): ReadableSpan {
  const spans = toolSpans();
  expect(spans).toHaveLength(1);
  return spans[0]!;
}

/** The `_meta` a real instrumented client sends: its span's context injected by the propagator. */
function injectedMeta(): { meta: Record<string, unknown>; traceId: string; spanId: string } {
  const clientSpan = clientTracer.startSpan('tools/call get_order', { kind: SpanKind.CLIENT });
  const meta: Record<string, unknown> = {};
  propagation.inject(trace.setSpan(context.active(), clientSpan), meta);
  clientSpan.end();
  return { meta, traceId: clientSpan.spanContext().traceId, spanId: clientSpan.spanContext().spanId };
}

describe('otel: the tool span', () => {
  it('a success is a SERVER span `tools/call {tool}` with the MCP attributes and an unset status', async () => {
    const c = await serve([traced({ transport: 'pipe', protocolVersion: '2025-06-18' })], {
      sessionId: 'sess-42',
    });
    const result = await c.callTool('get_order', { id: 'A-1' });
    expect(result.structuredContent).toEqual({
      ok: true,
      id: 'A-1',
      status: 'shipped',
      secretNote: 'sk_live_abcdefghijklmnop',
    });
    const span = onlyToolSpan();
    expect(span.name).toBe('tools/call get_order');
    expect(span.kind).toBe(SpanKind.SERVER);
    expect(span.instrumentationScope.name).toBe('@toolgate/otel');
    expect(span.attributes).toEqual({
      ...callAttributes,
      // A digest by default: the session id lets a request continue the session.
      [ATTR_MCP_SESSION_ID]: createHash('sha256').update('sess-42').digest('base64url').slice(0, 22),
      [ATTR_MCP_PROTOCOL_VERSION]: '2025-06-18',
      [ATTR_NETWORK_TRANSPORT]: 'pipe',
    });
    expect(span.status).toEqual({ code: SpanStatusCode.UNSET });
    expect(span.events).toEqual([]);
    expect(span.ended).toBe(true);
  });

  it("sessionId: 'raw' records the id itself, 'omit' nothing, per tool too; a bad value is refused", async () => {
    const raw = await serve([traced({ sessionId: 'raw', tools: { get_order: { sessionId: 'omit' } } })], {
      sessionId: 'sess-42',
    });
    await raw.callTool('get_order', { id: 'A-1' });
    expect(onlyToolSpan().attributes).not.toHaveProperty(ATTR_MCP_SESSION_ID);
    exporter.reset();
    const rawOnly = await serve([traced({ sessionId: 'raw' })], { sessionId: 'sess-42' });
    await rawOnly.callTool('get_order', { id: 'A-1' });
    expect(onlyToolSpan().attributes[ATTR_MCP_SESSION_ID]).toBe('sess-42');
    expect(sessionDigest('sess-42')).toBe(
      createHash('sha256').update('sess-42').digest('base64url').slice(0, 22),
    );
    expect(sessionDigest('sess-43')).not.toBe(sessionDigest('sess-42'));
    expect(() => createOtel({ sessionId: 'hash' as never })).toThrow(
      "createOtel: sessionId must be 'digest', 'raw' or 'omit', got \"hash\"",
    );
  });

  it('sets ctx.state.trace to the span ids, for audit', async () => {
    const c = await serve([traced()]);
    await c.callTool('get_order', { id: 'A-1' });
    const span = onlyToolSpan();
    expect(seen.state?.trace).toEqual({
      traceId: span.spanContext().traceId,
      spanId: span.spanContext().spanId,
    });
  });

  it('records jsonrpc.request.id as a string and leaves out a missing session', async () => {
    const c = await serve([traced()]);
    await c.callTool('get_order', { id: 'A-1' });
    await c.callTool('get_order', { id: 'A-2' });
    const [first, second] = toolSpans();
    expect(typeof first!.attributes[ATTR_JSONRPC_REQUEST_ID]).toBe('string');
    expect(Number(second!.attributes[ATTR_JSONRPC_REQUEST_ID])).toBe(
      Number(first!.attributes[ATTR_JSONRPC_REQUEST_ID]) + 1,
    );
    expect(first!.attributes).not.toHaveProperty(ATTR_MCP_SESSION_ID);
    expect(first!.attributes).not.toHaveProperty(ATTR_NETWORK_TRANSPORT);
    expect(first!.attributes).not.toHaveProperty(ATTR_MCP_PROTOCOL_VERSION);
  });

  it('an error result sets error.type tool_error, the toolgate code and status ERROR with the safe message', async () => {
    const c = await serve([traced()]);
    const envelope = expectFailure(await c.callTool('get_order', { id: 'missing' }));
    expect(envelope.error).toBe('not_found');
    const span = onlyToolSpan();
    expect(span.name).toBe('tools/call get_order');
    expect(span.attributes).toEqual({
      ...callAttributes,
      [ATTR_ERROR_TYPE]: ERROR_TYPE_TOOL_ERROR,
      [ATTR_TOOLGATE_ERROR_CODE]: 'not_found',
    });
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'No order missing.' });
  });

  it('a thrown error: error.type is its class, a generic status, no message or stack, rethrown to core', async () => {
    const entries: LogEntry[] = [];
    const c = await serve([traced()], { logger: recordingLogger(entries) });
    const envelope = expectFailure(await c.callTool('get_order', { id: 'boom' }));
    // Core answered `internal` with the incident id otel set, so the span, the log and the model agree.
    expect(envelope.error).toBe('internal');
    expect(envelope.incidentId).toMatch(/\S/);
    const span = onlyToolSpan();
    expect(span.attributes).toEqual({
      ...callAttributes,
      [ATTR_ERROR_TYPE]: 'TypeError',
      [ATTR_TOOLGATE_ERROR_CODE]: 'internal',
      [ATTR_TOOLGATE_INCIDENT_ID]: envelope.incidentId,
    });
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'Internal error.' });
    expect(span.events).toEqual([]);
    expect(JSON.stringify(span.attributes)).not.toMatch(/hunter2|\/srv|cannot read/);
    // The raw error is rethrown unchanged: core's last resort logs that very TypeError.
    const logged = entries.find((entry) => entry.level === 'error')!;
    expect(logged.fields.incidentId).toBe(envelope.incidentId);
    expect(logged.fields.err).toBeInstanceOf(TypeError);
    expect((logged.fields.err as Error).message).toContain('password=hunter2');
  });

  it('a call the client cancels, failing with its reason: timeout like core answers it, no incident, no reason', async () => {
    const entries: LogEntry[] = [];
    const c = await serve([traced()], { logger: recordingLogger(entries) });
    const controller = new AbortController();
    const call = c.callTool('get_order', { id: 'cancel-me' }, { signal: controller.signal });
    // The handler has started (it notes what it saw first).
    await expect.poll(() => seen.state).toBeDefined();
    controller.abort('ALERT: database password rotated');
    await expect(call).rejects.toThrow();
    await expect.poll(() => toolSpans().length).toBe(1);
    const span = onlyToolSpan();
    expect(span.attributes).toEqual({
      ...callAttributes,
      [ATTR_ERROR_TYPE]: ERROR_TYPE_TOOL_ERROR,
      [ATTR_TOOLGATE_ERROR_CODE]: 'timeout',
    });
    expect(span.status).toEqual({
      code: SpanStatusCode.ERROR,
      message: 'get_order was cancelled before it finished.',
    });
    expect(JSON.stringify([span.attributes, span.events, entries])).not.toContain('ALERT');
  });

  it('a system error without a class name uses its code as error.type', async () => {
    const c = await serve([traced()]);
    await c.callTool('get_order', { id: 'refused' });
    expect(onlyToolSpan().attributes[ATTR_ERROR_TYPE]).toBe('ECONNREFUSED');
  });

  it('rethrows the very error object to the middleware outside it', async () => {
    const thrown: unknown[] = [];
    const outer: ToolMiddleware = async (_ctx, next) => {
      try {
        return await next();
      } catch (error) {
        thrown.push(error);
        return fail('unavailable', 'Try later.');
      }
    };
    const original = new RangeError('deep failure');
    const throwing: ToolMiddleware = async () => {
      throw original;
    };
    const c = await serve([outer, traced(), throwing]);
    expect(expectFailure(await c.callTool('get_order', { id: 'A-1' })).error).toBe('unavailable');
    expect(thrown).toEqual([original]);
    expect(thrown[0]).toBe(original);
    expect(onlyToolSpan().attributes[ATTR_ERROR_TYPE]).toBe('RangeError');
  });

  const throwRateLimited: ToolMiddleware = async () => {
    throw new ToolError('rate_limited', 'Slow down.', { retryAfterMs: 500 });
  };
  it.each([
    ['by the handler (core turns it into a result)', [], 'denied', 'permission_denied', 'Not yours.'],
    [
      'by inner middleware (it reaches otel as a throw)',
      [throwRateLimited],
      'A-1',
      'rate_limited',
      'Slow down.',
    ],
  ] as const)(
    'a ToolError thrown %s records tool_error and its code, not internal',
    async (_where, inner, id, code, message) => {
      const c = await serve([traced(), ...inner]);
      expect(expectFailure(await c.callTool('get_order', { id })).error).toBe(code);
      const span = onlyToolSpan();
      expect(span.attributes[ATTR_ERROR_TYPE]).toBe(ERROR_TYPE_TOOL_ERROR);
      expect(span.attributes[ATTR_TOOLGATE_ERROR_CODE]).toBe(code);
      expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message });
    },
  );

  it('recordErrorStack adds an exception event with the message and stack, secrets redacted', async () => {
    const c = await serve([traced({ recordErrorStack: true })]);
    await c.callTool('get_order', { id: 'boom' });
    const span = onlyToolSpan();
    expect(span.events).toHaveLength(1);
    const event = span.events[0]!;
    expect(event.name).toBe(EVENT_EXCEPTION);
    expect(event.attributes?.[ATTR_EXCEPTION_TYPE]).toBe('TypeError');
    expect(event.attributes?.[ATTR_EXCEPTION_MESSAGE]).toBe(
      'cannot read total of undefined at /srv/app/orders.js:12 password=[REDACTED]',
    );
    expect(event.attributes?.[ATTR_EXCEPTION_STACKTRACE]).toMatch(/^TypeError: cannot read total/);
    expect(JSON.stringify(span.events)).not.toContain('hunter2');
  });

  it('a short-circuit: the span ends with the inner answer and its decision as an event', async () => {
    const guard: ToolMiddleware = async (ctx) => {
      ctx.decisions.push({ by: 'repeat-guard', action: 'short-circuit', reason: 'identical call' });
      return fail('repeated_call', 'This exact call was already answered.');
    };
    const c = await serve([traced(), guard]);
    expect(expectFailure(await c.callTool('get_order', { id: 'A-1' })).error).toBe('repeated_call');
    expect(seen.state).toBeUndefined();
    const span = onlyToolSpan();
    expect(span.attributes).toEqual({
      ...callAttributes,
      [ATTR_ERROR_TYPE]: ERROR_TYPE_TOOL_ERROR,
      [ATTR_TOOLGATE_ERROR_CODE]: 'repeated_call',
    });
    expect(span.status).toEqual({
      code: SpanStatusCode.ERROR,
      message: 'This exact call was already answered.',
    });
    expect(span.events.map((event) => [event.name, event.attributes])).toEqual([
      [
        EVENT_TOOLGATE_DECISION,
        {
          [ATTR_TOOLGATE_DECISION_BY]: 'repeat-guard',
          [ATTR_TOOLGATE_DECISION_ACTION]: 'short-circuit',
          [ATTR_TOOLGATE_DECISION_REASON]: 'identical call',
        },
      ],
    ]);
  });

  it('decisions pushed before and after next() all become events, in order, also when the chain throws', async () => {
    const breaker: ToolMiddleware = async (ctx, next) => {
      ctx.decisions.push({ by: 'circuit-breaker', action: 'allow' });
      try {
        return await next();
      } finally {
        ctx.decisions.push({ by: 'circuit-breaker', action: 'failure-counted' });
      }
    };
    const c = await serve([traced(), breaker]);
    await c.callTool('get_order', { id: 'boom' });
    expect(onlyToolSpan().events.map((event) => event.attributes)).toEqual([
      { [ATTR_TOOLGATE_DECISION_BY]: 'circuit-breaker', [ATTR_TOOLGATE_DECISION_ACTION]: 'allow' },
      { [ATTR_TOOLGATE_DECISION_BY]: 'circuit-breaker', [ATTR_TOOLGATE_DECISION_ACTION]: 'failure-counted' },
    ]);
  });
});

describe('otel: decision events', () => {
  it('redact and cap a decision’s reason, and cap how many decisions one span records', async () => {
    const chatty: ToolMiddleware = async (ctx, next) => {
      ctx.decisions.push({
        by: 'custom',
        action: 'deny',
        reason: `upstream postgres://app:hunter2@db.internal/x said ${'x'.repeat(5000)}`,
      });
      for (let index = 0; index < 500; index += 1) ctx.decisions.push({ by: 'loop', action: `a${index}` });
      return next();
    };
    const c = await serve([traced(), chatty]);
    await c.callTool('get_order', { id: 'A-1' });
    const events = onlyToolSpan().events;
    const reason = String(events[0]!.attributes?.[ATTR_TOOLGATE_DECISION_REASON]);
    expect(reason).not.toContain('hunter2');
    expect(reason.length).toBeLessThanOrEqual(1024);
    expect(reason).toMatch(/…\[truncated\]$/);
    expect(events.length).toBeLessThanOrEqual(64);
    expect(events.at(-1)?.attributes).toEqual({
      [ATTR_TOOLGATE_DECISION_BY]: 'toolgate',
      [ATTR_TOOLGATE_DECISION_ACTION]: 'decisions-truncated',
      [ATTR_TOOLGATE_DECISION_REASON]: '438 more decisions not recorded',
    });
  });
});

describe('otel: context propagation', () => {
  it('the parent is the context a real client injected into params._meta', async () => {
    const c = await serve([traced()]);
    const { meta, traceId, spanId } = injectedMeta();
    expect(meta.traceparent).toBe(`00-${traceId}-${spanId}-01`);
    await c.callTool('get_order', { id: 'A-1' }, { meta });
    const span = onlyToolSpan();
    expect(span.spanContext().traceId).toBe(traceId);
    expect(span.parentSpanContext?.spanId).toBe(spanId);
    expect(span.parentSpanContext?.isRemote).toBe(true);
    expect(seen.state?.trace).toEqual({ traceId, spanId: span.spanContext().spanId });
  });

  it('carries tracestate and baggage from _meta into the handler', async () => {
    let baggageSeen: string | undefined;
    const probe: ToolMiddleware = async (_ctx, next) => {
      baggageSeen = propagation.getActiveBaggage()?.getEntry('tenant')?.value;
      return next();
    };
    const c = await serve([traced(), probe]);
    const { meta, traceId } = injectedMeta();
    meta.tracestate = 'vendor=abc';
    meta.baggage = 'tenant=acme';
    await c.callTool('get_order', { id: 'A-1' }, { meta });
    const span = onlyToolSpan();
    expect(span.spanContext().traceId).toBe(traceId);
    expect(span.parentSpanContext?.traceState?.get('vendor')).toBe('abc');
    expect(baggageSeen).toBe('acme');
  });

  it("clientContext 'link': the span starts from the server's context and links the client's span; no client baggage", async () => {
    let baggageSeen: unknown = 'unread';
    const probe: ToolMiddleware = async (_ctx, next) => {
      baggageSeen = propagation.getActiveBaggage()?.getAllEntries();
      return next();
    };
    const c = await serve([traced({ clientContext: 'link' }), probe]);
    const { meta, traceId, spanId } = injectedMeta();
    meta.baggage = 'tenant=other-tenant,role=admin';
    const outer = clientTracer.startSpan('server-side outer');
    await context.with(trace.setSpan(context.active(), outer), () =>
      c.callTool('get_order', { id: 'A-1' }, { meta }),
    );
    outer.end();
    const span = onlyToolSpan();
    // The server's own context is the parent (the HTTP server span in a deployment)...
    expect(span.parentSpanContext?.spanId).toBe(outer.spanContext().spanId);
    expect(span.spanContext().traceId).toBe(outer.spanContext().traceId);
    expect(span.spanContext().traceId).not.toBe(traceId);
    // ...the client's span is a link, and its baggage never becomes active.
    expect(span.links).toHaveLength(1);
    expect(span.links[0]!.context).toMatchObject({ traceId, spanId, isRemote: true });
    expect(baggageSeen).toBeUndefined();
    expect(seen.state?.trace).toEqual({
      traceId: outer.spanContext().traceId,
      spanId: span.spanContext().spanId,
    });
  });

  it("clientContext 'link': a client's sampled flag does not decide sampling; no link for garbage", async () => {
    const exporterOff = new InMemorySpanExporter();
    const sampledOff = new BasicTracerProvider({
      sampler: new ParentBasedSampler({ root: new AlwaysOffSampler() }),
      spanProcessors: [new SimpleSpanProcessor(exporterOff)],
    });
    try {
      const { meta } = injectedMeta();
      expect(String(meta.traceparent).endsWith('-01')).toBe(true);
      // Joined as the parent, the client's sampled flag samples the call under ParentBased...
      const joined = await serve([createOtel({ tracerProvider: sampledOff, meterProvider })]);
      await joined.callTool('get_order', { id: 'A-1' }, { meta });
      expect(exporterOff.getFinishedSpans()).toHaveLength(1);
      exporterOff.reset();
      // ...linked, the server's own sampler decides (here: never), and ignored likewise.
      for (const clientContext of ['link', 'ignore'] as const) {
        const c = await serve([createOtel({ tracerProvider: sampledOff, meterProvider, clientContext })]);
        await c.callTool('get_order', { id: 'A-1' }, { meta });
        await c.callTool('get_order', { id: 'A-2' }, { meta: { traceparent: 'garbage' } });
      }
      expect(exporterOff.getFinishedSpans()).toHaveLength(0);
    } finally {
      await sampledOff.shutdown();
    }
    // With the always-on provider, a garbage traceparent gives a root span without links.
    const c = await serve([traced({ clientContext: 'link' })]);
    await c.callTool('get_order', { id: 'A-1' }, { meta: { traceparent: 'not-a-traceparent' } });
    const span = onlyToolSpan();
    expect(span.parentSpanContext).toBeUndefined();
    expect(span.links).toHaveLength(0);
  });

  it("clientContext 'ignore': _meta is not read at all", async () => {
    let baggageSeen: unknown = 'unread';
    const probe: ToolMiddleware = async (_ctx, next) => {
      baggageSeen = propagation.getActiveBaggage()?.getAllEntries();
      return next();
    };
    const c = await serve([traced({ clientContext: 'ignore' }), probe]);
    const { meta, traceId } = injectedMeta();
    meta.baggage = 'tenant=other-tenant';
    await c.callTool('get_order', { id: 'A-1' }, { meta });
    const span = onlyToolSpan();
    expect(span.parentSpanContext).toBeUndefined();
    expect(span.spanContext().traceId).not.toBe(traceId);
    expect(span.links).toHaveLength(0);
    expect(baggageSeen).toBeUndefined();
  });

  it('clientContext: anything else is refused when the middleware is made', () => {
    expect(() => createOtel({ clientContext: 'trust' as never })).toThrow(
      "createOtel: clientContext must be 'parent', 'link' or 'ignore', got trust",
    );
  });

  it('falls back to the active context when _meta has no trace context', async () => {
    const c = await serve([traced()]);
    const outer = clientTracer.startSpan('server-side outer');
    await context.with(trace.setSpan(context.active(), outer), () => c.callTool('get_order', { id: 'A-1' }));
    outer.end();
    // The request is handled in the async context it was sent from (as under an HTTP server span).
    const span = onlyToolSpan();
    expect(span.parentSpanContext?.spanId).toBe(outer.spanContext().spanId);
    expect(span.spanContext().traceId).toBe(outer.spanContext().traceId);
  });

  it('hostile _meta values (numbers, objects, garbage, all-zero ids) start a fresh root trace', async () => {
    const c = await serve([traced()]);
    const hostile: Record<string, unknown>[] = [
      { traceparent: 42 },
      { traceparent: { toString: () => '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' } },
      { traceparent: 'not a traceparent; DROP TABLE spans' },
      { traceparent: '00-00000000000000000000000000000000-0000000000000000-01' },
      { traceparent: `00-${'f'.repeat(5000)}-b7ad6b7169203331-01` },
      JSON.parse('{"__proto__": {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}'),
    ];
    for (const meta of hostile) {
      const result = await c.callTool('get_order', { id: 'A-1' }, { meta });
      expect(result.isError).toBeUndefined();
    }
    const spans = toolSpans();
    expect(spans).toHaveLength(hostile.length);
    for (const span of spans) expect(span.parentSpanContext).toBeUndefined();
    expect(new Set(spans.map((span) => span.spanContext().traceId)).size).toBe(hostile.length);
  });

  it('trace context sent as arrays (MCP _meta carries strings) is ignored, not read as HTTP header lists', async () => {
    let baggageSeen: unknown = 'unread';
    const probe: ToolMiddleware = async (_ctx, next) => {
      baggageSeen = propagation.getActiveBaggage()?.getAllEntries();
      return next();
    };
    const c = await serve([traced(), probe]);
    const meta = {
      traceparent: ['00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', 'garbage'],
      baggage: Array.from({ length: 1000 }, (_, i) => `k${i}=v${i}`),
    };
    expect((await c.callTool('get_order', { id: 'A-1' }, { meta })).isError).toBeUndefined();
    const span = onlyToolSpan();
    expect(span.parentSpanContext).toBeUndefined();
    expect(span.spanContext().traceId).not.toBe('0af7651916cd43dd8448eb211c80319c');
    expect(baggageSeen).toBeUndefined();
  });

  it('a child span created in the handler has the tool span as parent', async () => {
    const handlerTracer = tracerProvider.getTracer('handler');
    const query = defineTool({
      name: 'search_orders',
      description: 'Search orders.',
      input: { q: z.string() },
      handler: async ({ q }) => {
        // What @opentelemetry/instrumentation-pg does around a query: a span under the active one.
        const dbSpan = handlerTracer.startSpan('SELECT orders', { kind: SpanKind.CLIENT });
        await new Promise((resolve) => setTimeout(resolve, 1));
        dbSpan.end();
        return ok({ items: [q] });
      },
    });
    const c = await serve([traced()], { tools: [query] });
    const { meta, traceId } = injectedMeta();
    await c.callTool('search_orders', { q: 'late' }, { meta });
    const tool = onlyToolSpan();
    const db = exporter.getFinishedSpans().find((span) => span.name === 'SELECT orders')!;
    expect(db.parentSpanContext?.spanId).toBe(tool.spanContext().spanId);
    expect(db.spanContext().traceId).toBe(traceId);
  });

  it('uses the propagator passed as an option', async () => {
    const seenKeys: string[] = [];
    const custom = {
      inject: () => {},
      fields: () => ['x-trace'],
      extract: (ctx: ReturnType<typeof context.active>, carrier: unknown) => {
        seenKeys.push(...Object.keys(carrier as object));
        return ctx;
      },
    };
    const c = await serve([traced({ propagator: custom })]);
    await c.callTool('get_order', { id: 'A-1' }, { meta: { 'x-trace': 'abc' } });
    expect(seenKeys).toEqual(['x-trace']);
  });

  it('a propagator that throws is logged and the call still traced from the active context', async () => {
    const entries: LogEntry[] = [];
    const throwing = {
      inject: () => {},
      fields: () => [],
      extract: () => {
        throw new Error('bad propagator');
      },
    };
    const c = await serve([traced({ propagator: throwing })], { logger: recordingLogger(entries) });
    const result = await c.callTool('get_order', { id: 'A-1' }, { meta: { traceparent: 'x' } });
    expect(result.isError).toBeUndefined();
    expect(onlyToolSpan().parentSpanContext).toBeUndefined();
    expect(entries.map((entry) => [entry.level, entry.message])).toEqual([
      ['warn', 'otel: the propagator threw while reading params._meta; using the active context'],
    ]);
  });
  it.each(['parent', 'link'] as const)(
    'a propagator that returns no context (clientContext %s) is logged and the call still answered and traced',
    async (clientContext) => {
      const entries: LogEntry[] = [];
      const broken = { inject: () => {}, fields: () => [], extract: () => undefined as never };
      const c = await serve([traced({ propagator: broken, clientContext })], {
        logger: recordingLogger(entries),
      });
      const result = await c.callTool('get_order', { id: 'A-1' }, { meta: { traceparent: 'x' } });
      expect(result.isError).toBeUndefined();
      expect(parseResultText(result)).toMatchObject({ ok: true, id: 'A-1', status: 'shipped' });
      const span = onlyToolSpan();
      expect([span.parentSpanContext, span.links]).toEqual([undefined, []]);
      expect(entries.map((entry) => [entry.level, entry.message])).toEqual([
        ['warn', 'otel: the propagator returned no context for params._meta; using the active context'],
      ]);
    },
  );
});

describe('otel: hostile requests', () => {
  it('an unknown tool name stays off the span name, is capped, and records the JSON-RPC error', async () => {
    const c = await serve([traced()]);
    const name = `no_such_tool_${'x'.repeat(5000)}`;
    await expect(c.callTool(name, {})).rejects.toThrow(/Unknown tool/);
    const span = onlyToolSpan();
    expect(span.name).toBe('tools/call');
    expect(span.attributes[ATTR_GEN_AI_TOOL_NAME]).toBe(`${name.slice(0, 244)}…[truncated]`);
    expect(String(span.attributes[ATTR_GEN_AI_TOOL_NAME])).toHaveLength(256);
    expect(span.attributes[ATTR_ERROR_TYPE]).toBe('-32602');
    expect(span.attributes[ATTR_RPC_RESPONSE_STATUS_CODE]).toBe('-32602');
    expect(span.attributes).not.toHaveProperty(ATTR_TOOLGATE_ERROR_CODE);
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'Unknown tool.' });
  });

  it('a huge string request id sent raw over the transport is recorded capped', async () => {
    const c = await serve([traced()]);
    c.client.onerror = () => {}; // the answer to our raw request has an id the client never issued
    const id = `req-${'9'.repeat(10_000)}`;
    await c.client.transport!.send({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'get_order', arguments: { id: 'A-1' } },
    });
    await expect.poll(() => toolSpans().length).toBe(1);
    expect(onlyToolSpan().attributes[ATTR_JSONRPC_REQUEST_ID]).toBe(`${id.slice(0, 244)}…[truncated]`);
  });
});

describe('otel: what the model typed, on the status message', () => {
  it('a ToolError thrown by inner middleware with a secret in its message: the span status is redacted as the model saw it', async () => {
    const upstream: ToolMiddleware = async () => {
      throw new ToolError(
        'unavailable',
        'postgres://app:hunter2@db:5432/orders refused, sent Bearer abcdefgh.ijkl',
      );
    };
    const c = await serve([traced(), upstream]);
    const envelope = expectFailure(await c.callTool('get_order', { id: 'A-1' }));
    expect(envelope.message).toBe('postgres://[REDACTED]@db:5432/orders refused, sent Bearer [REDACTED]');
    expect(onlyToolSpan().status).toEqual({ code: SpanStatusCode.ERROR, message: envelope.message });
  });

  it('a ToolError with a cause thrown by inner middleware: the span carries the incident id the model and the log see', async () => {
    // A policy whose store failed: the cause (a host and port) goes to core's log under an incident id.
    const store: ToolMiddleware = async () => {
      throw new ToolError('unavailable', 'The limiter store did not answer.', {
        cause: Object.assign(new Error('connect ECONNREFUSED 10.0.0.7:6379'), { code: 'ECONNREFUSED' }),
      });
    };
    const entries: LogEntry[] = [];
    const c = await serve([traced(), store], { logger: recordingLogger(entries) });
    const envelope = expectFailure(await c.callTool('get_order', { id: 'A-1' }));
    expect(envelope.error).toBe('unavailable');
    expect(envelope.incidentId).toMatch(/^inc_/);
    expect(entries.map((entry) => entry.fields?.incidentId)).toEqual([envelope.incidentId]);
    const span = onlyToolSpan();
    expect(span.attributes).toEqual({
      ...callAttributes,
      [ATTR_ERROR_TYPE]: ERROR_TYPE_TOOL_ERROR,
      [ATTR_TOOLGATE_ERROR_CODE]: 'unavailable',
      [ATTR_TOOLGATE_INCIDENT_ID]: envelope.incidentId,
    });
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'The limiter store did not answer.' });
    expect(JSON.stringify([span.attributes, span.events, span.status])).not.toContain('10.0.0.7');
  });

  it('a failure returned by inner middleware with a secret in its message: the span status is redacted', async () => {
    const upstream: ToolMiddleware = async () =>
      fail('unavailable', 'The store refused token=sk_live_abcdefghijklmnop.');
    const c = await serve([traced(), upstream]);
    const envelope = expectFailure(await c.callTool('get_order', { id: 'A-1' }));
    expect(envelope.message).toBe('The store refused token=[REDACTED].');
    expect(onlyToolSpan().status).toEqual({ code: SpanStatusCode.ERROR, message: envelope.message });
  });

  it('a confirmation request (the arguments rendered for the person) stays off the span unless results are recorded', async () => {
    // What @toolgate/confirm answers: its message is the validated arguments, one line each.
    const confirm: ToolMiddleware = async (ctx) =>
      fail(
        'confirmation_required',
        `Confirmation required. Show the user: Look up order ${String(ctx.args.id)} for Jane Roe, jane@example.com?`,
      );
    const c = await serve([traced(), confirm]);
    const envelope = expectFailure(await c.callTool('get_order', { id: 'A-77' }));
    expect(envelope.message).toContain('jane@example.com');
    const span = onlyToolSpan();
    expect(span.attributes[ATTR_TOOLGATE_ERROR_CODE]).toBe('confirmation_required');
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'Confirmation required.' });
    expect(JSON.stringify([span.attributes, span.status, span.events])).not.toMatch(/A-77|Jane|jane@/);
  });
});

describe('otel: arguments and results', () => {
  it('stay off the span by default', async () => {
    const c = await serve([traced()]);
    await c.callTool('get_order', { id: 'A-1', apiToken: 'tok_123' });
    const span = onlyToolSpan();
    expect(span.attributes).not.toHaveProperty(ATTR_GEN_AI_TOOL_CALL_ARGUMENTS);
    expect(span.attributes).not.toHaveProperty(ATTR_GEN_AI_TOOL_CALL_RESULT);
  });

  it('when opted in, are recorded as JSON with secrets redacted', async () => {
    const c = await serve([traced({ recordArguments: true, recordResult: true })]);
    await c.callTool('get_order', {
      id: 'A-1',
      apiToken: 'tok_123',
      note: 'call me with Bearer abc.def.ghi or postgres://app:pw@db:5432/x',
    });
    const span = onlyToolSpan();
    expect(span.attributes[ATTR_GEN_AI_TOOL_CALL_ARGUMENTS]).toBe(
      '{"apiToken":"[REDACTED]","id":"A-1","note":"call me with Bearer [REDACTED] or postgres://[REDACTED]@db:5432/x"}',
    );
    expect(span.attributes[ATTR_GEN_AI_TOOL_CALL_RESULT]).toBe(
      '{"id":"A-1","ok":true,"secretNote":"[REDACTED]","status":"shipped"}',
    );
  });

  it('records the failure envelope as the result of an error', async () => {
    const c = await serve([traced({ recordResult: true })]);
    await c.callTool('get_order', { id: 'missing' });
    expect(JSON.parse(String(onlyToolSpan().attributes[ATTR_GEN_AI_TOOL_CALL_RESULT]))).toEqual({
      ok: false,
      error: 'not_found',
      message: 'No order missing.',
      hint: 'Check the id.',
      retryable: false,
    });
  });

  it('caps recorded text at maxRecordedLength', async () => {
    const c = await serve([traced({ recordArguments: true, maxRecordedLength: 64 })]);
    await c.callTool('get_order', { id: 'x'.repeat(1000) });
    const recorded = String(onlyToolSpan().attributes[ATTR_GEN_AI_TOOL_CALL_ARGUMENTS]);
    expect(recorded).toHaveLength(64);
    expect(recorded).toBe(`{"id":"${'x'.repeat(45)}…[truncated]`);
  });

  it('per-tool overrides: one tool records arguments, another opts out of tracing', async () => {
    const ping = defineTool({
      name: 'ping',
      description: 'Ping.',
      input: { n: z.number() },
      handler: () => ok(),
    });
    const c = await serve([traced({ tools: { get_order: { recordArguments: true }, ping: false } })], {
      tools: [getOrder, ping],
    });
    expect((await c.callTool('ping', { n: 1 })).structuredContent).toEqual({ ok: true });
    await c.callTool('get_order', { id: 'A-1' });
    const span = onlyToolSpan();
    expect(span.name).toBe('tools/call get_order');
    expect(span.attributes[ATTR_GEN_AI_TOOL_CALL_ARGUMENTS]).toBe('{"id":"A-1"}');
  });

  it('refuses bad options at factory time, naming where', () => {
    expect(() => createOtel({ transport: 'udp' as never })).toThrow(
      "createOtel: transport must be 'pipe' or 'tcp', got udp",
    );
    expect(() => createOtel({ maxRecordedLength: 5 })).toThrow(
      'createOtel: maxRecordedLength must be an integer of at least 32',
    );
    expect(() => createOtel({ onSpan: 'x' as never })).toThrow('createOtel: onSpan must be a function');
    expect(() => createOtel({ tools: { a: { onSpan: 'x' as never } } })).toThrow(
      'createOtel: tools.a: onSpan must be a function',
    );
  });

  it('refuses a per-tool option it does not know, and a per-tool value that is not an object', () => {
    expect(() => createOtel({ tools: { a: { transport: 'tcp' } as never } })).toThrow(
      'createOtel: tools.a has unknown option(s) transport; a tool may set recordArguments, recordResult, recordErrorStack, recordCallerId, sessionId, onSpan',
    );
    expect(() => createOtel({ tools: { a: true as never } })).toThrow(
      'createOtel: tools.a must be an object of options or false',
    );
  });

  it('a per-tool override keeps the global rules it does not name', async () => {
    const c = await serve([traced({ recordResult: true, tools: { get_order: { recordArguments: true } } })]);
    await c.callTool('get_order', { id: 'A-2' });
    const { attributes } = onlyToolSpan();
    expect(attributes[ATTR_GEN_AI_TOOL_CALL_ARGUMENTS]).toBe('{"id":"A-2"}');
    expect(attributes[ATTR_GEN_AI_TOOL_CALL_RESULT]).toBe(
      '{"id":"A-2","ok":true,"secretNote":"[REDACTED]","status":"shipped"}',
    );
  });

  it('otel is the deprecated alias of createOtel', () => {
    expect(otel).toBe(createOtel);
  });
});

describe('otel: the caller', () => {
  const authInfo = {
    token: 'opaque',
    clientId: 'desk-app',
    scopes: ['orders:read'],
    extra: { iss: 'https://id.example', sub: 'user-8812' },
  };

  it('records the caller kind core identified, never its id by default', async () => {
    const c = await serve([traced()], { authInfo });
    await c.callTool('get_order', { id: 'A-1' });
    const { attributes } = onlyToolSpan();
    expect(attributes[ATTR_TOOLGATE_CALLER_KIND]).toBe('subject');
    expect(attributes).not.toHaveProperty(ATTR_TOOLGATE_CALLER_ID);
    expect(JSON.stringify(attributes)).not.toContain('user-8812');
  });

  it('records the caller id when opted in, globally or for one tool', async () => {
    const c = await serve([traced({ tools: { get_order: { recordCallerId: true } } })], { authInfo });
    await c.callTool('get_order', { id: 'A-1' });
    const { attributes } = onlyToolSpan();
    expect(attributes[ATTR_TOOLGATE_CALLER_KIND]).toBe('subject');
    expect(attributes[ATTR_TOOLGATE_CALLER_ID]).toBe('sub:https://id.example|user-8812');
  });

  it('records the kind of a caller without auth (local) on an unknown tool too', async () => {
    const c = await serve([traced({ recordCallerId: true })]);
    await expect(c.callTool('nope', {})).rejects.toThrow(/Unknown tool: nope/);
    const { attributes } = onlyToolSpan();
    expect([attributes[ATTR_TOOLGATE_CALLER_KIND], attributes[ATTR_TOOLGATE_CALLER_ID]]).toEqual([
      'local',
      'local',
    ]);
  });
});

describe('otel: the onSpan hook', () => {
  it('runs before the span ends, with the context and the result', async () => {
    const c = await serve([
      traced({
        onSpan: (span, ctx, result) => {
          span.setAttribute('app.tenant', 'acme');
          span.setAttribute('app.outcome', result?.isError === true ? 'error' : 'ok');
          span.setAttribute('app.tool', ctx.toolName);
        },
      }),
    ]);
    await c.callTool('get_order', { id: 'A-1' });
    expect(onlyToolSpan().attributes).toMatchObject({
      'app.tenant': 'acme',
      'app.outcome': 'ok',
      'app.tool': 'get_order',
    });
  });

  it('a hook that throws is logged and ignored; the call and span are intact', async () => {
    const entries: LogEntry[] = [];
    const c = await serve(
      [
        traced({
          onSpan: () => {
            throw new Error('hook bug');
          },
        }),
      ],
      { logger: recordingLogger(entries) },
    );
    const result = await c.callTool('get_order', { id: 'A-1' });
    expect(parseResultText(result)).toEqual({
      ok: true,
      id: 'A-1',
      status: 'shipped',
      secretNote: 'sk_live_abcdefghijklmnop',
    });
    expect(onlyToolSpan().ended).toBe(true);
    expect(entries.map((entry) => [entry.level, entry.message, (entry.fields.err as Error).message])).toEqual(
      [['warn', 'otel: the onSpan hook threw; ignored', 'hook bug']],
    );
  });

  it('an async hook that rejects is reported, never left unhandled', async () => {
    const entries: LogEntry[] = [];
    const c = await serve(
      [
        traced({
          onSpan: async () => {
            throw new Error('async hook bug');
          },
        }),
      ],
      { logger: recordingLogger(entries) },
    );
    expect((await c.callTool('get_order', { id: 'A-1' })).isError).toBeUndefined();
    await expect.poll(() => entries.length).toBe(1);
    expect((entries[0]!.fields.err as Error).message).toBe('async hook bug');
  });
});
