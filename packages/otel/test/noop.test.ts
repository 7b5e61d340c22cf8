// No SDK registered: the API's no-op path. Nothing is recorded and nothing about the call changes.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createSilentLogger, registerTools } from '@toolgate/core';
import { connectTestClient, expectFailure, type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { otel } from '../src/index.js';
import { closeAll, createTelemetry, getOrder, seen, serve } from './harness.js';

// An SDK that exists but is never registered must receive nothing.
const unregistered = createTelemetry();

afterEach(async () => {
  await closeAll();
  seen.state = undefined;
});
afterAll(() => unregistered.shutdown());

describe('otel: no provider registered', () => {
  it('answers exactly as a server without otel, records nothing and sets no trace state', async () => {
    let hookCalls = 0;
    const traced = await serve([
      otel({
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
    const c = await serve([otel()], { logger: recordingLogger(entries) });
    const envelope = expectFailure(await c.callTool('get_order', { id: 'boom' }));
    expect(envelope.error).toBe('internal');
    expect(entries.find((entry) => entry.level === 'error')?.fields.err).toBeInstanceOf(TypeError);
  });

  it('an unknown tool is still answered with the JSON-RPC error', async () => {
    const c = await serve([otel()]);
    await expect(c.callTool('nope', {})).rejects.toThrow(/Unknown tool: nope/);
  });
});
