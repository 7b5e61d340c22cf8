import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createMemoryStore, type KeyValueStore, type PolicyDecision } from '@toolgate/core';
import { expectFailure, recordingLogger, serveTools } from '@toolgate/core/testing';
import { createIdempotency } from '@toolgate/idempotency';
import { afterEach, describe, expect, it } from 'vitest';
import { CONFIRM_META, createConfirm } from '../src/index.js';
import { authAs, decisionsOf, refundTool, SECRET, sleep } from './fixtures.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});
async function serve(...args: Parameters<typeof serveTools>) {
  const client = await serveTools(...args);
  closers.push(() => client.close());
  return client;
}

interface Required {
  status: string;
  confirmation: string;
  expiresAt: string;
  prompt: string;
}
const requiredOf = (result: CallToolResult) => result._meta?.[CONFIRM_META] as Required;
const refund = { order_id: 'A-1', amount: 25 };
const PROMPT = 'Run "Refund an order"?\nTool: create_refund\nArguments:\n  order_id: "A-1"\n  amount: 25';

describe('confirm: two steps for a client without elicitation', () => {
  it('the first call answers confirmation_required with a single-use confirmation; the second runs', async () => {
    const { tool, runs } = refundTool();
    const decisions: PolicyDecision[][] = [];
    const client = await serve([tool], {
      middleware: [decisionsOf(decisions), createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
    });
    const first = await client.callTool('create_refund', refund);
    expect(runs.count).toBe(0);
    const required = requiredOf(first);
    expect(required).toEqual({
      status: 'confirmation_required',
      confirmation: expect.stringMatching(/^c1\.[0-9a-z]+\.[0-9a-f]{32}\.[0-9a-f]{32}$/),
      expiresAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      prompt: PROMPT,
    });
    expect(expectFailure(first)).toEqual({
      ok: false,
      error: 'confirmation_required',
      message: `Confirmation required. Show the user: ${PROMPT}`,
      hint: `Show the user exactly this request and ask whether to proceed. Only if they agree, call create_refund again with the same arguments and the argument confirmation="${required.confirmation}" (valid once, until ${required.expiresAt}). Never confirm on the user's behalf.`,
      retryable: true,
    });
    const second = await client.callTool('create_refund', { ...refund, confirmation: required.confirmation });
    expect(second.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
    expect(runs.count).toBe(1);
    const digest = required.confirmation.split('.')[3];
    expect(decisions).toEqual([
      [{ by: 'confirm', action: 'required', detail: { digest } }],
      [{ by: 'confirm', action: 'confirmed', detail: { digest } }],
    ]);
  });

  it('a confirmation is accepted once: the second use is refused', async () => {
    const { tool, runs } = refundTool();
    const client = await serve([tool], {
      middleware: [createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
    });
    const { confirmation } = requiredOf(await client.callTool('create_refund', refund));
    await client.callTool('create_refund', { ...refund, confirmation });
    const again = await client.callTool('create_refund', { ...refund, confirmation });
    expect(runs.count).toBe(1);
    expect(expectFailure(again)).toEqual({
      ok: false,
      error: 'permission_denied',
      message: 'This confirmation was already used.',
      hint: 'A confirmation is valid once, and the call that used it may not have finished (it may have been cancelled or failed): check whether the change was made before calling without it to ask the user again.',
      retryable: false,
    });
  });

  it('changed arguments, a tampered or invented confirmation are refused', async () => {
    const { tool, runs } = refundTool();
    const client = await serve([tool], {
      middleware: [createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
    });
    const { confirmation } = requiredOf(await client.callTool('create_refund', refund));
    const mismatch =
      'This confirmation does not match this call (other arguments, another caller or another tool).';
    const changed = await client.callTool('create_refund', { ...refund, amount: 2500, confirmation });
    expect(expectFailure(changed)).toEqual({
      ok: false,
      error: 'permission_denied',
      message: mismatch,
      hint: 'Do not change, reuse or invent a confirmation. Call again without it to ask the user to confirm this exact request.',
      retryable: false,
    });
    const tampered = confirmation.replace(
      /\.([0-9a-z]+)\./,
      (_, exp: string) => `.${(Number.parseInt(exp, 36) + 3_600_000).toString(36)}.`,
    );
    expect(
      expectFailure(await client.callTool('create_refund', { ...refund, confirmation: tampered })).message,
    ).toBe(mismatch);
    expect(
      expectFailure(await client.callTool('create_refund', { ...refund, confirmation: 'yes' })).message,
    ).toBe(mismatch);
    expect(runs.count).toBe(0);
    // The untouched confirmation still works: refusals did not consume it.
    expect((await client.callTool('create_refund', { ...refund, confirmation })).structuredContent).toEqual({
      ok: true,
      refund_id: 'R-1',
    });
  });

  it("another caller cannot use a caller's confirmation", async () => {
    const { tool, runs } = refundTool();
    const shared = [createConfirm({ secret: SECRET, tools: { create_refund: {} } })];
    const alice = await serve([tool], { middleware: shared, authInfo: authAs('alice') });
    const mallory = await serve([tool], { middleware: shared, authInfo: authAs('mallory') });
    const { confirmation } = requiredOf(await alice.callTool('create_refund', refund));
    expect(expectFailure(await mallory.callTool('create_refund', { ...refund, confirmation })).message).toBe(
      'This confirmation does not match this call (other arguments, another caller or another tool).',
    );
    expect(runs.count).toBe(0);
  });

  it('another tool cannot use a confirmation either', async () => {
    const refundA = refundTool('create_refund');
    const refundB = refundTool('create_credit');
    const client = await serve([refundA.tool, refundB.tool], {
      middleware: [createConfirm({ secret: SECRET, tools: { create_refund: {}, create_credit: {} } })],
    });
    const { confirmation } = requiredOf(await client.callTool('create_refund', refund));
    expect(expectFailure(await client.callTool('create_credit', { ...refund, confirmation })).error).toBe(
      'permission_denied',
    );
    expect(refundB.runs.count).toBe(0);
  });

  it('an expired confirmation is refused', async () => {
    const { tool, runs } = refundTool();
    const client = await serve([tool], {
      middleware: [createConfirm({ secret: SECRET, tools: { create_refund: { ttlMs: 40 } } })],
    });
    const { confirmation } = requiredOf(await client.callTool('create_refund', refund));
    await sleep(80);
    expect(expectFailure(await client.callTool('create_refund', { ...refund, confirmation })).message).toBe(
      'This confirmation has expired.',
    );
    expect(runs.count).toBe(0);
  });

  it('a tool without the confirmation argument takes it in the request _meta, and says so', async () => {
    const { tool, runs } = refundTool('create_refund', false);
    const client = await serve([tool], {
      middleware: [createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
    });
    const first = await client.callTool('create_refund', refund);
    const { confirmation } = requiredOf(first);
    expect(expectFailure(first).hint).toContain(
      `"toolgate/confirmation": "${confirmation}" in the request _meta`,
    );
    const second = await client.callTool('create_refund', refund, {
      meta: { 'toolgate/confirmation': confirmation },
    });
    expect(second.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
    expect(runs.count).toBe(1);
  });

  it('store down while issuing or consuming: unavailable, nothing given or run, no hang', async () => {
    const { tool, runs } = refundTool();
    // Issuing stored the confirmation; then the store stops answering.
    const memory = createMemoryStore();
    let down = false;
    const hang = <T>(op: () => Promise<T>): Promise<T> => (down ? new Promise<T>(() => {}) : op());
    const hanging: KeyValueStore = {
      setIfAbsent: (...args) => hang(() => memory.setIfAbsent(...args)),
      set: (...args) => hang(() => memory.set(...args)),
      get: (...args) => hang(() => memory.get(...args)),
      delete: (...args) => hang(() => memory.delete(...args)),
    };
    const client = await serve([tool], {
      middleware: [
        createConfirm({
          secret: SECRET,
          audience: 'orders',
          store: hanging,
          storeTimeoutMs: 50,
          tools: { create_refund: {} },
        }),
      ],
      logger: recordingLogger([]),
    });
    down = true;
    const unissued = await client.callTool('create_refund', refund, { timeoutMs: 5000 });
    expect(expectFailure(unissued)).toMatchObject({ error: 'unavailable', retryable: true });
    expect(requiredOf(unissued)).toBeUndefined();
    down = false;
    const { confirmation } = requiredOf(await client.callTool('create_refund', refund));
    down = true;
    const result = await client.callTool('create_refund', { ...refund, confirmation }, { timeoutMs: 5000 });
    expect(expectFailure(result)).toMatchObject({
      error: 'unavailable',
      message: 'The server cannot check this confirmation right now; nothing was done.',
      retryable: true,
    });
    expect(runs.count).toBe(0);
  });

  it('replicas sharing a store: a confirmation used on one is refused on the other', async () => {
    const { tool, runs } = refundTool();
    const store = createMemoryStore();
    const one = await serve([tool], {
      middleware: [
        createConfirm({ secret: SECRET, audience: 'orders', store, tools: { create_refund: {} } }),
      ],
    });
    const two = await serve([tool], {
      middleware: [
        createConfirm({ secret: SECRET, audience: 'orders', store, tools: { create_refund: {} } }),
      ],
    });
    const { confirmation } = requiredOf(await one.callTool('create_refund', refund));
    const results = await Promise.all([
      one.callTool('create_refund', { ...refund, confirmation }),
      two.callTool('create_refund', { ...refund, confirmation }),
    ]);
    expect(runs.count).toBe(1);
    expect(results.filter((result) => result.isError === true)).toHaveLength(1);
  });
});

describe('confirm inside idempotency (the documented order)', () => {
  it('a retried, already-confirmed call replays without asking again', async () => {
    const { tool, runs } = refundTool();
    const client = await serve([tool], {
      middleware: [
        createIdempotency({ tools: { create_refund: {} } }),
        createConfirm({ secret: SECRET, tools: { create_refund: {} } }),
      ],
    });
    const { confirmation } = requiredOf(await client.callTool('create_refund', refund));
    const confirmed = await client.callTool('create_refund', { ...refund, confirmation });
    const retried = await client.callTool('create_refund', { ...refund, confirmation });
    const retriedWithout = await client.callTool('create_refund', refund);
    expect(runs.count).toBe(1);
    expect(confirmed.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
    for (const replay of [retried, retriedWithout]) {
      expect(replay.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
      expect(replay._meta).toMatchObject({ 'toolgate/idempotency': { replayed: true } });
    }
  });
});
