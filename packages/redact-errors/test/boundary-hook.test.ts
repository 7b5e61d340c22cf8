import { connect, createServer as createTcpServer } from 'node:net';
import { defineTool, fail, ok, type ToolMiddleware } from '@toolgate/core';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRedactErrors } from '../src/index.js';
import { closeAll, INCIDENT_ID, seenEnvelope, serve } from './helpers.js';

const LEAKY =
  'connect ECONNREFUSED 10.0.0.5:5432 at /srv/app/db.js:42:7 while running SELECT id FROM orders WHERE id = $1';
const SCRUBBED = 'connect ECONNREFUSED [host] at [path] while running [sql]';

const orders = defineTool({
  name: 'orders',
  description: 'Succeeds; the failures here come from a middleware outside redact-errors.',
  input: {},
  handler: () => ok({ items: [] }),
});
const debugEcho = defineTool({
  name: 'debug_echo',
  description: 'Opted out of redact-errors.',
  input: {},
  handler: () => ok({}),
});

/** Stands for audit or otel short-circuiting outside redact-errors (e.g. its own store is down). */
const outsideShortCircuit =
  (message: string): ToolMiddleware =>
  async () =>
    fail('unavailable', message, { hint: 'Try again later; the store at 10.0.0.5:6379 is down.' });

let refused: Error;
beforeAll(async () => {
  // A real ECONNREFUSED from a loopback port that was just closed.
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  refused = await new Promise<Error>((resolve) => connect(port, '127.0.0.1').on('error', resolve));
  expect((refused as NodeJS.ErrnoException).code).toBe('ECONNREFUSED');
});

afterEach(closeAll);

describe('core’s boundary hook (scrubText) through a real client', () => {
  it('a failure made by a middleware OUTSIDE redact-errors is scrubbed with the same patterns', async () => {
    const entries: LogEntry[] = [];
    const c = await serve(
      [orders],
      [outsideShortCircuit(LEAKY), createRedactErrors()],
      recordingLogger(entries),
    );
    const envelope = seenEnvelope(await c.callTool('orders', {}));
    expect(envelope).toEqual({
      ok: false,
      error: 'unavailable',
      message: SCRUBBED,
      hint: 'Try again later; the store at [host] is down.',
      retryable: true,
    });
    // redact-errors never ran for this call, so the hook logs what it removed itself (debug).
    const debug = entries.filter((entry) => entry.level === 'debug');
    expect(debug.map((entry) => entry.fields.original)).toContain(LEAKY);
    expect(debug.find((entry) => entry.fields.original === LEAKY)).toMatchObject({
      message: 'redact-errors: scrubbed a failure string at the boundary',
      fields: { tool: 'orders', origin: 'boundary', removed: { sql: 1 } },
    });
  });

  it('control: without redact-errors the same failure leaks host, path and SQL (core’s secret patterns alone)', async () => {
    const c = await serve([orders], [outsideShortCircuit(LEAKY)], recordingLogger([]));
    expect(seenEnvelope(await c.callTool('orders', {})).message).toBe(LEAKY);
  });

  it('a tool opted out (tools: { debug_echo: false }) is left alone by the hook; other tools are not', async () => {
    const c = await serve(
      [orders, debugEcho],
      [outsideShortCircuit(LEAKY), createRedactErrors({ tools: { debug_echo: false } })],
      recordingLogger([]),
    );
    const optedOut = seenEnvelope(await c.callTool('debug_echo', {}));
    expect(optedOut.message).toBe(LEAKY);
    expect(optedOut.hint).toBe('Try again later; the store at 10.0.0.5:6379 is down.');
    expect(seenEnvelope(await c.callTool('orders', {})).message).toBe(SCRUBBED);
  });

  it('a tool’s own patterns apply at the boundary too, for that tool only', async () => {
    const order = { name: 'order', pattern: /\bORD-\d+/g, replace: '[order]' };
    const c = await serve(
      [orders, debugEcho],
      [
        outsideShortCircuit('Carrier ORD-123 refused.'),
        createRedactErrors({ tools: { orders: { patterns: [order] } } }),
      ],
      recordingLogger([]),
    );
    expect(seenEnvelope(await c.callTool('orders', {})).message).toBe('Carrier [order] refused.');
    expect(seenEnvelope(await c.callTool('debug_echo', {})).message).toBe('Carrier ORD-123 refused.');
  });

  it('a handler’s fail() scrubbed by the hook right after the handler: the model, the debug log and the decision agree', async () => {
    const entries: LogEntry[] = [];
    const decisions: unknown[] = [];
    const audit: ToolMiddleware = async (ctx, next) => {
      const result = await next();
      decisions.push(...ctx.decisions);
      return result;
    };
    const failing = defineTool({
      name: 'failing',
      description: 'Returns a failure with internals in its message.',
      input: {},
      handler: () => fail('unavailable', LEAKY),
    });
    const c = await serve([failing], [audit, createRedactErrors()], recordingLogger(entries));
    expect(seenEnvelope(await c.callTool('failing', {})).message).toBe(SCRUBBED);
    const debug = entries.filter((entry) => entry.level === 'debug');
    expect(debug).toHaveLength(1);
    expect(debug[0]).toMatchObject({
      message: 'redact-errors: scrubbed an error result',
      fields: {
        origin: 'returned',
        removed: { sql: 1 },
        original: { error: 'unavailable', message: LEAKY },
      },
    });
    expect(decisions).toEqual([
      { by: 'redact-errors', action: 'scrub', detail: { removed: debug[0]!.fields.removed } },
    ]);
  });
});

describe('pass-through (core’s isPassThrough)', () => {
  it('a bind that throws a real ECONNREFUSED is still mapped (a throw like any other), not passed on', async () => {
    const bound = defineTool({
      name: 'bound',
      description: 'Its bind fails because a dependency is down.',
      input: { id: z.string() },
      bind: () => {
        throw refused;
      },
      handler: () => ok({}),
    });
    const c = await serve([bound], [createRedactErrors()], recordingLogger([]));
    const envelope = seenEnvelope(await c.callTool('bound', { id: '1' }));
    expect(envelope).toMatchObject({
      error: 'unavailable',
      message: 'A service this tool depends on is unavailable.',
      incidentId: expect.stringMatching(INCIDENT_ID),
    });
  });
});
