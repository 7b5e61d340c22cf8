// Two servers, or staging and production, that share the secret and the store: each takes only the
// confirmations it issued and the page answers given for its own calls. (On Redis: redis.test.ts.)
import type { CallToolResult, ElicitRequest } from '@modelcontextprotocol/sdk/types.js';
import { createMemoryStore, type PolicyDecision } from '@toolgate/core';
import { expectFailure, serveTools } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { CONFIRM_META, createConfirm } from '../src/index.js';
import { authAs, decisionsOf, refundTool, SECRET, sleep, watchedStore } from './fixtures.js';

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
const MISMATCH =
  'This confirmation does not match this call (other arguments, another caller or another tool).';
const USED = 'This confirmation was already used.';
const refund = { order_id: 'A-1', amount: 25 };

describe('audience: servers that share the secret and the store', () => {
  it('a confirmation issued by staging is refused by production, in the arguments, in _meta or with elicitation; each takes its own, on any replica', async () => {
    const { tool, runs } = refundTool();
    const { store, written } = watchedStore();
    const server = (audience: string) =>
      createConfirm({ secret: SECRET, audience, store, tools: { create_refund: {} } });
    const production = server('orders-prod');
    const decisions: PolicyDecision[][] = [];
    const staging = await serve([tool], {
      middleware: [server('orders-staging')],
      authInfo: authAs('alice'),
    });
    const prod = await serve([tool], {
      middleware: [decisionsOf(decisions), production],
      authInfo: authAs('alice'),
    });
    // The person confirmed this refund on staging; the model carries the confirmation to production.
    const stagings = confirmationOf(await staging.callTool('create_refund', refund));
    const crossed = await prod.callTool('create_refund', { ...refund, confirmation: stagings });
    expect(expectFailure(crossed)).toMatchObject({ error: 'permission_denied', message: MISMATCH });
    const inMeta = await prod.callTool('create_refund', refund, {
      meta: { 'toolgate/confirmation': stagings },
    });
    expect(expectFailure(inMeta)).toMatchObject({ error: 'permission_denied', message: MISMATCH });
    expect(decisions).toEqual(
      Array.from({ length: 2 }, () => [
        { by: 'confirm', action: 'refused', reason: 'mismatch', detail: { digest: '' } },
      ]),
    );
    // A production client that can be asked by form is refused too, and not asked.
    const asked: ElicitRequest['params'][] = [];
    const prodForm = await serve([tool], {
      middleware: [production],
      authInfo: authAs('alice'),
      onElicit: (params) => {
        asked.push(params);
        return { action: 'accept' };
      },
    });
    const carried = await prodForm.callTool('create_refund', { ...refund, confirmation: stagings });
    expect(expectFailure(carried).message).toBe(MISMATCH);
    expect(asked).toEqual([]);
    expect(runs.count).toBe(0);

    // Refused there, not used up: it works once on staging, where it was confirmed.
    const done = await staging.callTool('create_refund', { ...refund, confirmation: stagings });
    expect(done.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
    // Production's own: refused by staging, taken once by any replica of production.
    const prods = confirmationOf(await prod.callTool('create_refund', refund));
    expect(
      expectFailure(await staging.callTool('create_refund', { ...refund, confirmation: prods })).message,
    ).toBe(MISMATCH);
    const replica = await serve([tool], { middleware: [server('orders-prod')], authInfo: authAs('alice') });
    const ran = await replica.callTool('create_refund', { ...refund, confirmation: prods });
    expect(ran.structuredContent).toEqual({ ok: true, refund_id: 'R-2' });
    expect(
      expectFailure(await prod.callTool('create_refund', { ...refund, confirmation: prods })).message,
    ).toBe(USED);
    expect(runs.count).toBe(2);
    // Every key starts with the audience of the server that wrote it.
    expect(written.map((key) => key.replace(/\{[\w-]{22}\}:[0-9a-f]{32}$/, '{tag}:nonce'))).toEqual([
      'confirm:orders-staging:issued:{tag}:nonce',
      'confirm:orders-prod:issued:{tag}:nonce',
    ]);
  });

  it("URL mode: staging's page neither finds nor answers a call waiting on production; production's page does", async () => {
    const { tool, runs } = refundTool();
    const store = createMemoryStore();
    const server = (audience: string) =>
      createConfirm({
        secret: SECRET,
        audience,
        store,
        tools: { create_refund: {} },
        url: { build: ({ id }) => `https://${audience}.test/confirm/${id}`, pollMs: 10 },
      });
    const [staging, production] = [server('orders-staging'), server('orders-prod')];
    const seen: unknown[] = [];
    const client = await serve([tool], {
      middleware: [production],
      authInfo: authAs('alice'),
      elicitUrl: true,
      onElicit: (params) => {
        const { elicitationId: id } = params as { elicitationId: string };
        void (async () => {
          seen.push(await staging.pending(id, 'alice'));
          seen.push(await staging.answer(id, { approve: true, principal: 'alice' }));
          seen.push(await staging.answer(id, { approve: false, principal: 'alice' }));
          seen.push((await production.pending(id, 'alice'))?.tool);
          seen.push(await production.answer(id, { approve: true, principal: 'alice' }));
        })();
        return { action: 'accept' };
      },
    });
    const result = await client.callTool('create_refund', refund);
    expect(result.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
    for (let waited = 0; seen.length < 5 && waited < 5000; waited += 10) await sleep(10);
    expect(seen).toEqual([undefined, 'unknown', 'unknown', 'create_refund', 'recorded']);
    expect(runs.count).toBe(1);
  });

  it("URL mode: a caller's open confirmations on one server do not hold its slots on another", async () => {
    const { tool, runs } = refundTool();
    const store = createMemoryStore();
    const server = (audience: string) =>
      createConfirm({
        secret: SECRET,
        audience,
        store,
        tools: { create_refund: {} },
        url: { build: ({ id }) => `https://${audience}.test/confirm/${id}`, pollMs: 10, maxOpenPerCaller: 1 },
      });
    const [staging, production] = [server('orders-staging'), server('orders-prod')];
    const ids: string[] = [];
    const connect = (confirm: typeof staging) =>
      serve([tool], {
        middleware: [confirm],
        authInfo: authAs('alice'),
        elicitUrl: true,
        onElicit: (params) => {
          ids.push((params as { elicitationId: string }).elicitationId);
          return { action: 'accept' };
        },
      });
    const [onStaging, onProd] = [await connect(staging), await connect(production)];
    // Alice's call waits on staging's page, holding her one slot there.
    const waiting = onStaging.callTool('create_refund', { order_id: 'S-1', amount: 1 });
    for (let waited = 0; ids.length < 1 && waited < 5000; waited += 10) await sleep(10);
    // On production she still has hers: asked on production's page, which approves it.
    const prodCall = onProd.callTool('create_refund', refund);
    for (let waited = 0; ids.length < 2 && waited < 5000; waited += 10) await sleep(10);
    expect(await production.answer(ids[1]!, { approve: true, principal: 'alice' })).toBe('recorded');
    expect((await prodCall).structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
    expect(await staging.answer(ids[0]!, { approve: false, principal: 'alice' })).toBe('recorded');
    expect(expectFailure(await waiting).error).toBe('permission_denied');
    expect(runs.args).toEqual([refund]);
  });
});

describe('createConfirm: audience', () => {
  it('is required with a store, and refused when empty or unreasonable', () => {
    const store = createMemoryStore();
    expect(() => createConfirm({ secret: SECRET, store })).toThrow(
      "createConfirm: audience is required with a store: name this server (e.g. 'orders-prod'), the same on all its replicas and another on every other server sharing the store or the secret",
    );
    const unreasonable = [
      '',
      ' ',
      'orders prod',
      ' orders',
      'orders:prod',
      '{orders}',
      '-orders',
      '.orders',
      'x'.repeat(65),
      'ördérs',
      'orders\n',
      42,
      null,
    ];
    for (const audience of unreasonable) {
      expect(() => createConfirm({ secret: SECRET, audience: audience as never, store })).toThrow(
        "createConfirm: audience must be 1 to 64 letters, digits, '.', '_' or '-', the first a letter or digit (e.g. 'orders-prod')",
      );
      expect(() => createConfirm({ secret: SECRET, audience: audience as never })).toThrow(TypeError);
    }
    for (const audience of ['orders-prod', 'orders.staging', 'eu_west_1', 'x'.repeat(64)]) {
      expect(typeof createConfirm({ secret: SECRET, audience, store })).toBe('function');
    }
    // Without a store, the middleware's own memory store: no other server reads it.
    expect(typeof createConfirm({ secret: SECRET })).toBe('function');
  });
});
