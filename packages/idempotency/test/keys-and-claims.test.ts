import {
  createMemoryStore,
  defineTool,
  fail,
  ok,
  type ToolDefinition,
  type ToolResult,
} from '@toolgate/core';
import { createTestContext, expectFailure, recordingLogger } from '@toolgate/core/testing';
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createIdempotency, IDEMPOTENCY_META } from '../src/index.js';
import { authAs, refundTool, serve, sleep } from './fixtures.js';

const refund = { order_id: 'A-1', amount: 25 };
const replayedOf = (result: { _meta?: Record<string, unknown> }) =>
  (result._meta?.[IDEMPOTENCY_META] as { replayed?: boolean } | undefined)?.replayed === true;

/** A refund tool whose first run never returns (a hung payment call); later runs succeed. */
function hangingOnceTool() {
  const runs = { count: 0 };
  const tool = defineTool({
    name: 'create_refund',
    description: 'Refund an amount on an order.',
    input: { order_id: z.string(), amount: z.number().positive() },
    handler: async (): Promise<ToolResult> => {
      runs.count += 1;
      if (runs.count === 1) await new Promise<never>(() => {});
      return ok({ refund_id: `R-${runs.count}` });
    },
  }) as ToolDefinition;
  return { tool, runs };
}

describe('idempotency: keys never cross callers, bindings or spellings', () => {
  it('the same caller and key under another binding (tenant) never gets the first result', async () => {
    const { tool: base, runs } = refundTool();
    const tool = {
      ...base,
      bind: (request: { authInfo?: { extra?: Record<string, unknown> } }) => ({
        tenant: request.authInfo?.extra?.tenant,
      }),
    } as ToolDefinition;
    const shared = [createIdempotency({ tools: { create_refund: {} } })];
    const asTenant = (tenant: string) => {
      const auth = authAs('alice');
      return { ...auth, extra: { ...auth.extra, tenant } };
    };
    const acme = await serve([tool], { middleware: shared, authInfo: asTenant('acme') });
    const globex = await serve([tool], { middleware: shared, authInfo: asTenant('globex') });
    const meta = { 'toolgate/idempotency-key': 'same-key' };
    const a = await acme.callTool('create_refund', refund, { meta });
    const b = await globex.callTool('create_refund', refund, { meta });
    const implicit = await globex.callTool('create_refund', { ...refund, amount: 7 });
    const implicitOther = await acme.callTool('create_refund', { ...refund, amount: 7 });
    expect(runs.count).toBe(4);
    expect(a.structuredContent).toMatchObject({ refund_id: 'R-1' });
    expect(b.structuredContent).toMatchObject({ refund_id: 'R-2' });
    expect(replayedOf(b)).toBe(false);
    expect(implicit.structuredContent).toMatchObject({ refund_id: 'R-3' });
    expect(implicitOther.structuredContent).toMatchObject({ refund_id: 'R-4' });
  });

  it('keys that differ only by separators, braces or unicode normalisation are different keys', async () => {
    const { tool, runs } = refundTool({ delayMs: 1 });
    const client = await serve([tool], { middleware: [createIdempotency({ tools: { create_refund: {} } })] });
    const keys = ['a:b', 'a', 'a:', '{a}:b', 'idem:{a}:b', 'caf\u00E9', 'cafe\u0301', '"a"'];
    const first: unknown[] = [];
    for (const key of keys) {
      const result = await client.callTool('create_refund', refund, {
        meta: { 'toolgate/idempotency-key': key },
      });
      first.push((result.structuredContent as { refund_id: string }).refund_id);
    }
    expect(first).toEqual(keys.map((_, i) => `R-${i + 1}`));
    for (const [i, key] of keys.entries()) {
      const again = await client.callTool('create_refund', refund, {
        meta: { 'toolgate/idempotency-key': key },
      });
      expect(again.structuredContent).toMatchObject({ refund_id: `R-${i + 1}` });
      expect(replayedOf(again)).toBe(true);
    }
    expect(runs.count).toBe(keys.length);
  });

  it('a key of 200 characters is taken; 201 is refused before anything runs', async () => {
    const { tool, runs } = refundTool({ delayMs: 1 });
    const client = await serve([tool], { middleware: [createIdempotency({ tools: { create_refund: {} } })] });
    const taken = await client.callTool('create_refund', refund, {
      meta: { 'toolgate/idempotency-key': 'k'.repeat(200) },
    });
    expect(taken.structuredContent).toMatchObject({ refund_id: 'R-1' });
    const refused = await client.callTool('create_refund', refund, {
      meta: { 'toolgate/idempotency-key': 'k'.repeat(201) },
    });
    expect(expectFailure(refused)).toEqual({
      ok: false,
      error: 'invalid_argument',
      message: 'The idempotency key must be a string of 1 to 200 characters.',
      hint: 'Send a short unique string (a UUID) as the idempotency key, or none.',
      retryable: false,
    });
    expect(runs.count).toBe(1);
  });

  it('the same key with other arguments while the first call runs is refused; the first is unaffected', async () => {
    const { tool, runs } = refundTool({ delayMs: 150 });
    const client = await serve([tool], { middleware: [createIdempotency({ tools: { create_refund: {} } })] });
    const meta = { 'toolgate/idempotency-key': 'req-1' };
    const [first, other] = await Promise.all([
      client.callTool('create_refund', refund, { meta }),
      sleep(20).then(() => client.callTool('create_refund', { ...refund, amount: 9999 }, { meta })),
    ]);
    expect(first.structuredContent).toEqual({ ok: true, refund_id: 'R-1', order_id: 'A-1', amount: 25 });
    expect(expectFailure(other).message).toBe('This idempotency key was used with other arguments.');
    expect(runs.count).toBe(1);
  });
});

