// A call answered `timeout` whose handler went on and finished: the trail must show what it did (a
// refund that went through after the model was told it timed out), as a second record of the call.
import { createSilentLogger, defineTool, ok, type ToolDefinition, type ToolResult } from '@toolgate/core';
import { serveTools, type TestClient } from '@toolgate/core/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import * as z from 'zod';
import { createAudit } from '../src/index.js';
import { memorySink } from './helpers.js';

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const item of open.splice(0).reverse()) await item.close();
});

/** A refund whose payment call ignores cancellation and settles when the test says how. */
function stubbornRefund(): {
  tool: ToolDefinition;
  started: Promise<void>;
  settle: (how: 'ok' | 'throw' | 'cancelled') => void;
} {
  let started: () => void = () => {};
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  let settle: (how: 'ok' | 'throw' | 'cancelled') => void = () => {};
  const tool = defineTool({
    name: 'create_refund',
    description: 'Refund an order (test).',
    input: { order_id: z.string() },
    handler: (_args, ctx) =>
      new Promise<ToolResult>((resolve, reject) => {
        started();
        settle = (how) =>
          how === 'ok'
            ? resolve(ok({ refund_id: 'R-1' }))
            : how === 'cancelled'
              ? // What `signal.throwIfAborted()` throws once the work looks at its signal: the reason.
                reject(ctx.signal.reason)
              : reject(new Error('connect ECONNRESET 10.0.3.7:443'));
      }),
  }) as ToolDefinition;
  return { tool, started: running, settle: (how) => settle(how) };
}

async function abandonedRefund(durable: boolean) {
  const memory = memorySink();
  const audit = createAudit({ sink: memory.sink, logger: createSilentLogger(), durable });
  const refund = stubbornRefund();
  const client: TestClient = await serveTools([refund.tool], {
    middleware: [audit],
    abandonAfterMs: 10,
    logger: createSilentLogger(),
  });
  open.push(audit, client);
  const controller = new AbortController();
  const call = client.callTool('create_refund', { order_id: 'A-1' }, { signal: controller.signal });
  await refund.started;
  controller.abort('ALERT: the user pressed stop');
  await expect(call).rejects.toThrow();
  await vi.waitFor(async () => {
    await audit.flush();
    expect(memory.records).toHaveLength(1);
  });
  expect(memory.records[0]!.outcome).toBe('timeout');
  return { memory, audit, refund };
}

describe('audit: the late outcome of a call answered timeout', () => {
  for (const durable of [false, true]) {
    it(`records a refund that went through after the timeout as a second record of the call (durable: ${durable})`, async () => {
      const { memory, audit, refund } = await abandonedRefund(durable);
      refund.settle('ok');
      await vi.waitFor(async () => {
        await audit.flush();
        expect(memory.records).toHaveLength(2);
      });
      const [first, late] = memory.records as [(typeof memory.records)[0], (typeof memory.records)[0]];
      expect(late.outcome).toBe('ok');
      expect(late.requestId).toBe(first.requestId);
      expect(late.tool).toBe('create_refund');
      expect(late.decisions.at(-1)).toMatchObject({
        by: 'audit',
        action: 'late-outcome',
        detail: { outcome: 'ok' },
      });
    });
  }

  it('records a late throw as internal under an incident id, never its text', async () => {
    const { memory, audit, refund } = await abandonedRefund(false);
    refund.settle('throw');
    await vi.waitFor(async () => {
      await audit.flush();
      expect(memory.records).toHaveLength(2);
    });
    const late = memory.records[1]!;
    expect(late.outcome).toBe('internal');
    expect(late.incidentId).toMatch(/^inc_/);
    expect(JSON.stringify(late)).not.toContain('10.0.3.7');
  });

  it('records a late throw of the cancel itself (the client’s reason) as timeout, no new incident, no reason text', async () => {
    const { memory, audit, refund } = await abandonedRefund(false);
    refund.settle('cancelled');
    await vi.waitFor(async () => {
      await audit.flush();
      expect(memory.records).toHaveLength(2);
    });
    const [first, late] = memory.records as [(typeof memory.records)[0], (typeof memory.records)[0]];
    expect(late.outcome).toBe('timeout');
    // The one incident is core's abandonment (the handler outlived its cancel), not the late throw.
    expect(late.incidentId).toBe(first.incidentId);
    expect(JSON.stringify(memory.records)).not.toContain('ALERT');
  });
});
