// Red-team tests: a hostile model (every argument), a hostile client (the tool name, the request id,
// `params._meta`) and a hostile upstream (what a handler throws or returns) try to get secrets into
// telemetry, to abuse trace propagation, to mint metric series or bloat spans, to make tracing fail or
// change a call, and to cross trace state between concurrent callers. Every call is a real `tools/call`
// round trip into a real OpenTelemetry SDK (in-memory exporter, manual metric reader); each test asserts
// what the attacker gets instead.
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  ParentBasedSampler,
  type ReadableSpan,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import {
  defineTool,
  type ErrorCode,
  fail,
  ok,
  redactSecretsInText,
  type ToolDefinition,
  ToolError,
  type ToolMiddleware,
} from '@toolgate/core';
import {
  expectFailure,
  type LogEntry,
  parseResultText,
  recordingLogger,
  serveTools,
  type TestClient,
} from '@toolgate/core/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createOtel, type OtelOptions, sessionDigest } from '../src/index.js';
import {
  ATTR_ERROR_TYPE,
  ATTR_EXCEPTION_MESSAGE,
  ATTR_EXCEPTION_STACKTRACE,
  ATTR_EXCEPTION_TYPE,
  ATTR_GEN_AI_TOOL_CALL_ARGUMENTS,
  ATTR_GEN_AI_TOOL_CALL_RESULT,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_JSONRPC_REQUEST_ID,
  ATTR_MCP_METHOD_NAME,
  ATTR_TOOLGATE_CALLER_ID,
  ATTR_TOOLGATE_CALLER_KIND,
  ATTR_TOOLGATE_DECISION_ACTION,
  ATTR_TOOLGATE_DECISION_BY,
  ATTR_TOOLGATE_ERROR_CODE,
  ATTR_TOOLGATE_INCIDENT_ID,
  EVENT_EXCEPTION,
  EVENT_TOOLGATE_DECISION,
  MCP_METHOD_TOOLS_CALL,
  OTHER,
} from '../src/semconv.js';
import { createTelemetry } from './harness.js';

const telemetry = createTelemetry();
const { exporter, tracerProvider, meterProvider } = telemetry;

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(
    new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  );
});

const open: TestClient[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((client) => client.close()));
  exporter.reset();
});

afterAll(async () => {
  await telemetry.shutdown();
  trace.disable();
  context.disable();
  propagation.disable();
});

// Secrets a model has seen (or an upstream echoes): none may reach a span, an event or a status.
const SECRETS = {
  bearer: 'Bearer abcdefghijklmnop1234',
  jwt: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ2aWN0aW0ifQ.c2lnbmF0dXJlLXZhbHVl',
  pg: 'postgres://app:hunter2pw@db.internal:5432/orders',
  aws: 'AKIAIOSFODNN7EXAMPLE',
  stripe: 'sk_live_abcdefghijklmnop',
  github: 'ghp_abcdefghijklmnopqrstuvwx',
};
// The parts of those secrets that must never appear in telemetry.
const SECRET_MARKS = [
  'abcdefghijklmnop1234',
  'eyJhbGciOiJIUzI1NiJ9',
  'hunter2pw',
  'IOSFODNN7',
  'sk_live_',
  'ghp_abcdef',
  'opaque-plain-pw',
];

const echo = defineTool({
  name: 'echo',
  description: 'Echoes what it was given.',
  input: { payload: z.unknown().optional(), tag: z.string().optional() },
  handler: async ({ payload }) => ok({ payload }),
}) as ToolDefinition;

/** A handler that relays what a hostile upstream threw: its message, name and code. */
const upstream = defineTool({
  name: 'upstream',
  description: 'Calls an upstream that fails.',
  input: { message: z.string(), code: z.string().optional(), name: z.string().optional() },
  handler: async ({ message, code, name }) => {
    const error = Object.assign(new Error(message), code === undefined ? {} : { code });
    if (name !== undefined) error.name = name;
    throw error;
  },
}) as ToolDefinition;

async function serve(options: OtelOptions = {}, extra: { tools?: ToolDefinition[]; logs?: LogEntry[] } = {}) {
  const client = await serveTools(extra.tools ?? [echo, upstream], {
    middleware: [createOtel({ tracerProvider, meterProvider, ...options })],
    logger: recordingLogger(extra.logs ?? []),
  });
  open.push(client);
  return client;
}

function toolSpans(from: InMemorySpanExporter = exporter): ReadableSpan[] {
  return from.getFinishedSpans().filter((span) => span.kind === SpanKind.SERVER);
}

function onlyToolSpan(): ReadableSpan {
  const spans = toolSpans();
  expect(spans).toHaveLength(1);
  return spans[0]!;
}

/** Everything a telemetry backend would show of the spans, as one string. */
function everything(spans: readonly ReadableSpan[] = exporter.getFinishedSpans()): string {
  return JSON.stringify(
    spans.map((span) => ({
      name: span.name,
      attributes: span.attributes,
      events: span.events,
      status: span.status,
      links: span.links,
      traceState: span.spanContext().traceState?.serialize(),
    })),
  );
}

function expectNoSecrets(text: string): void {
  for (const mark of SECRET_MARKS) expect(text).not.toContain(mark);
}