describe('idempotency: time limits', () => {
  it('after windowMs a repeat runs again', async () => {
    const { tool, runs } = refundTool({ delayMs: 1 });
    const client = await serve([tool], {
      middleware: [createIdempotency({ tools: { create_refund: { windowMs: 80 } } })],
    });
    await client.callTool('create_refund', refund);
    expect(replayedOf(await client.callTool('create_refund', refund))).toBe(true);
    await sleep(150);
    const later = await client.callTool('create_refund', refund);
    expect(later.structuredContent).toMatchObject({ refund_id: 'R-2' });
    expect(runs.count).toBe(2);
  });

  it('the claim of a replica that died mid-call expires after claimTtlMs; then a retry elsewhere runs', async () => {
    const store = createMemoryStore();
    const { tool, runs } = refundTool({ delayMs: 1 });
    const crashed = createIdempotency({ store, tools: { create_refund: { claimTtlMs: 150 } } });
    // The dead replica claimed and never answers (its process is gone).
    const claimedAt = Date.now();
    void crashed(createTestContext({ tool, args: refund }), () => new Promise<never>(() => {}));
    await sleep(10);
    const survivor = await serve([tool], {
      middleware: [
        createIdempotency({ store, pollIntervalMs: 10, tools: { create_refund: { claimTtlMs: 150 } } }),
      ],
    });
    const retry = await survivor.callTool('create_refund', refund);
    expect(retry.structuredContent).toMatchObject({ refund_id: 'R-1' });
    expect(runs.count).toBe(1);
    // It ran only once the dead claim had expired, however long the setup above took.
    expect(Date.now() - claimedAt).toBeGreaterThanOrEqual(140);
  });

  it('a handler that never returns holds its key in its own process only until claimTtlMs', async () => {
    const { tool, runs } = hangingOnceTool();
    const client = await serve([tool], {
      middleware: [createIdempotency({ tools: { create_refund: { claimTtlMs: 150 } } })],
      logger: recordingLogger([]),
    });
    void client.callTool('create_refund', refund, { timeoutMs: 10_000 }).catch(() => {});
    await sleep(20);
    const joined = await client.callTool('create_refund', refund, { timeoutMs: 2000 });
    expect(expectFailure(joined)).toEqual({
      ok: false,
      error: 'unavailable',
      message: 'An identical call is still running; this one did not run again.',
      hint: 'Wait, then retry once with the same arguments to get its result.',
      retryable: true,
      retryAfterMs: 1000,
    });
    await sleep(150);
    const retry = await client.callTool('create_refund', refund, { timeoutMs: 2000 });
    expect(retry.structuredContent).toEqual({ ok: true, refund_id: 'R-2' });
    expect(runs.count).toBe(2);
  });
});

describe('idempotency: failures that are questions, not outcomes', () => {
  it('with storeFailures a request for confirmation is not kept: the confirmed retry runs', async () => {
    const runs = { count: 0 };
    const tool = defineTool({
      name: 'create_refund',
      description: 'Refund an amount on an order.',
      input: { order_id: z.string(), amount: z.number().positive(), confirmation: z.string().optional() },
      // Stands in for confirm inside idempotency: the first call asks, the confirmed one runs.
      handler: async ({ confirmation }): Promise<ToolResult> => {
        if (confirmation === undefined) return fail('confirmation_required', 'Confirmation required.');
        runs.count += 1;
        return ok({ refund_id: `R-${runs.count}` });
      },
    }) as ToolDefinition;
    const client = await serve([tool], {
      middleware: [createIdempotency({ tools: { create_refund: { storeFailures: true } } })],
    });
    expect(expectFailure(await client.callTool('create_refund', refund)).error).toBe('confirmation_required');
    const confirmed = await client.callTool('create_refund', { ...refund, confirmation: 'c1.x' });
    expect(confirmed.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
    expect(replayedOf(await client.callTool('create_refund', refund))).toBe(true);
    expect(runs.count).toBe(1);
  });
});
