import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createMemoryStore, type KeyValueStore, type PolicyDecision } from '@toolgate/core';
import { expectFailure, recordingLogger, serveTools } from '@toolgate/core/testing';
import { createIdempotency } from '@toolgate/idempotency';
import { afterEach, describe, expect, it } from 'vitest';
import { CONFIRM_META, createConfirm } from '../src/index.js';
import { decisionsOf, refundTool, SECRET } from './fixtures.js';

// Confirm inside idempotency (the documented order) with idempotency's `storeFailures`: a refusal of
// confirm's is never kept under the call's key (which leaves `confirmation` out), so the correctly
// confirmed retry runs instead of hearing the stored refusal for windowMs.

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});
async function serve(...args: Parameters<typeof serveTools>) {
  const client = await serveTools(...args);
  closers.push(() => client.close());
  return client;
}

const confirmationOf = (result: CallToolResult): string =>
  (result._meta?.[CONFIRM_META] as { confirmation?: string } | undefined)?.confirmation ?? '';
const replayedOf = (result: CallToolResult): boolean =>
  (result._meta?.['toolgate/idempotency'] as { replayed?: boolean } | undefined)?.replayed === true;
const refund = { order_id: 'A-1', amount: 25 };

describe('confirm inside idempotency with storeFailures', () => {
  it('a mistyped confirmation is refused, not kept: the correct one then runs the refund once', async () => {
    const { tool, runs } = refundTool();
    const decisions: PolicyDecision[][] = [];
    const client = await serve([tool], {
      middleware: [
        decisionsOf(decisions),
        createIdempotency({ tools: { create_refund: { storeFailures: true } } }),
        createConfirm({ secret: SECRET, tools: { create_refund: {} } }),
      ],
    });
    const confirmation = confirmationOf(await client.callTool('create_refund', refund));
    const typo = confirmation.slice(0, -1) + (confirmation.endsWith('0') ? '1' : '0');
    const refused = await client.callTool('create_refund', { ...refund, confirmation: typo });
    expect(expectFailure(refused).error).toBe('permission_denied');
    const confirmed = await client.callTool('create_refund', { ...refund, confirmation });
    expect(confirmed.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
    expect(replayedOf(confirmed)).toBe(false);
    // The refund's own outcome is what its retries get, with or without the confirmation.
    const retried = await client.callTool('create_refund', refund);
    expect(retried.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
    expect(replayedOf(retried)).toBe(true);
    expect(runs.count).toBe(1);
    expect(decisions.map((call) => call.map((decision) => `${decision.by}:${decision.action}`))).toEqual([
      ['idempotency:claimed', 'confirm:required'],
      ['idempotency:claimed', 'confirm:refused'],
      ['idempotency:claimed', 'confirm:confirmed'],
      ['idempotency:replayed'],
    ]);
  });

  it('confirm’s unavailable (its store down) is not kept: once the store answers, the confirmed call runs', async () => {
    const { tool, runs } = refundTool();
    const memory = createMemoryStore();
    let down = false;
    const outage = async () => {
      throw new Error('connect ECONNREFUSED 127.0.0.1:6379');
    };
    // The confirmations' store, which goes down between the question and the confirmed call.
    const store: KeyValueStore = {
      get: (key, signal) => (down ? outage() : memory.get(key, signal)),
      set: (key, value, ttlMs) => (down ? outage() : memory.set(key, value, ttlMs)),
      setIfAbsent: (key, value, ttlMs, signal) =>
        down ? outage() : memory.setIfAbsent(key, value, ttlMs, signal),
      delete: (key) => (down ? outage() : memory.delete(key)),
    };
    const client = await serve([tool], {
      middleware: [
        createIdempotency({ tools: { create_refund: { storeFailures: true } } }),
        createConfirm({
          secret: SECRET,
          audience: 'orders-test',
          store,
          tools: { create_refund: {} },
        }),
      ],
      // The outage is logged once (warn): kept out of the test's output.
      logger: recordingLogger([]),
    });
    const confirmation = confirmationOf(await client.callTool('create_refund', refund));
    down = true;
    const unavailable = await client.callTool('create_refund', { ...refund, confirmation });
    expect(expectFailure(unavailable).error).toBe('unavailable');
    expect(runs.count).toBe(0);
    down = false;
    const confirmed = await client.callTool('create_refund', { ...refund, confirmation });
    expect(confirmed.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
    expect(replayedOf(confirmed)).toBe(false);
    expect(runs.count).toBe(1);
  });
});