describe('red team (a): secrets in recorded arguments, results, errors and names', () => {
  it('secret-named keys in odd cases, nested, in arrays and as keys, and secret shapes in values, are redacted', async () => {
    const c = await serve({ recordArguments: true, recordResult: true });
    const payload = {
      PassWord: 'opaque-plain-pw',
      'X-API-KEY': 'opaque-plain-pw',
      nested: { deeper: [{ Refresh_Token: 'opaque-plain-pw' }, { AUTHORIZATION: 'opaque-plain-pw' }] },
      list: [SECRETS.bearer, SECRETS.jwt, SECRETS.aws, SECRETS.stripe, SECRETS.github],
      [SECRETS.pg]: 'a connection string as a key',
      [`${SECRETS.bearer}`]: 'a token as a key',
      dsn: SECRETS.pg,
      env: `DB_PASSWORD=opaque-plain-pw AWS_ACCESS_KEY_ID=${SECRETS.aws}`,
      quoted: JSON.stringify({ client_secret: 'opaque-plain-pw' }),
    };
    const result = await c.callTool('echo', { payload });
    // The model's own answer is untouched by tracing.
    expect(parseResultText(result)).toEqual({ ok: true, payload });
    const span = onlyToolSpan();
    expect(String(span.attributes[ATTR_GEN_AI_TOOL_CALL_ARGUMENTS])).toContain('[REDACTED]');
    expect(String(span.attributes[ATTR_GEN_AI_TOOL_CALL_RESULT])).toContain('[REDACTED]');
    expectNoSecrets(everything());
  });

  it('a hostile upstream error: the message stays off the span, and the opted-in exception event is redacted', async () => {
    const c = await serve({ recordErrorStack: true });
    const message = `upstream said ${SECRETS.pg} with ${SECRETS.bearer}, ${SECRETS.jwt}, ${SECRETS.aws}, password=opaque-plain-pw`;
    const envelope = expectFailure(await c.callTool('upstream', { message }));
    expect(envelope.error).toBe('internal');
    const span = onlyToolSpan();
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'Internal error.' });
    const event = span.events.find((e) => e.name === 'exception')!;
    expect(String(event.attributes?.[ATTR_EXCEPTION_MESSAGE])).toMatch(
      /^upstream said postgres:\/\/\[REDACTED\]@/,
    );
    expect(String(event.attributes?.[ATTR_EXCEPTION_STACKTRACE])).toContain('[REDACTED]');
    expectNoSecrets(everything());
  });

  it.each([
    ['code', { code: SECRETS.aws }],
    ['code', { code: SECRETS.github }],
    ['name', { name: SECRETS.stripe }],
  ])(
    'an upstream error whose %s is a secret is recorded as error.type _OTHER, on the span and the metric',
    async (_field, fields) => {
      const fresh = createTelemetry();
      const client = await serveTools([upstream], {
        middleware: [
          createOtel({ tracerProvider: fresh.tracerProvider, meterProvider: fresh.meterProvider }),
        ],
        logger: recordingLogger([]),
      });
      open.push(client);
      expect(expectFailure(await client.callTool('upstream', { message: 'failed', ...fields })).error).toBe(
        'internal',
      );
      const [span] = toolSpans(fresh.exporter);
      expect(span!.attributes[ATTR_ERROR_TYPE]).toBe(OTHER);
      const points = await fresh.durationPoints();
      expect(points.map((point) => point.attributes[ATTR_ERROR_TYPE])).toEqual([OTHER]);
      expectNoSecrets(everything(fresh.exporter.getFinishedSpans()) + JSON.stringify(points));
      await fresh.shutdown();
    },
  );

  it('a tool name that is a secret (an unknown tool) is recorded with the secret redacted', async () => {
    const c = await serve();
    for (const name of [SECRETS.pg, SECRETS.bearer, SECRETS.jwt, SECRETS.aws]) {
      await expect(c.callTool(name, {})).rejects.toThrow(/Unknown tool/);
    }
    const spans = toolSpans();
    expect(spans).toHaveLength(4);
    for (const span of spans) expect(span.name).toBe('tools/call');
    expect(spans.map((span) => span.attributes[ATTR_GEN_AI_TOOL_NAME])).toEqual([
      'postgres://[REDACTED]@db.internal:5432/orders',
      'Bearer [REDACTED]',
      '[REDACTED]',
      '[REDACTED]',
    ]);
    expectNoSecrets(everything());
  });

  it.each([
    ['a message that is not a string', { message: { text: SECRETS.pg } }],
    ['no message', {}],
  ])(
    'a relayed envelope with %s is recorded as the internal failure the model gets, under its incident id',
    async (_what, fields) => {
      // A relaying middleware hands on an upstream's envelope as it came (core's boundary will rebuild it
      // for the model; otel sees it first).
      const relay: ToolMiddleware = async () => ({
        isError: true,
        content: [{ type: 'text', text: `upstream failure ${SECRETS.pg}` }],
        _meta: { 'toolgate/error': { ok: false, error: 'unavailable', ...fields } },
      });
      const client = await serveTools([echo], {
        middleware: [createOtel({ tracerProvider, meterProvider, recordResult: true }), relay],
        logger: recordingLogger([]),
      });
      open.push(client);
      const envelope = expectFailure(await client.callTool('echo', {}));
      expect(envelope.error).toBe('internal');
      const span = onlyToolSpan();
      expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'Internal error.' });
      expect(span.attributes['toolgate.error.code']).toBe('internal');
      expect(span.attributes[ATTR_TOOLGATE_INCIDENT_ID]).toBe(envelope.incidentId);
      expect(JSON.parse(String(span.attributes[ATTR_GEN_AI_TOOL_CALL_RESULT]))).toEqual(envelope);
      expectNoSecrets(everything());
    },
  );

  it('a relayed envelope with a hostile incident id: the id core would drop is not recorded', async () => {
    const relay: ToolMiddleware = async () => ({
      isError: true,
      content: [{ type: 'text', text: 'upstream failure' }],
      _meta: {
        'toolgate/error': {
          ok: false,
          error: 'unavailable',
          message: 'Upstream down.',
          incidentId: `${SECRETS.bearer} ${'x'.repeat(100_000)}`,
        },
      },
    });
    const client = await serveTools([echo], {
      middleware: [createOtel({ tracerProvider, meterProvider }), relay],
      logger: recordingLogger([]),
    });
    open.push(client);
    const envelope = expectFailure(await client.callTool('echo', {}));
    expect([envelope.error, envelope.message, envelope.incidentId]).toEqual([
      'unavailable',
      'Upstream down.',
      undefined,
    ]);
    const span = onlyToolSpan();
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'Upstream down.' });
    expect(span.attributes[ATTR_TOOLGATE_INCIDENT_ID]).toBeUndefined();
    expect(everything().length).toBeLessThan(4096);
    expectNoSecrets(everything());
  });

  it('a raw isError result from inner middleware records the status the model sees, not the raw text', async () => {
    const raw: ToolMiddleware = async () => ({
      isError: true,
      content: [{ type: 'text', text: 'pg at 10.0.0.5:5432 failed: SELECT * FROM users WHERE pw = $1' }],
    });
    const client = await serveTools([echo], {
      middleware: [createOtel({ tracerProvider, meterProvider }), raw],
      logger: recordingLogger([]),
    });
    open.push(client);
    const envelope = expectFailure(await client.callTool('echo', {}));
    expect(envelope.message).toBe('Internal error.');
    expect(onlyToolSpan().status).toEqual({ code: SpanStatusCode.ERROR, message: 'Internal error.' });
    // The span, the answer and core's log entry (with the raw text) share one incident id.
    expect(onlyToolSpan().attributes[ATTR_TOOLGATE_INCIDENT_ID]).toBe(envelope.incidentId);
    expect(everything()).not.toMatch(/10\.0\.0\.5|SELECT/);
  });
  it('a ToolError relaying an upstream’s own code (no core code) records internal as the model sees it, never the code', async () => {
    // A middleware that passes an upstream's error on as a ToolError, code and message as the upstream
    // chose them (plain JavaScript: nothing checks the code).
    const relay: ToolMiddleware = async (ctx) => {
      const { code, message } = ctx.args as { code: string; message: string };
      throw new ToolError(code as ErrorCode, message, { hint: 'Ask the upstream.', retryable: false });
    };
    const client = await serveTools([upstream], {
      middleware: [createOtel({ tracerProvider, meterProvider }), relay],
      logger: recordingLogger([]),
    });
    open.push(client);
    const code = `${SECRETS.aws}:${'x'.repeat(100_000)}`;
    const envelope = expectFailure(
      await client.callTool('upstream', { code, message: `rejected ${SECRETS.stripe} at 10.0.0.5` }),
    );
    expect([envelope.error, envelope.message]).toEqual(['internal', 'Internal error.']);
    const span = onlyToolSpan();
    expect(span.attributes[ATTR_TOOLGATE_ERROR_CODE]).toBe('internal');
    expect(span.attributes[ATTR_ERROR_TYPE]).toBe('tool_error');
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: 'Internal error.' });
    // The span and the answer share one incident id.
    expect(span.attributes[ATTR_TOOLGATE_INCIDENT_ID]).toBe(envelope.incidentId);
    expect(everything().length).toBeLessThan(4096);
    expect(everything()).not.toContain('10.0.0.5');
    expectNoSecrets(everything());
  });
});

