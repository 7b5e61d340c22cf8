// maxWaitMs: how long an identical call waits for a running one before it is answered `unavailable`
// (still-running) without running. A timed-out call's claim is held until claimTtlMs (its side effect may
// still be going on): without a bound, the model's retry of it waits that long before it hears anything.
import { createMemoryStore, defineTool, ok, type ToolDefinition, type ToolResult } from '@toolgate/core';
import { answerTimeoutAfter, recordingLogger } from '@toolgate/core/testing';
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createIdempotency, IDEMPOTENCY_META } from '../src/index.js';
import { serve } from './fixtures.js';

const refund = { order_id: 'A-1001', amount: 25 };

const replayedOf = (result: { _meta?: Record<string, unknown> }) =>
  (result._meta?.[IDEMPOTENCY_META] as { replayed?: boolean } | undefined)?.replayed === true;

function errorOf(result: { isError?: boolean; structuredContent?: unknown; content?: unknown }) {
  expect(result.isError).toBe(true);
  const text = (result.content as { type: string; text: string }[])[0]!.text;
  return JSON.parse(text) as { error: string; message: string; retryable?: boolean };
}

/** A refund whose first payment call hangs until the test lets it finish. */
function gatedRefund() {
  const runs = { count: 0 };
  let finish!: () => void;
  const gate = new Promise<void>((resolve) => {
    finish = resolve;
  });
  let started!: () => void;
  const firstStarted = new Promise<void>((resolve) => {
    started = resolve;
  });
  const tool = defineTool({
    name: 'create_refund',
    description: 'Refund an amount on an order.',
    input: { order_id: z.string(), amount: z.number().positive() },
    handler: async ({ order_id, amount }): Promise<ToolResult> => {
      runs.count += 1;
      const run = runs.count;
      if (run === 1) {
        started();
        await gate;
      }
      return ok({ refund_id: `R-${run}`, order_id, amount });
    },
  }) as ToolDefinition;
  return { tool, runs, finish, firstStarted };
}

describe('idempotency maxWaitMs', () => {
  it('a retry of a timed-out call whose claim is held is answered still-running at maxWaitMs, not at claimTtlMs', async () => {
    const gated = gatedRefund();
    const client = await serve([gated.tool], {
      middleware: [
        createIdempotency({
          pollIntervalMs: 10,
          tools: { create_refund: { claimTtlMs: 60_000, maxWaitMs: 200 } },
        }),
        answerTimeoutAfter(20),
      ],
      logger: recordingLogger([]),
    });
    expect(errorOf(await client.callTool('create_refund', refund, { timeoutMs: 5000 })).error).toBe(
      'timeout',
    );
    // Without maxWaitMs this retry waits for the held claim (60 s) and the client gives up at 5 s.
    const retry = errorOf(await client.callTool('create_refund', refund, { timeoutMs: 5000 }));
    expect(retry).toMatchObject({
      error: 'unavailable',
      message: 'An identical call is still running; this one did not run again.',
      retryable: true,
    });
    expect(gated.runs.count).toBe(1);
    // Once the payment call comes back, its result replaces the claim: the next retry is answered it.
    gated.finish();
    let again: Awaited<ReturnType<typeof client.callTool>>;
    do again = await client.callTool('create_refund', refund, { timeoutMs: 5000 });
    while (again.isError === true);
    expect(replayedOf(again)).toBe(true);
    expect(JSON.stringify(again.structuredContent)).toContain('R-1');
    expect(gated.runs.count).toBe(1);
  });

  it('an identical call joined in this process stops waiting at maxWaitMs; the first call goes on and is kept', async () => {
    const gated = gatedRefund();
    const client = await serve([gated.tool], {
      middleware: [
        createIdempotency({
          pollIntervalMs: 10,
          tools: { create_refund: { claimTtlMs: 60_000, maxWaitMs: 50 } },
        }),
      ],
      logger: recordingLogger([]),
    });
    const first = client.callTool('create_refund', refund, { timeoutMs: 5000 });
    await gated.firstStarted;
    const joined = errorOf(await client.callTool('create_refund', refund, { timeoutMs: 5000 }));
    expect(joined.error).toBe('unavailable');
    gated.finish();
    expect((await first).structuredContent).toMatchObject({ refund_id: 'R-1' });
    const retry = await client.callTool('create_refund', refund, { timeoutMs: 5000 });
    expect(replayedOf(retry)).toBe(true);
    expect(gated.runs.count).toBe(1);
  });

  it("another replica's running claim: the poll stops at maxWaitMs", async () => {
    const gated = gatedRefund();
    const store = createMemoryStore();
    const replica = () =>
      createIdempotency({
        store,
        pollIntervalMs: 10,
        tools: { create_refund: { claimTtlMs: 60_000, maxWaitMs: 100 } },
      });
    const one = await serve([gated.tool], { middleware: [replica()], logger: recordingLogger([]) });
    const two = await serve([gated.tool], { middleware: [replica()], logger: recordingLogger([]) });
    const first = one.callTool('create_refund', refund, { timeoutMs: 5000 });
    await gated.firstStarted;
    expect(errorOf(await two.callTool('create_refund', refund, { timeoutMs: 5000 })).error).toBe(
      'unavailable',
    );
    gated.finish();
    await first;
    expect(replayedOf(await two.callTool('create_refund', refund, { timeoutMs: 5000 }))).toBe(true);
    expect(gated.runs.count).toBe(1);
  });

  it('refuses a maxWaitMs that is not a whole number of milliseconds from 0', () => {
    for (const maxWaitMs of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => createIdempotency({ tools: { create_refund: { maxWaitMs } } })).toThrow(
        /maxWaitMs must be a whole number of milliseconds from 0, or undefined/,
      );
    }
    expect(() => createIdempotency({ maxWaitMs: 0, tools: { create_refund: {} } })).not.toThrow();
  });
});
