import { createCircuitBreaker } from '@toolgate/circuit-breaker';
import {
  defineTool,
  fail,
  ok,
  type ToolDefinition,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import { expectFailure, type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createIdempotency, IDEMPOTENCY_META } from '../src/index.js';
import { serve, sleep } from './fixtures.js';

const replayedOf = (result: { _meta?: Record<string, unknown> }): boolean =>
  (result._meta?.[IDEMPOTENCY_META] as { replayed?: boolean } | undefined)?.replayed === true;

/** A refund tool whose handler fails for the orders in `failing` and counts its runs. */
function carrierRefund(failing: readonly string[]) {
  const runs: string[] = [];
  const tool = defineTool({
    name: 'create_refund',
    description: 'Refund an amount on an order through the payment service.',
    input: { order_id: z.string(), amount: z.number().positive() },
    handler: async ({ order_id }): Promise<ToolResult> => {
      runs.push(order_id);
      if (failing.includes(order_id)) return fail('unavailable', 'The payment service did not answer.');
      return ok({ refund_id: `R-${runs.length}`, order_id });
    },
  }) as ToolDefinition;
  return { tool, runs };
}

/** A middleware that records each finished call's decisions as `by:action`. */
function decisionRecorder(): { decisions: string[][]; recorder: ToolMiddleware } {
  const decisions: string[][] = [];
  const recorder: ToolMiddleware = async (ctx, next) => {
    try {
      return await next();
    } finally {
      decisions.push(ctx.decisions.map((decision) => `${decision.by}:${decision.action}`));
    }
  };
  return { decisions, recorder };
}

describe('idempotency with storeFailures: only the tool’s own failures are kept', () => {
  it('an open circuit’s answer is not kept: once the circuit closes, the retry runs the handler', async () => {
    const { tool, runs } = carrierRefund(['A-1']);
    const logs: LogEntry[] = [];
    const breaker = createCircuitBreaker({
      volumeThreshold: 1,
      resetTimeout: 300,
      logger: recordingLogger(logs),
    });
    const client = await serve([tool], {
      middleware: [createIdempotency({ tools: { create_refund: { storeFailures: true } } }), breaker],
    });
    // The handler's own failure opens the circuit, and is kept (storeFailures): its retry replays it.
    const failed = expectFailure(await client.callTool('create_refund', { order_id: 'A-1', amount: 5 }));
    expect(failed.message).toBe('The payment service did not answer.');
    expect(breaker.state('create_refund')).toBe('open');
    const again = await client.callTool('create_refund', { order_id: 'A-1', amount: 5 });
    expect(replayedOf(again)).toBe(true);
    // Another refund meanwhile is refused by the open circuit: the breaker's answer, not the refund's.
    const refused = await client.callTool('create_refund', { order_id: 'B-2', amount: 7 });
    expect(expectFailure(refused).message).toBe(
      'create_refund is temporarily unavailable: a service it depends on is failing.',
    );
    expect(replayedOf(refused)).toBe(false);
    expect(runs).toEqual(['A-1']);
    await sleep(400);
    // The circuit lets a probe through: the same refund runs now, instead of hearing the old refusal.
    const retried = await client.callTool('create_refund', { order_id: 'B-2', amount: 7 });
    expect(retried.structuredContent).toEqual({ ok: true, refund_id: 'R-2', order_id: 'B-2' });
    expect(replayedOf(retried)).toBe(false);
    expect(breaker.state('create_refund')).toBe('closed');
    // ...and that success is what its retries get.
    expect(replayedOf(await client.callTool('create_refund', { order_id: 'B-2', amount: 7 }))).toBe(true);
    expect(runs).toEqual(['A-1', 'B-2']);
    expect(logs.map((entry) => entry.message)).toEqual([
      'circuit breaker opened',
      'circuit breaker half-open: the next call is a probe',
      'circuit breaker closed',
    ]);
  });

  it('a refusal by a policy of the app’s own inside it is not kept either; the decisions say why', async () => {
    const { tool, runs } = carrierRefund([]);
    let open = false;
    // A maintenance switch of the app's own, between idempotency and the handler.
    const maintenance: ToolMiddleware = (ctx, next) => {
      if (!open) {
        ctx.decisions.push({ by: 'maintenance', action: 'refuse', reason: 'payments paused' });
        return Promise.resolve(
          fail('unavailable', 'Refunds are paused for maintenance.', { retryable: true }),
        );
      }
      return next();
    };
    const { decisions, recorder } = decisionRecorder();
    const client = await serve([tool], {
      middleware: [
        recorder,
        createIdempotency({ tools: { create_refund: { storeFailures: true } } }),
        maintenance,
      ],
    });
    const refund = { order_id: 'C-3', amount: 9 };
    expect(expectFailure(await client.callTool('create_refund', refund)).error).toBe('unavailable');
    open = true;
    const retried = await client.callTool('create_refund', refund);
    expect(retried.structuredContent).toEqual({ ok: true, refund_id: 'R-1', order_id: 'C-3' });
    expect(runs).toEqual(['C-3']);
    expect(decisions).toEqual([['idempotency:claimed', 'maintenance:refuse'], ['idempotency:claimed']]);
  });

  it('a timeout is never kept: its claim is held as without storeFailures, and the retry after it runs', async () => {
    // Session 37's red team: with storeFailures a timed-out (or cancelled) call's answer was kept and
    // replayed to every retry for windowMs, though it said retryable and the handler may not have
    // finished its side effect.
    const runs: string[] = [];
    const tool = defineTool({
      name: 'create_refund',
      description: 'Refund an amount on an order through the payment service.',
      input: { order_id: z.string(), amount: z.number().positive() },
      handler: async ({ order_id }): Promise<ToolResult> => {
        runs.push(order_id);
        if (runs.length === 1) return fail('timeout', 'The payment service did not answer in time.');
        return ok({ refund_id: `R-${runs.length}`, order_id });
      },
    }) as ToolDefinition;
    const { decisions, recorder } = decisionRecorder();
    const client = await serve([tool], {
      middleware: [
        recorder,
        createIdempotency({ claimTtlMs: 200, tools: { create_refund: { storeFailures: true } } }),
      ],
    });
    const refund = { order_id: 'D-4', amount: 3 };
    expect(expectFailure(await client.callTool('create_refund', refund)).error).toBe('timeout');
    expect(decisions[0]).toEqual(['idempotency:claimed', 'idempotency:held']);
    await sleep(300);
    const retried = await client.callTool('create_refund', refund);
    expect(replayedOf(retried)).toBe(false);
    expect(retried.structuredContent).toEqual({ ok: true, refund_id: 'R-2', order_id: 'D-4' });
    expect(runs).toEqual(['D-4', 'D-4']);
  });
});