describe('red team (a2): the caller on the span', () => {
  // Without auth over Streamable HTTP the caller is `session:<id>`, and that id is what lets a request
  // continue the session: it is a credential, recorded as such only where the session id would be.
  async function sessionCaller(options: OtelOptions): Promise<TestClient> {
    const client = await serveTools([echo], {
      middleware: [createOtel({ tracerProvider, meterProvider, ...options })],
      logger: recordingLogger([]),
      localTransport: () => false,
      sessionId: 'sess-7f3a9c1e5b2d4a60',
    });
    open.push(client);
    return client;
  }

  it('recordCallerId records a session caller under the session id digest, never the session id', async () => {
    const digest = sessionDigest('sess-7f3a9c1e5b2d4a60');
    for (const sessionId of ['digest', 'omit'] as const) {
      const c = await sessionCaller({ recordCallerId: true, sessionId });
      expect((await c.callTool('echo', { payload: 1 })).isError).toBeUndefined();
      const { attributes } = onlyToolSpan();
      expect(attributes[ATTR_TOOLGATE_CALLER_KIND]).toBe('session');
      expect(attributes[ATTR_TOOLGATE_CALLER_ID]).toBe(`session:${digest}`);
      expect(everything()).not.toContain('sess-7f3a9c1e5b2d4a60');
      exporter.reset();
    }
    // Only where the session id itself is recorded is the caller id raw too.
    const raw = await sessionCaller({ recordCallerId: true, sessionId: 'raw' });
    await raw.callTool('echo', { payload: 1 });
    expect(onlyToolSpan().attributes[ATTR_TOOLGATE_CALLER_ID]).toBe('session:sess-7f3a9c1e5b2d4a60');
  });
});

