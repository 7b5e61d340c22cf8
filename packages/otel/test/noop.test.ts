// No SDK registered: the API's no-op path. Nothing is recorded and nothing about the call changes.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ProxyTracerProvider } from '@opentelemetry/api';
import { createSilentLogger, type IdentifyCaller, registerTools } from '@toolgate/core';
import { connectTestClient, expectFailure, type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createOtel } from '../src/index.js';
import { ATTR_TOOLGATE_CALLER_KIND } from '../src/semconv.js';
import { closeAll, createTelemetry, getOrder, seen, serve } from './harness.js';

// An SDK that exists but is never registered must receive nothing.
const unregistered = createTelemetry();

afterEach(async () => {
  await closeAll();
  seen.state = undefined;
});
afterAll(() => unregistered.shutdown());

/** Core's `local` identity, with every field read recorded: the span attributes are its only reader here. */
function countingIdentity(reads: string[]): IdentifyCaller {
  return () =>
    new Proxy(
      { id: 'local', kind: 'local' as const },
      {
        get(target, key, receiver) {
          if (typeof key === 'string') reads.push(key);
          return Reflect.get(target, key, receiver);
        },
      },
    );
}

describe('otel: no provider registered', () => {
  it('answers exactly as a server without otel, records nothing and sets no trace state', async () => {
    let hookCalls = 0;
    const traced = await serve([
      createOtel({
        onSpan: () => {
          hookCalls += 1;
        },
      }),
    ]);
    const plainServer = new McpServer({ name: 'plain', version: '1.0.0' });
    registerTools(plainServer, [getOrder], { logger: createSilentLogger() });
    const plain = await connectTestClient(plainServer);
    const meta = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' };
    for (const args of [{ id: 'A-1' }, { id: 'missing' }, { id: 'denied' }]) {
      expect(await traced.callTool('get_order', args, { meta })).toEqual(
        await plain.callTool('get_order', args),
      );
    }
    expect(seen.state).toEqual({});
    expect(hookCalls).toBe(0);
    expect(unregistered.exporter.getFinishedSpans()).toEqual([]);
    expect(await unregistered.durationPoints()).toEqual([]);
    await plain.close();
  });

  it('a thrown error still reaches core unchanged and the model sees internal', async () => {
    const entries: LogEntry[] = [];
    const c = await serve([createOtel()], { logger: recordingLogger(entries) });
    const envelope = expectFailure(await c.callTool('get_order', { id: 'boom' }));
    expect(envelope.error).toBe('internal');
    expect(entries.find((entry) => entry.level === 'error')?.fields.err).toBeInstanceOf(TypeError);
  });

  it('builds no span attributes: the caller, request id and headers are never read', async () => {
    const reads: string[] = [];
    const identify = countingIdentity(reads);
    const c = await serve([createOtel({ recordCallerId: true })], { identify });
    expect((await c.callTool('get_order', { id: 'A-1' })).isError).toBeUndefined();
    expect(reads).toEqual([]);
    expect(seen.state).toEqual({});
  });

  it('builds no attributes for an explicit provider that is only the API proxy with no SDK behind it', async () => {
    const reads: string[] = [];
    const identify = countingIdentity(reads);
    const c = await serve([createOtel({ tracerProvider: new ProxyTracerProvider() })], { identify });
    expect((await c.callTool('get_order', { id: 'A-1' })).isError).toBeUndefined();
    expect(reads).toEqual([]);
  });

  it('with metrics but no tracer: the duration is recorded, still without building span attributes', async () => {
    const reads: string[] = [];
    const metricsOnly = createTelemetry();
    const c = await serve(
      [createOtel({ tracerProvider: new ProxyTracerProvider(), meterProvider: metricsOnly.meterProvider })],
      { identify: countingIdentity(reads) },
    );
    expect((await c.callTool('get_order', { id: 'missing' })).isError).toBe(true);
    expect(reads).toEqual([]);
    const points = await metricsOnly.durationPoints();
    expect(points.map((point) => [point.attributes, point.value.count])).toEqual([
      [{ 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'get_order', 'error.type': 'tool_error' }, 1],
    ]);
    await metricsOnly.shutdown();
  });

  it('with an SDK the same call reads the caller kind once, for the span', async () => {
    const reads: string[] = [];
    const identify = countingIdentity(reads);
    const c = await serve([createOtel({ tracerProvider: unregistered.tracerProvider })], { identify });
    expect((await c.callTool('get_order', { id: 'A-1' })).isError).toBeUndefined();
    expect(reads).toEqual(['kind']);
    expect(unregistered.exporter.getFinishedSpans()[0]?.attributes[ATTR_TOOLGATE_CALLER_KIND]).toBe('local');
    unregistered.exporter.reset();
  });

  it('an unknown tool is still answered with the JSON-RPC error', async () => {
    const c = await serve([createOtel()]);
    await expect(c.callTool('nope', {})).rejects.toThrow(/Unknown tool: nope/);
  });
});
