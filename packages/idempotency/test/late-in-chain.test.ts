// A deadline further in (a circuit breaker's) answers `timeout` for a refund whose payment call goes on;
// a middleware outside idempotency is still finishing its own work on that answer (a durable audit
// waiting for its write) when the payment call comes back. The refund went through: a retry must be
// answered it, not run it again, and not be kept waiting until claimTtlMs.
import { defineTool, ok, type ToolDefinition, type ToolMiddleware, type ToolResult } from '@toolgate/core';
import { answerTimeoutAfter, type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { describe, expect, it, vi } from 'vitest';
import * as z from 'zod';
import { createIdempotency, IDEMPOTENCY_META } from '../src/index.js';
import { serve } from './fixtures.js';

const refund = { order_id: 'A-1001', amount: 25 };

const replayedOf = (result: { _meta?: Record<string, unknown> }) =>
  (result._meta?.[IDEMPOTENCY_META] as { replayed?: boolean } | undefined)?.replayed === true;

/** A refund whose payment call ignores the deadline and comes back when the test says. */
function gatedRefund() {
  const runs = { count: 0 };
  let comeBack!: () => void;
  const gate = new Promise<void>((resolve) => {
    comeBack = resolve;
  });
  const tool = defineTool({
    name: 'create_refund',
    description: 'Refund an amount on an order.',
    input: { order_id: z.string(), amount: z.number().positive() },
    handler: async ({ order_id, amount }): Promise<ToolResult> => {
      runs.count += 1;
      const run = runs.count;
      if (run === 1) await gate;
      return ok({ refund_id: `R-${run}`, order_id, amount });
    },
  }) as ToolDefinition;
  return { tool, runs, comeBack };
}

describe('idempotency: the handler comes back while the chain outside is still finishing the timeout', () => {
  it('its success is kept: the retry is answered the refund without running it again', async () => {
    const gated = gatedRefund();
    const logs: LogEntry[] = [];
    // Outside idempotency: waits a turn of the event loop for its write after the answer (a durable
    // audit's fsync); the payment call comes back during that wait.
    const durableWrite: ToolMiddleware = async (_ctx, next) => {
      const result = await next();
      gated.comeBack();
      await new Promise((resolve) => setImmediate(resolve));
      return result;
    };
    const client = await serve([gated.tool], {
      middleware: [
        durableWrite,
        createIdempotency({ pollIntervalMs: 10, tools: { create_refund: { claimTtlMs: 60_000 } } }),
        answerTimeoutAfter(20),
      ],
      logger: recordingLogger(logs),
    });
    const first = await client.callTool('create_refund', refund, { timeoutMs: 5000 });
    expect(first.isError).toBe(true);
    await vi.waitFor(() =>
      expect(
        logs.some((entry) =>
          entry.message?.startsWith('idempotency: a timed-out call finished after its answer'),
        ),
      ).toBe(true),
    );
    // Without the hand-over the claim stays held for claimTtlMs (60 s): this retry would wait that long.
    const retry = await client.callTool('create_refund', refund, { timeoutMs: 2000 });
    expect(replayedOf(retry)).toBe(true);
    expect(JSON.stringify(retry.structuredContent)).toContain('R-1');
    expect(gated.runs.count).toBe(1);
  });
});