describe('red team (b): hostile trace context in _meta', () => {
  const VICTIM_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
  const VICTIM_SPAN = '00f067aa0ba902b7';

  it.each<[string, unknown]>([
    ['version ff', `ff-${VICTIM_TRACE}-${VICTIM_SPAN}-01`],
    ['version 00 with an extra field', `00-${VICTIM_TRACE}-${VICTIM_SPAN}-01-extra`],
    ['uppercase hex', `00-${VICTIM_TRACE.toUpperCase()}-${VICTIM_SPAN}-01`],
    ['overlong trace id', `00-${VICTIM_TRACE}ab-${VICTIM_SPAN}-01`],
    ['all-zero trace id', `00-${'0'.repeat(32)}-${VICTIM_SPAN}-01`],
    ['all-zero span id', `00-${VICTIM_TRACE}-${'0'.repeat(16)}-01`],
    ['flags not hex', `00-${VICTIM_TRACE}-${VICTIM_SPAN}-zz`],
    ['a newline and a second header', `00-${VICTIM_TRACE}-${VICTIM_SPAN}-01\ntraceparent: x`],
    ['10,000 characters', `00-${VICTIM_TRACE}-${VICTIM_SPAN}-01${'-a'.repeat(5000)}`],
    ['a number', 42],
    ['null', null],
    ['an array', [`00-${VICTIM_TRACE}-${VICTIM_SPAN}-01`]],
    ['an object', { value: `00-${VICTIM_TRACE}-${VICTIM_SPAN}-01` }],
    ['an object with toString', { toString: () => `00-${VICTIM_TRACE}-${VICTIM_SPAN}-01` }],
  ])(
    'traceparent as %s: the call succeeds as a fresh root, nothing of it recorded',
    async (_what, traceparent) => {
      const c = await serve();
      const result = await c.callTool('echo', { payload: 1 }, { meta: { traceparent } });
      expect(parseResultText(result)).toEqual({ ok: true, payload: 1 });
      const span = onlyToolSpan();
      expect(span.parentSpanContext).toBeUndefined();
      expect(span.spanContext().traceId).not.toBe(VICTIM_TRACE);
      expect(everything()).not.toMatch(/4bf92f3577b34da6|00f067aa0ba902b7/i);
    },
  );

  it('hostile tracestate (10,000 characters, bad keys, many members) is dropped, never recorded, never breaks the call', async () => {
    const c = await serve();
    const traceparent = `00-${VICTIM_TRACE}-${VICTIM_SPAN}-01`;
    const states = [
      `vendor=${'v'.repeat(10_000)}`,
      Array.from({ length: 100 }, (_, i) => `k${i}=v`).join(','),
      'UPPER=1,=novalue,bad key=x',
      `secret=${SECRETS.stripe}`.repeat(3),
    ];
    for (const tracestate of states) {
      const result = await c.callTool('echo', { payload: 1 }, { meta: { traceparent, tracestate } });
      expect(result.isError).toBeUndefined();
    }
    const spans = toolSpans();
    expect(spans).toHaveLength(states.length);
    for (const span of spans) {
      const serialized = span.spanContext().traceState?.serialize() ?? '';
      expect(serialized.length).toBeLessThanOrEqual(512);
    }
    expect(JSON.stringify(spans.map((s) => [s.attributes, s.events, s.status]))).not.toMatch(
      /vvvv|k99|sk_live/,
    );
  });

  it("clientContext 'link': the client's tracestate stays off the link, which keeps the ids and flags only", async () => {
    const c = await serve({ clientContext: 'link' });
    const traceparent = `00-${VICTIM_TRACE}-${VICTIM_SPAN}-01`;
    const tracestate = `acme=${SECRETS.stripe},vendor=tenant-42-user-8812`;
    const result = await c.callTool('echo', { payload: 1 }, { meta: { traceparent, tracestate } });
    expect(result.isError).toBeUndefined();
    const span = onlyToolSpan();
    expect(span.parentSpanContext).toBeUndefined();
    expect(span.spanContext().traceState).toBeUndefined();
    expect(span.links).toEqual([
      { context: { traceId: VICTIM_TRACE, spanId: VICTIM_SPAN, traceFlags: 1, isRemote: true } },
    ]);
    expect(everything()).not.toMatch(/acme|vendor|user-8812/);
    expectNoSecrets(everything());
  });

  it('hostile baggage is bounded by the propagator and never recorded on the span', async () => {
    let seenEntries = -1;
    const probe: ToolMiddleware = async (_ctx, next) => {
      seenEntries = Object.keys(propagation.getActiveBaggage()?.getAllEntries() ?? {}).length;
      return next();
    };
    const client = await serveTools([echo], {
      middleware: [createOtel({ tracerProvider, meterProvider }), probe],
      logger: recordingLogger([]),
    });
    open.push(client);
    const baggage = Array.from({ length: 2000 }, (_, i) => `tenant${i}=${SECRETS.stripe}${i}`).join(',');
    const result = await client.callTool(
      'echo',
      { payload: 1 },
      { meta: { baggage: `${baggage}${'x'.repeat(10_000)}` } },
    );
    expect(result.isError).toBeUndefined();
    expect(seenEntries).toBeLessThanOrEqual(180);
    expectNoSecrets(everything());
  });

  it('a client that sets sampled cannot force recording past a sampler that ignores the parent', async () => {
    const sampledOut = new InMemorySpanExporter();
    const strict = new BasicTracerProvider({
      sampler: new TraceIdRatioBasedSampler(0),
      spanProcessors: [new SimpleSpanProcessor(sampledOut)],
    });
    const client = await serveTools([echo], {
      middleware: [createOtel({ tracerProvider: strict, meterProvider })],
      logger: recordingLogger([]),
    });
    open.push(client);
    for (let i = 0; i < 20; i += 1) {
      const traceparent = `00-${VICTIM_TRACE.slice(0, 30)}${String(i).padStart(2, '0')}-${VICTIM_SPAN}-01`;
      expect(
        (await client.callTool('echo', { payload: i }, { meta: { traceparent } })).isError,
      ).toBeUndefined();
    }
    expect(sampledOut.getFinishedSpans()).toEqual([]);
    // With the SDK's default ParentBased sampler, the client's flag decides; that is the app's choice.
    const parentBased = new InMemorySpanExporter();
    const trusting = new BasicTracerProvider({
      sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(0) }),
      spanProcessors: [new SimpleSpanProcessor(parentBased)],
    });
    const second = await serveTools([echo], {
      middleware: [createOtel({ tracerProvider: trusting, meterProvider })],
      logger: recordingLogger([]),
    });
    open.push(second);
    await second.callTool('echo', {}, { meta: { traceparent: `00-${VICTIM_TRACE}-${VICTIM_SPAN}-00` } });
    await second.callTool('echo', {});
    expect(parentBased.getFinishedSpans()).toEqual([]);
    await Promise.all([strict.shutdown(), trusting.shutdown()]);
  });
});

