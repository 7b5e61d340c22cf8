import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createSilentLogger, defineTool, ok, registerTools, type ToolMiddleware } from '@toolgate/core';
import { connectTestClient } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createOtel } from '../src/index.js';
import { createTelemetry, type Telemetry } from './harness.js';

/**
 * Microtask hops from the handler's return until the client has the answer (the fewest of 5 calls):
 * each hop a policy adds delays every answer, and over HTTP the SDK's Node adapter sends the answer in
 * one write only when it comes within a few hops (bench/PROFILE.md, session 26).
 */
async function answerHops(middleware: ToolMiddleware[]): Promise<number> {
  let hops = 0;
  let counting = false;
  const count = (): void => {
    if (!counting) return;
    hops += 1;
    queueMicrotask(count);
  };
  const echo = defineTool({
    name: 'echo',
    description: 'Echo.',
    input: { q: z.string() },
    handler: ({ q }) => {
      hops = 0;
      counting = true;
      queueMicrotask(count);
      return ok({ q });
    },
  });
  const server = new McpServer({ name: 'hops', version: '1.0.0' });
  registerTools(server, [echo], { middleware, logger: createSilentLogger() });
  const client = await connectTestClient(server);
  const counts: number[] = [];
  for (let i = 0; i < 5; i += 1) {
    await client.callTool('echo', { q: `v${i}` });
    counting = false;
    counts.push(hops);
  }
  await client.close();
  return Math.min(...counts);
}

let telemetry: Telemetry | undefined;
afterEach(async () => {
  await telemetry?.shutdown();
  telemetry = undefined;
});

describe('otel on the answer path', () => {
  it('ends a recorded span beside the chain: the answer comes in as few hops as with no policy', async () => {
    telemetry = createTelemetry();
    const otel = createOtel({ tracerProvider: telemetry.tracerProvider, logger: createSilentLogger() });
    expect(await answerHops([otel])).toBe(await answerHops([]));
    // Every call's span was ended, with its outcome, before its answer reached the client.
    const spans = telemetry.exporter.getFinishedSpans();
    expect(spans).toHaveLength(5);
    expect(spans.every((span) => span.name === 'tools/call echo' && span.ended)).toBe(true);
  });
});