describe('red team (c): cardinality and volume', () => {
  it('invented tool names never become span names or metric series', async () => {
    const fresh = createTelemetry();
    const client = await serveTools([echo], {
      middleware: [createOtel({ tracerProvider: fresh.tracerProvider, meterProvider: fresh.meterProvider })],
      logger: recordingLogger([]),
    });
    open.push(client);
    const names = Array.from({ length: 50 }, (_, i) => `made_up_${i}_${'é'.repeat(i * 10)}`);
    names.push('echo ', 'ECHO', 'echo\u0000', '__proto__', 'constructor', 'x'.repeat(10_000));
    await Promise.all(names.map((name) => expect(client.callTool(name, {})).rejects.toThrow(/Unknown tool/)));
    const spans = toolSpans(fresh.exporter);
    expect(spans).toHaveLength(names.length);
    expect(new Set(spans.map((span) => span.name))).toEqual(new Set(['tools/call']));
    for (const span of spans)
      expect(String(span.attributes[ATTR_GEN_AI_TOOL_NAME]).length).toBeLessThanOrEqual(256);
    const points = await fresh.durationPoints();
    expect(points.map((point) => point.attributes[ATTR_GEN_AI_TOOL_NAME])).toEqual([OTHER]);
    expect(points[0]!.value.count).toBe(names.length);
    await fresh.shutdown();
  });

  it('a hostile upstream minting a new error code per call cannot mint a metric series per call', async () => {
    const fresh = createTelemetry();
    const client = await serveTools([upstream], {
      middleware: [createOtel({ tracerProvider: fresh.tracerProvider, meterProvider: fresh.meterProvider })],
      logger: recordingLogger([]),
    });
    open.push(client);
    const calls = 400;
    await Promise.all(
      Array.from({ length: calls }, (_, i) =>
        client.callTool('upstream', { message: 'no', code: `E_UP_${i}` }),
      ),
    );
    const points = await fresh.durationPoints();
    expect(points.length).toBeLessThanOrEqual(101);
    expect(points.reduce((sum, point) => sum + point.value.count, 0)).toBe(calls);
    expect(points.some((point) => point.attributes[ATTR_ERROR_TYPE] === OTHER)).toBe(true);
    // Span error.type follows the same bound: the backend's span metrics cannot be flooded either.
    const types = new Set(toolSpans(fresh.exporter).map((span) => span.attributes[ATTR_ERROR_TYPE]));
    expect(types.size).toBeLessThanOrEqual(101);
    await fresh.shutdown();
  });

  it('numerous arguments: redaction reads only what the cap can show, and the recorded text says what was left out', async () => {
    let redacted = 0;
    const c = await serve({
      recordArguments: true,
      recordResult: true,
      redact: {
        redactText: (text) => {
          redacted += 1;
          return redactSecretsInText(text);
        },
      },
    });
    const members = Object.fromEntries(
      Array.from({ length: 20_000 }, (_, i) => [`k${String(i).padStart(5, '0')}`, `value ${i}`]),
    );
    const payload = {
      apiToken: SECRETS.stripe,
      members,
      numbers: Array.from({ length: 50_000 }, (_, i) => i),
    };
    const result = await c.callTool('echo', { payload });
    expect(parseResultText(result)).toEqual({ ok: true, payload });
    const { attributes } = onlyToolSpan();
    const args = String(attributes[ATTR_GEN_AI_TOOL_CALL_ARGUMENTS]);
    const recorded = String(attributes[ATTR_GEN_AI_TOOL_CALL_RESULT]);
    // The first members as sent (2,049 in all, the arguments object's own included), the rest counted
    // (the marker sorts first); redaction as ever.
    expect(args).toMatch(
      /^\{"payload":\{"apiToken":"\[REDACTED\]","members":\{"\[\+17955 more keys\]":null,"k00000":"value 0","k00001":"value 1",/,
    );
    expect(args).toMatch(/…\[truncated\]$/);
    expect(args.length).toBe(4096);
    expect(recorded).toMatch(
      /^\{"ok":true,"payload":\{"apiToken":"\[REDACTED\]","members":\{"\[\+1795\d more keys\]":null,"k00000":"value 0",/,
    );
    expectNoSecrets(everything());
    // Each recorded value redacts at most about maxRecordedLength / 2 members (a key and a value each):
    // the 40,000 strings of the arguments are never all walked.
    expect(redacted).toBeLessThan(2 * 2 * 2100);
    // A value under the limit is recorded whole, exactly as before.
    exporter.reset();
    const small = { apiToken: SECRETS.stripe, items: [1, 2, 3], members: { a: 'x' } };
    await c.callTool('echo', { payload: small });
    expect(onlyToolSpan().attributes[ATTR_GEN_AI_TOOL_CALL_ARGUMENTS]).toBe(
      '{"payload":{"apiToken":"[REDACTED]","items":[1,2,3],"members":{"a":"x"}}}',
    );
  });

  it('a huge argument is recorded capped, and the cap never leaves a lone UTF-16 surrogate', async () => {
    // `{"payload":"` is 12 characters: a cap of 33 keeps 21, which ends inside the fifth emoji.
    const c = await serve({ recordArguments: true, recordResult: true, maxRecordedLength: 33 });
    await c.callTool('echo', { payload: '😀'.repeat(500_000) });
    const span = onlyToolSpan();
    for (const key of [ATTR_GEN_AI_TOOL_CALL_ARGUMENTS, ATTR_GEN_AI_TOOL_CALL_RESULT]) {
      const recorded = String(span.attributes[key]);
      expect(recorded.length).toBeLessThanOrEqual(33);
      expect(recorded).toMatch(/…\[truncated\]$/);
      expect(recorded.isWellFormed()).toBe(true);
    }
  });

  it('a capped tool name or request id never leaves a lone surrogate either', async () => {
    const c = await serve();
    // 'a' then emoji: the 256-character cap falls inside a pair.
    const name = `a${'😀'.repeat(400)}`;
    await expect(c.callTool(name, {})).rejects.toThrow(/Unknown tool/);
    c.client.onerror = () => {};
    await c.client.transport!.send({
      jsonrpc: '2.0',
      id: `r${'😀'.repeat(400)}`,
      method: 'tools/call',
      params: { name: 'echo', arguments: {} },
    });
    await expect.poll(() => toolSpans().length).toBe(2);
    const [unknown, raw] = toolSpans();
    expect(String(unknown!.attributes[ATTR_GEN_AI_TOOL_NAME]).isWellFormed()).toBe(true);
    expect(String(raw!.attributes[ATTR_JSONRPC_REQUEST_ID]).isWellFormed()).toBe(true);
  });

  it('lone surrogates from the client or an upstream become U+FFFD, so no exporter batch is refused for them', async () => {
    // A lone surrogate is no valid UTF-8: a protobuf receiver that checks refuses the whole batch.
    const lone: ToolMiddleware = async (ctx, next) =>
      ctx.toolName === 'echo' ? fail('unavailable', 'store said \ud800 no') : next();
    const client = await serveTools([echo, upstream], {
      middleware: [createOtel({ tracerProvider, meterProvider, recordErrorStack: true }), lone],
      logger: recordingLogger([]),
    });
    open.push(client);
    await expect(client.callTool('bad\udc00name', {})).rejects.toThrow(/Unknown tool/);
    await client.callTool('upstream', { message: 'upstream \ud83d said no' });
    await client.callTool('echo', {});
    client.client.onerror = () => {};
    await client.client.transport!.send({
      jsonrpc: '2.0',
      id: 'req-\udbff',
      method: 'tools/call',
      params: { name: 'upstream', arguments: { message: 'x' } },
    });
    await expect.poll(() => toolSpans().length).toBe(4);
    const walk = (value: unknown): string[] =>
      typeof value === 'string'
        ? [value]
        : typeof value === 'object' && value !== null
          ? Object.values(value).flatMap(walk)
          : [];
    const recorded = toolSpans().flatMap((span) => walk([span.attributes, span.events, span.status]));
    expect(recorded.filter((text) => !text.isWellFormed())).toEqual([]);
    expect(recorded).toEqual(expect.arrayContaining(['bad\ufffdname', 'req-\ufffd', 'store said \ufffd no']));
  });

  it('the cap falls inside a secret: redaction runs first, so no part of it survives', async () => {
    for (let pad = 0; pad < 24; pad += 1) {
      const c = await serve({ recordArguments: true, maxRecordedLength: 48 });
      await c.callTool('echo', { payload: `${'x'.repeat(pad)} ${SECRETS.bearer} ${SECRETS.jwt}` });
      const recorded = String(onlyToolSpan().attributes[ATTR_GEN_AI_TOOL_CALL_ARGUMENTS]);
      expect(recorded).not.toMatch(/abcdefgh|eyJhbGci/);
      exporter.reset();
    }
  });
});

describe('red team (d): tracing never fails, changes or delays a call', () => {
  const expected = { ok: true, payload: 'A-1' };

  it('a tracer whose startSpan throws: the call answers as without otel, and the failure is logged', async () => {
    const logs: LogEntry[] = [];
    const throwing = {
      getTracer: () => ({
        startSpan: () => {
          throw new Error('tracer bug');
        },
        startActiveSpan: () => {
          throw new Error('tracer bug');
        },
      }),
    };
    const c = await serve({ tracerProvider: throwing as never }, { logs });
    expect(parseResultText(await c.callTool('echo', { payload: 'A-1' }))).toEqual(expected);
    expect(logs.some((entry) => entry.level === 'warn' && /otel/.test(entry.message ?? ''))).toBe(true);
  });

  it.each(['onStart', 'onEnd'] as const)(
    'a span processor whose %s throws: the call is untouched',
    async (hook) => {
      const inner = new InMemorySpanExporter();
      const throwing: SpanProcessor = {
        onStart: () => {
          if (hook === 'onStart') throw new Error('processor bug');
        },
        onEnd: () => {
          if (hook === 'onEnd') throw new Error('processor bug');
        },
        forceFlush: async () => {},
        shutdown: async () => {},
      };
      const provider = new BasicTracerProvider({
        spanProcessors: [throwing, new SimpleSpanProcessor(inner)],
      });
      const c = await serve({ tracerProvider: provider });
      expect(parseResultText(await c.callTool('echo', { payload: 'A-1' }))).toEqual(expected);
      const failed = await c.callTool('upstream', { message: 'down', code: 'ECONNREFUSED' });
      expect(expectFailure(failed).error).toBe('internal');
    },
  );

  it('an exporter that never answers does not hold up calls', async () => {
    const hanging: SpanExporter = { export: () => {}, shutdown: async () => {} };
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(hanging)] });
    const c = await serve({ tracerProvider: provider });
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => c.callTool('echo', { payload: `A-${i}` })),
    );
    expect(results.map((result) => parseResultText(result))).toEqual(
      Array.from({ length: 20 }, (_, i) => ({ ok: true, payload: `A-${i}` })),
    );
  });

  it('a meter whose histogram throws on record, or a meter provider that throws: the call is untouched', async () => {
    const recordThrows = {
      getMeter: () => ({
        createHistogram: () => ({
          record: () => {
            throw new Error('meter bug');
          },
        }),
      }),
    };
    const getMeterThrows = {
      getMeter: () => {
        throw new Error('meter provider bug');
      },
    };
    const logs: LogEntry[] = [];
    const c = await serve({ meterProvider: recordThrows as never }, { logs });
    expect(parseResultText(await c.callTool('echo', { payload: 'A-1' }))).toEqual(expected);
    expect(expectFailure(await c.callTool('upstream', { message: 'x' })).error).toBe('internal');
    expect(toolSpans()).toHaveLength(2);
    expect(logs.some((entry) => entry.level === 'warn' && /otel/.test(entry.message ?? ''))).toBe(true);
    // A global meter provider that throws: the histogram is looked up per call.
    const { metrics } = await import('@opentelemetry/api');
    metrics.setGlobalMeterProvider(getMeterThrows as never);
    try {
      const global = await serveTools([echo], {
        middleware: [createOtel({ tracerProvider })],
        logger: recordingLogger([]),
      });
      open.push(global);
      expect(parseResultText(await global.callTool('echo', { payload: 'A-1' }))).toEqual(expected);
      expect(parseResultText(await global.callTool('echo', { payload: 'A-1' }))).toEqual(expected);
    } finally {
      metrics.disable();
    }
  });

  it('a span whose every method throws: the call answers as without otel', async () => {
    const hostileSpan = new Proxy(
      {},
      {
        get: () => () => {
          throw new Error('span bug');
        },
      },
    );
    const provider = {
      getTracer: () => ({ startSpan: () => hostileSpan, startActiveSpan: () => undefined }),
    };
    const c = await serve({ tracerProvider: provider as never, recordArguments: true });
    expect(parseResultText(await c.callTool('echo', { payload: 'A-1' }))).toEqual(expected);
    expect(expectFailure(await c.callTool('upstream', { message: 'x' })).error).toBe('internal');
  });

  it('thrown values with hostile getters, null or a symbol are rethrown as they are and the span ends', async () => {
    const hostile = [
      Object.defineProperty(new Error('x'), 'name', {
        get() {
          throw new Error('name getter');
        },
      }),
      Object.defineProperty(new Error('x'), 'stack', {
        get() {
          throw new Error('stack getter');
        },
      }),
      new Proxy(new Error('x'), {
        get() {
          throw new Error('proxy');
        },
        getPrototypeOf() {
          throw new Error('proxy');
        },
      }),
      null,
      Symbol('s'),
    ];
    const seenByOuter: unknown[] = [];
    let index = 0;
    const outer: ToolMiddleware = async (_ctx, next) => {
      try {
        return await next();
      } catch (error) {
        seenByOuter.push(error);
        return fail('unavailable', 'Later.');
      }
    };
    const thrower: ToolMiddleware = async () => {
      throw hostile[index++];
    };
    const client = await serveTools([echo], {
      middleware: [outer, createOtel({ tracerProvider, meterProvider, recordErrorStack: true }), thrower],
      logger: recordingLogger([]),
    });
    open.push(client);
    for (let i = 0; i < hostile.length; i += 1) {
      expect(expectFailure(await client.callTool('echo', {})).error).toBe('unavailable');
    }
    expect(seenByOuter).toHaveLength(hostile.length);
    for (let i = 0; i < hostile.length; i += 1) expect(seenByOuter[i]).toBe(hostile[i]);
    const spans = toolSpans();
    expect(spans).toHaveLength(hostile.length);
    for (const span of spans) expect(span.ended).toBe(true);
  });
  it('an upstream error whose message and stack are not strings (a relayed 400): the metric, the decisions and the exception event are all still recorded', async () => {
    // An API client that copies the service's error body onto an Error: NestJS answers a 400 with a list
    // of messages, and a relayed error may carry its remote stack as an object.
    const relay = defineTool({
      name: 'relay',
      description: 'Relays what an upstream API answered.',
      input: {},
      handler: async () => {
        throw Object.assign(new Error(), {
          name: 'BadRequestException',
          message: ['email must be an email', `token ${SECRETS.stripe} is not valid`],
          stack: { frames: ['at /srv/app/client.js:12'] },
        });
      },
    }) as ToolDefinition;
    const decide: ToolMiddleware = async (ctx, next) => {
      ctx.decisions.push({ by: 'redact-errors', action: 'internal' });
      return next();
    };
    const fresh = createTelemetry();
    const logs: LogEntry[] = [];
    const client = await serveTools([relay], {
      middleware: [
        createOtel({
          tracerProvider: fresh.tracerProvider,
          meterProvider: fresh.meterProvider,
          recordErrorStack: true,
        }),
        decide,
      ],
      logger: recordingLogger(logs),
    });
    open.push(client);
    expect(expectFailure(await client.callTool('relay', {})).error).toBe('internal');
    const [span] = toolSpans(fresh.exporter);
    expect(span!.attributes[ATTR_ERROR_TYPE]).toBe('BadRequestException');
    expect(span!.events.map((event) => [event.name, event.attributes])).toEqual([
      [
        EVENT_EXCEPTION,
        {
          [ATTR_EXCEPTION_TYPE]: 'BadRequestException',
          [ATTR_EXCEPTION_MESSAGE]: 'email must be an email,token [REDACTED] is not valid',
          [ATTR_EXCEPTION_STACKTRACE]: '',
        },
      ],
      [
        EVENT_TOOLGATE_DECISION,
        { [ATTR_TOOLGATE_DECISION_BY]: 'redact-errors', [ATTR_TOOLGATE_DECISION_ACTION]: 'internal' },
      ],
    ]);
    // The failed call is counted as a failure, never as a success.
    expect((await fresh.durationPoints()).map((point) => point.attributes)).toEqual([
      {
        [ATTR_MCP_METHOD_NAME]: MCP_METHOD_TOOLS_CALL,
        [ATTR_GEN_AI_TOOL_NAME]: 'relay',
        [ATTR_ERROR_TYPE]: 'BadRequestException',
      },
    ]);
    expect(logs.filter((entry) => /otel/.test(entry.message ?? ''))).toEqual([]);
    await fresh.shutdown();
  });
});

describe('red team (e): no trace state crosses between concurrent callers', () => {
  it('interleaved calls each keep their own parent, active span, baggage, state.trace and child spans', async () => {
    const count = 16;
    let arrived = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const childTracer = tracerProvider.getTracer('handler');
    const observed = new Map<string, { active?: string; tenant?: string; state?: unknown }>();
    const probe = defineTool({
      name: 'probe',
      description: 'Notes what it sees of the trace context.',
      input: { tag: z.string() },
      handler: async ({ tag }, ctx) => {
        arrived += 1;
        if (arrived === count) release();
        await gate;
        // Resume in an order unrelated to arrival.
        for (let i = 0; i < Number(tag.slice(1)) % 5; i += 1) await Promise.resolve();
        const child = childTracer.startSpan(`child ${tag}`);
        child.end();
        observed.set(tag, {
          active: trace.getActiveSpan()?.spanContext().spanId,
          tenant: propagation.getActiveBaggage()?.getEntry('tenant')?.value,
          state: ctx.state.trace,
        });
        return ok({ tag });
      },
    }) as ToolDefinition;
    const clients = await Promise.all([
      serve({ recordArguments: true }, { tools: [probe] }),
      serve({ recordArguments: true }, { tools: [probe] }),
    ]);
    const traceIdOf = (i: number) => `${(i + 1).toString(16).padStart(2, '0')}${'a'.repeat(30)}`;
    const parentOf = (i: number) => `${(i + 1).toString(16).padStart(2, '0')}${'b'.repeat(14)}`;
    const results = await Promise.all(
      Array.from({ length: count }, (_, i) => {
        // Odd callers send no trace context: they must be fresh roots, never a neighbour's child.
        const meta =
          i % 2 === 0
            ? { traceparent: `00-${traceIdOf(i)}-${parentOf(i)}-01`, baggage: `tenant=t${i}` }
            : undefined;
        return clients[i % 2]!.callTool('probe', { tag: `t${i}` }, meta === undefined ? {} : { meta });
      }),
    );
    expect(results.map((result) => parseResultText(result))).toEqual(
      Array.from({ length: count }, (_, i) => ({ ok: true, tag: `t${i}` })),
    );
    const spans = toolSpans();
    expect(spans).toHaveLength(count);
    const rootTraceIds = new Set<string>();
    for (let i = 0; i < count; i += 1) {
      const tag = `t${i}`;
      const span = spans.find((s) => s.attributes[ATTR_GEN_AI_TOOL_CALL_ARGUMENTS] === `{"tag":"${tag}"}`)!;
      const { traceId, spanId } = span.spanContext();
      const seenHere = observed.get(tag)!;
      expect(seenHere.active).toBe(spanId);
      expect(seenHere.state).toEqual({ traceId, spanId });
      const child = exporter.getFinishedSpans().find((s) => s.name === `child ${tag}`)!;
      expect(child.parentSpanContext?.spanId).toBe(spanId);
      expect(child.spanContext().traceId).toBe(traceId);
      if (i % 2 === 0) {
        expect(traceId).toBe(traceIdOf(i));
        expect(span.parentSpanContext?.spanId).toBe(parentOf(i));
        expect(seenHere.tenant).toBe(`t${i}`);
      } else {
        expect(span.parentSpanContext).toBeUndefined();
        expect(seenHere.tenant).toBeUndefined();
        rootTraceIds.add(traceId);
      }
    }
    expect(rootTraceIds.size).toBe(count / 2);
  });

  it('a call with trace context leaves nothing behind for the next call on the same connection', async () => {
    const c = await serve();
    await c.callTool(
      'echo',
      {},
      { meta: { traceparent: `00-${'c'.repeat(32)}-${'d'.repeat(16)}-01`, baggage: 'tenant=a' } },
    );
    await c.callTool('echo', {});
    const [first, second] = toolSpans();
    expect(first!.spanContext().traceId).toBe('c'.repeat(32));
    expect(second!.parentSpanContext).toBeUndefined();
    expect(second!.spanContext().traceId).not.toBe('c'.repeat(32));
  });
});
