import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ElicitRequest, ElicitResult } from '@modelcontextprotocol/sdk/types.js';
import {
  createMemoryStore,
  isStoreFullError,
  type KeyValueStore,
  type PolicyDecision,
  type ServerAccess,
  ToolError,
  type ToolMiddleware,
} from '@toolgate/core';
import { expectFailure, serveTools } from '@toolgate/core/testing';
import { createRedisStore } from '@toolgate/redis-store';
import { fillRedis, startOwnRedis } from '@toolgate/redis-store/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { type ConfirmMiddleware, createConfirm, DECLINED_HINT } from '../src/index.js';
import { authAs, decisionsOf, kindOf, refundTool, SECRET, sleep, watchedStore } from './fixtures.js';
import { reportRedisMissing, TEST_REDIS_URL } from './needs-redis.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

/**
 * The server's confirmation page on loopback: the person is whoever `x-person` names (a real page
 * signs them in). GET shows the pending call, POST records the answer.
 */
async function confirmationPage(confirm: () => ConfirmMiddleware): Promise<string> {
  const server: Server = createServer((request, response) => {
    const address = new URL(request.url ?? '/', 'http://page.test');
    const id = address.pathname.split('/').at(-1) ?? '';
    const person = (request.headers['x-person'] as string | undefined) || undefined;
    const reply = (status: number, body: unknown): void => {
      response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    const work =
      request.method === 'POST'
        ? confirm()
            .answer(id, { approve: address.searchParams.get('approve') === 'yes', principal: person })
            .then((outcome) => reply(200, { outcome }))
        : confirm()
            .pending(id, person)
            .then((call) => (call === undefined ? reply(404, {}) : reply(200, call)));
    work.catch((error: unknown) => reply(500, { error: String(error) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/confirm`;
}

/** What the person does on the page, over real HTTP. */
async function visit(
  url: string,
  person: string | undefined,
  approve?: 'yes' | 'no',
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(approve === undefined ? url : `${url}?approve=${approve}`, {
    method: approve === undefined ? 'GET' : 'POST',
    headers: person === undefined ? {} : { 'x-person': person },
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function setUp(
  person: (params: ElicitRequest['params'], page: string) => ElicitResult | Promise<ElicitResult>,
  options: {
    elicitTimeoutMs?: number;
    store?: KeyValueStore;
    subject?: string;
    elicitUrl?: boolean;
    pageOnly?: boolean;
    maxOpenPerCaller?: number;
  } = {},
) {
  const { tool, runs } = refundTool();
  let confirm: ConfirmMiddleware | undefined;
  const page = await confirmationPage(() => confirm!);
  confirm = createConfirm({
    secret: SECRET,
    tools: {
      create_refund: {
        elicitTimeoutMs: options.elicitTimeoutMs ?? 5000,
        pageOnly: options.pageOnly ?? false,
      },
    },
    url: {
      build: ({ id }) => `${page}/${id}`,
      pollMs: 20,
      ...(options.maxOpenPerCaller === undefined ? {} : { maxOpenPerCaller: options.maxOpenPerCaller }),
    },
    ...(options.store === undefined ? {} : { audience: 'orders', store: options.store }),
  });
  const asked: ElicitRequest['params'][] = [];
  const decisions: PolicyDecision[][] = [];
  const client = await serveTools([tool], {
    middleware: [decisionsOf(decisions), confirm],
    authInfo: authAs(options.subject ?? 'alice'),
    elicitUrl: options.elicitUrl ?? true,
    onElicit: (params) => {
      asked.push(params);
      return person(params, page);
    },
  });
  closers.push(() => client.close());
  /** Another caller of the same server, whose client answers as `answer` does. */
  const connect = async (
    subject: string,
    answer: (params: ElicitRequest['params']) => ElicitResult | Promise<ElicitResult>,
  ) => {
    const other = await serveTools([tool], {
      middleware: [decisionsOf(decisions), confirm],
      authInfo: authAs(subject),
      elicitUrl: true,
      onElicit: answer,
    });
    closers.push(() => other.close());
    return other;
  };
  return { client, runs, asked, decisions, confirm, page, connect };
}

const urlOf = (params: ElicitRequest['params']): string => (params as { url: string }).url;
const DIGEST = expect.stringMatching(/^[0-9a-f]{32}$/);

describe('confirm: URL mode (the person answers on the server’s page)', () => {
  it('the page and the store get the prompt the client was shown: secrets in the arguments are redacted there too', async () => {
    const seen: Record<string, unknown>[] = [];
    const { client, runs, asked } = await setUp((params) => {
      void (async () => {
        seen.push((await visit(urlOf(params), 'alice')).body);
        await visit(urlOf(params), 'alice', 'no');
      })();
      return { action: 'accept' };
    });
    const note =
      'db is postgres://app:Hunter2Secret@db.internal:5432/orders, token ghp_0123456789abcdefghijABCDEFGHIJ012345';
    const declined = await client.callTool('create_refund', { order_id: 'A-1', amount: 25, note });
    expect(expectFailure(declined)).toMatchObject({ error: 'permission_denied' });
    expect(runs.count).toBe(0);
    const shown = (asked[0] as { message: string }).message;
    expect(shown).not.toMatch(/Hunter2Secret|ghp_0123/);
    expect(seen).toEqual([expect.objectContaining({ prompt: shown })]);
  });

  it('sends the person to the page; their approval there runs the handler once', async () => {
    const seen: Record<string, unknown>[] = [];
    const { client, runs, asked, decisions } = await setUp((params) => {
      // The client opens the page; the person reads the call there and approves a little later.
      setTimeout(() => {
        void (async () => {
          seen.push((await visit(urlOf(params), 'alice')).body);
          seen.push((await visit(urlOf(params), 'alice', 'yes')).body);
        })();
      }, 50);
      return { action: 'accept' };
    });
    const result = await client.callTool('create_refund', { order_id: 'A-1', amount: 25 });
    expect(result.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
    expect(runs.count).toBe(1);
    const prompt = 'Run "Refund an order"?\nTool: create_refund\nArguments:\n  order_id: "A-1"\n  amount: 25';
    expect(asked).toEqual([
      {
        mode: 'url',
        message: prompt,
        url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/confirm\/[A-Za-z0-9_-]{22}$/),
        elicitationId: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/),
      },
    ]);
    const { elicitationId } = asked[0] as { elicitationId: string };
    expect(urlOf(asked[0]!).endsWith(`/${elicitationId}`)).toBe(true);
    // The call may go on before the page's reply reaches the person's browser.
    for (let waited = 0; seen.length < 2 && waited < 5000; waited += 10) await sleep(10);
    expect(seen).toEqual([
      { id: elicitationId, tool: 'create_refund', prompt, expiresAt: expect.any(Number) },
      { outcome: 'recorded' },
    ]);
    expect(client.notifications).toContainEqual({
      jsonrpc: '2.0',
      method: 'notifications/elicitation/complete',
      params: { elicitationId },
    });
    expect(decisions).toEqual([[{ by: 'confirm', action: 'confirmed', detail: { digest: DIGEST } }]]);
  });

  it('a decline on the page refuses; the handler never runs and the first answer stands', async () => {
    const urls: string[] = [];
    const { client, runs, decisions } = await setUp((params) => {
      urls.push(urlOf(params));
      setTimeout(() => void visit(urlOf(params), 'alice', 'no'), 30);
      return { action: 'accept' };
    });
    const envelope = expectFailure(await client.callTool('create_refund', { order_id: 'A-1', amount: 25 }));
    expect(envelope).toMatchObject({
      error: 'permission_denied',
      message: 'The user declined this request.',
      hint: DECLINED_HINT,
    });
    expect(runs.count).toBe(0);
    expect(decisions).toEqual([
      [{ by: 'confirm', action: 'declined', reason: 'page', detail: { digest: DIGEST } }],
    ]);
    expect((await visit(urls[0]!, 'alice', 'yes')).body).toEqual({ outcome: 'already answered' });
    expect(runs.count).toBe(0);
  });

  it('someone else can neither read nor answer the call; it times out and nothing runs', async () => {
    const tried: unknown[] = [];
    const urls: string[] = [];
    const { client, runs, decisions } = await setUp(
      (params) => {
        urls.push(urlOf(params));
        setTimeout(() => {
          void (async () => {
            tried.push(await visit(urlOf(params), 'mallory'));
            tried.push(await visit(urlOf(params), 'mallory', 'yes'));
            tried.push(await visit(urlOf(params), undefined, 'yes'));
          })();
        }, 20);
        return { action: 'accept' };
      },
      { elicitTimeoutMs: 1500 },
    );
    const envelope = expectFailure(await client.callTool('create_refund', { order_id: 'A-1', amount: 25 }));
    expect(envelope).toMatchObject({
      error: 'timeout',
      message: 'The user did not answer on the confirmation page in time.',
      hint: 'Nothing was done. Ask the user whether they still want this; if so, call again.',
    });
    for (let waited = 0; tried.length < 3 && waited < 5000; waited += 10) await sleep(10);
    expect(tried).toEqual([
      { status: 404, body: {} },
      { status: 200, body: { outcome: 'forbidden' } },
      { status: 200, body: { outcome: 'forbidden' } },
    ]);
    expect(runs.count).toBe(0);
    expect(decisions).toEqual([
      [{ by: 'confirm', action: 'refused', reason: 'timeout', detail: { digest: DIGEST } }],
    ]);
    // Too late for the caller too: the call gave up, its confirmation is gone.
    expect((await visit(urls[0]!, 'alice', 'yes')).body).toEqual({ outcome: 'unknown' });
    expect(runs.count).toBe(0);
  });

  it('a person who will not open the page in the client refuses; the page cannot approve it afterwards', async () => {
    const urls: string[] = [];
    const { client, runs, decisions } = await setUp((params) => {
      urls.push(urlOf(params));
      return { action: 'decline' };
    });
    expect(
      expectFailure(await client.callTool('create_refund', { order_id: 'A-1', amount: 25 })),
    ).toMatchObject({ error: 'permission_denied', message: 'The user declined this request.' });
    expect(decisions).toEqual([
      [{ by: 'confirm', action: 'declined', reason: 'decline', detail: { digest: DIGEST } }],
    ]);
    expect((await visit(urls[0]!, 'alice', 'yes')).body).toEqual({ outcome: 'closed' });
    expect(runs.count).toBe(0);
  });

  it('a call cancelled while it waits never runs, even when the page approves afterwards', async () => {
    const urls: string[] = [];
    const { client, runs, decisions } = await setUp((params) => {
      urls.push(urlOf(params));
      return { action: 'accept' };
    });
    const controller = new AbortController();
    const call = client.callTool(
      'create_refund',
      { order_id: 'A-1', amount: 25 },
      { signal: controller.signal },
    );
    await sleep(100);
    controller.abort();
    await expect(call).rejects.toThrow();
    // The server's side of the call has ended once the outermost middleware saw it settle.
    for (let waited = 0; decisions.length === 0 && waited < 5000; waited += 10) await sleep(10);
    expect(decisions).toHaveLength(1);
    // The call stopped waiting: the page says so rather than recording an approval nothing acts on.
    expect((await visit(urls[0]!, 'alice', 'yes')).body).toEqual({ outcome: 'closed' });
    await sleep(100);
    expect(runs.count).toBe(0);
  });

  it('ids the server never issued are unknown to the page', async () => {
    const { confirm, page } = await setUp(() => ({ action: 'accept' }));
    expect(await visit(`${page}/AAAAAAAAAAAAAAAAAAAAAA`, 'alice')).toEqual({ status: 404, body: {} });
    expect(await confirm.answer('AAAAAAAAAAAAAAAAAAAAAA', { approve: true, principal: 'alice' })).toBe(
      'unknown',
    );
    expect(await confirm.answer('../../etc/passwd', { approve: true, principal: 'alice' })).toBe('unknown');
    expect(await confirm.pending('x'.repeat(5000), 'alice')).toBeUndefined();
  });

  it('a client with form elicitation only is asked by form, as without URL mode', async () => {
    const { client, runs, asked } = await setUp(() => ({ action: 'accept', content: {} }), {
      elicitUrl: false,
    });
    expect(
      (await client.callTool('create_refund', { order_id: 'A-1', amount: 25 })).structuredContent,
    ).toEqual({
      ok: true,
      refund_id: 'R-1',
    });
    expect(asked.map((params) => params.mode)).toEqual(['form']);
    expect(runs.count).toBe(1);
  });

  it('fails closed when the store cannot keep the pending call: unavailable, nothing asked, nothing run', async () => {
    const memory = createMemoryStore();
    const broken: KeyValueStore = {
      ...memory,
      set: async () => {
        throw new Error('connect ECONNREFUSED 10.0.0.7:6379');
      },
    };
    const { client, runs, asked, decisions } = await setUp(() => ({ action: 'accept' }), { store: broken });
    const envelope = expectFailure(await client.callTool('create_refund', { order_id: 'A-1', amount: 25 }));
    expect(envelope).toMatchObject({ error: 'unavailable', retryable: true });
    expect(JSON.stringify(envelope)).not.toContain('10.0.0.7');
    expect(asked).toEqual([]);
    expect(runs.count).toBe(0);
    expect(decisions).toEqual([
      [{ by: 'confirm', action: 'refused', reason: 'store unavailable', detail: { digest: DIGEST } }],
    ]);
  });

  it('fails closed when the store cannot tell the page’s answer: unavailable, nothing run', async () => {
    const memory = createMemoryStore();
    let failGets = false;
    const flaky: KeyValueStore = {
      ...memory,
      get: async (key, options) => {
        if (failGets) throw new Error('read ETIMEDOUT 10.0.0.7:6379');
        return memory.get(key, options);
      },
    };
    const { client, runs, decisions } = await setUp(
      () => {
        failGets = true;
        return { action: 'accept' };
      },
      { store: flaky },
    );
    const envelope = expectFailure(await client.callTool('create_refund', { order_id: 'A-1', amount: 25 }));
    expect(envelope).toMatchObject({ error: 'unavailable', retryable: true });
    expect(JSON.stringify(envelope)).not.toContain('ETIMEDOUT');
    expect(runs.count).toBe(0);
    expect(decisions).toEqual([
      [{ by: 'confirm', action: 'refused', reason: 'store unavailable', detail: { digest: DIGEST } }],
    ]);
  });

  it('url.person decides who may answer: equal subjects of two issuers are two people', async () => {
    const { tool, runs } = refundTool();
    const answers: unknown[] = [];
    const confirm: ConfirmMiddleware = createConfirm({
      secret: SECRET,
      tools: { create_refund: {} },
      url: {
        build: ({ id }) => `https://orders.test/confirm/${id}`,
        pollMs: 20,
        person: (ctx) =>
          `${String(ctx.request.authInfo?.extra?.iss)} ${String(ctx.request.authInfo?.extra?.sub)}`,
      },
    });
    const client = await serveTools([tool], {
      middleware: [confirm],
      authInfo: authAs('alice'),
      elicitUrl: true,
      onElicit: (params) => {
        const { elicitationId: id } = params as { elicitationId: string };
        void (async () => {
          await sleep(30);
          answers.push(await confirm.pending(id, 'alice'));
          answers.push(
            await confirm.answer(id, { approve: true, principal: 'https://other-idp.test alice' }),
          );
          answers.push(await confirm.answer(id, { approve: true, principal: 'https://idp.test alice' }));
        })();
        return { action: 'accept' };
      },
    });
    closers.push(() => client.close());
    expect(
      (await client.callTool('create_refund', { order_id: 'A-1', amount: 25 })).structuredContent,
    ).toEqual({
      ok: true,
      refund_id: 'R-1',
    });
    for (let waited = 0; answers.length < 3 && waited < 5000; waited += 10) await sleep(10);
    expect(answers).toEqual([undefined, 'forbidden', 'recorded']);
    expect(runs.count).toBe(1);
    expect(() =>
      createConfirm({ secret: SECRET, url: { build: () => 'https://x.test/', person: 'alice' as never } }),
    ).toThrow(/url\.person must be a function/);
  });

  describe('a token that does not say who holds it (no subject: the client id names an app all its users share)', () => {
    const app = 'https://app.example/client.json';
    const serveApp = async (
      token: string,
      confirm: ConfirmMiddleware,
      tool: ReturnType<typeof refundTool>['tool'],
      onElicit: (params: ElicitRequest['params']) => ElicitResult | Promise<ElicitResult>,
    ) => {
      const client = await serveTools([tool], {
        middleware: [confirm],
        authInfo: { token, clientId: app, scopes: [] },
        elicitUrl: true,
        onElicit,
      });
      closers.push(() => client.close());
      return client;
    };

    it('is never sent to the page by the default person, where another user of the app would pass as the caller: asked by form', async () => {
      const { tool, runs } = refundTool();
      const confirm = createConfirm({
        secret: SECRET,
        tools: { create_refund: { elicitTimeoutMs: 2000 } },
        url: { build: ({ id }) => `https://page.example/c/${id}`, pollMs: 20 },
      });
      const asked: ElicitRequest['params'][] = [];
      const alice = await serveApp('tok-alice', confirm, tool, (params) => {
        asked.push(params);
        return { action: 'accept', content: {} };
      });
      expect(
        (await alice.callTool('create_refund', { order_id: 'A-1', amount: 25 })).structuredContent,
      ).toEqual({
        ok: true,
        refund_id: 'R-1',
      });
      expect(asked.map((params) => params.mode ?? 'form')).toEqual(['form']);
      expect(runs.count).toBe(1);
    });

    it('a pageOnly tool is refused for it, nothing asked or run', async () => {
      const { tool, runs } = refundTool();
      const decisions: PolicyDecision[][] = [];
      const confirm = createConfirm({
        secret: SECRET,
        tools: { create_refund: { pageOnly: true } },
        url: { build: ({ id }) => `https://page.example/c/${id}`, pollMs: 20 },
      });
      const asked: unknown[] = [];
      const client = await serveTools([tool], {
        middleware: [decisionsOf(decisions), confirm],
        authInfo: { token: 'tok-alice', clientId: app, scopes: [] },
        elicitUrl: true,
        onElicit: (params) => {
          asked.push(params);
          return { action: 'accept' };
        },
      });
      closers.push(() => client.close());
      expect(expectFailure(await client.callTool('create_refund', { order_id: 'A-1', amount: 25 }))).toEqual({
        ok: false,
        error: 'permission_denied',
        message:
          'This action needs the user to confirm on a confirmation page, and this sign-in does not say who the user is.',
        hint: 'Nothing was done. Tell the user this needs them signed in with an account of their own; do not try another way.',
        retryable: false,
      });
      expect(decisions).toEqual([
        [{ by: 'confirm', action: 'refused', reason: 'no person', detail: { digest: '' } }],
      ]);
      expect(asked).toEqual([]);
      expect(runs.count).toBe(0);
    });

    it('with url.person the server says who it is, and the page is used: another user of the app is forbidden', async () => {
      const { tool, runs } = refundTool();
      const confirm = createConfirm({
        secret: SECRET,
        tools: { create_refund: { elicitTimeoutMs: 2000 } },
        // The server knows whose token it is (its own session table, say).
        url: {
          build: ({ id }) => `https://page.example/c/${id}`,
          pollMs: 20,
          person: (ctx) => (ctx.request.authInfo?.token === 'tok-alice' ? 'alice' : undefined),
        },
      });
      const outcomes: unknown[] = [];
      const alice = await serveApp('tok-alice', confirm, tool, (params) => {
        const id = (params as { elicitationId: string }).elicitationId;
        void (async () => {
          await sleep(30);
          outcomes.push(await confirm.answer(id, { approve: true, principal: app }));
          outcomes.push(await confirm.answer(id, { approve: true, principal: 'alice' }));
        })();
        return { action: 'accept' };
      });
      expect(
        (await alice.callTool('create_refund', { order_id: 'A-1', amount: 25 })).structuredContent,
      ).toEqual({
        ok: true,
        refund_id: 'R-1',
      });
      expect(outcomes).toEqual(['forbidden', 'recorded']);
      expect(runs.count).toBe(1);
    });
  });

  describe('url.maxOpenPerCaller: how many confirmations one caller may have waiting', () => {
    const tooMany = {
      ok: false,
      error: 'rate_limited',
      message: 'Too many of your calls are waiting for the user on the confirmation page; nothing was done.',
      hint: 'Wait until the user has answered or dismissed the confirmation pages already open, then retry this call.',
      retryable: true,
    };

    it('one more is refused rate_limited, nothing stored, asked or run; another caller is not; an answered one frees its slot', async () => {
      const { store, held } = watchedStore();
      const { client, runs, asked, decisions, connect, page } = await setUp(() => ({ action: 'accept' }), {
        store,
        maxOpenPerCaller: 2,
      });
      const controller = new AbortController();
      const first = client.callTool('create_refund', { order_id: 'A-1', amount: 1 });
      const second = client.callTool(
        'create_refund',
        { order_id: 'A-2', amount: 2 },
        { signal: controller.signal },
      );
      for (let waited = 0; asked.length < 2 && waited < 5000; waited += 10) await sleep(10);
      const before = await held();
      expect(before).toEqual(['mark', 'mark', 'pending', 'pending', 'slot', 'slot']);

      expect(expectFailure(await client.callTool('create_refund', { order_id: 'A-3', amount: 3 }))).toEqual(
        tooMany,
      );
      expect(decisions).toEqual([
        [{ by: 'confirm', action: 'refused', reason: 'too many open', detail: { digest: DIGEST } }],
      ]);
      expect(asked).toHaveLength(2);
      expect(await held()).toEqual(before);

      const bob = await connect('bob', (params) => {
        setTimeout(() => void visit(urlOf(params), 'bob', 'yes'), 20);
        return { action: 'accept' };
      });
      expect((await bob.callTool('create_refund', { order_id: 'B-1', amount: 1 })).structuredContent).toEqual(
        {
          ok: true,
          refund_id: 'R-1',
        },
      );

      // Alice approves her first on the page: it runs, and her third call opens in its place.
      const firstId = (asked[0] as { elicitationId: string }).elicitationId;
      expect((await visit(`${page}/${firstId}`, 'alice', 'yes')).body).toEqual({ outcome: 'recorded' });
      expect((await first).structuredContent).toEqual({ ok: true, refund_id: 'R-2' });
      const third = client.callTool('create_refund', { order_id: 'A-3', amount: 3 });
      for (let waited = 0; asked.length < 3 && waited < 5000; waited += 10) await sleep(10);
      expect((await visit(urlOf(asked[2]!), 'alice', 'yes')).body).toEqual({ outcome: 'recorded' });
      expect((await third).structuredContent).toEqual({ ok: true, refund_id: 'R-3' });
      expect(runs.args).toEqual([
        { order_id: 'B-1', amount: 1 },
        { order_id: 'A-1', amount: 1 },
        { order_id: 'A-3', amount: 3 },
      ]);
      controller.abort();
      await expect(second).rejects.toThrow();
    });

    it('every way a confirmation ends frees its slot: a caller confirming one call after another is never refused', async () => {
      const { store, held } = watchedStore();
      // What the person does, call by call: approve or decline on the page, dismiss in the client, let
      // it time out, have the call cancelled, approve again.
      const steps = ['page yes', 'page no', 'decline', 'cancel', 'no answer', 'cancelled', 'page yes'];
      let step = 0;
      const { client, runs, decisions } = await setUp(
        (params) => {
          const now = steps[step++];
          if (now === 'decline' || now === 'cancel') return { action: now };
          if (now === 'page yes' || now === 'page no') {
            setTimeout(() => void visit(urlOf(params), 'alice', now === 'page yes' ? 'yes' : 'no'), 20);
          }
          return { action: 'accept' };
        },
        { store, maxOpenPerCaller: 1, elicitTimeoutMs: 1000 },
      );
      const outcomes: unknown[] = [];
      for (const [i, now] of steps.entries()) {
        const controller = new AbortController();
        const call = client.callTool(
          'create_refund',
          { order_id: `A-${i}`, amount: 1 },
          { signal: controller.signal },
        );
        if (now === 'cancelled') {
          await sleep(100);
          controller.abort();
          await expect(call).rejects.toThrow();
          // The server's side of the call has ended once the outermost middleware saw it settle.
          for (let waited = 0; decisions.length <= i && waited < 5000; waited += 10) await sleep(10);
          outcomes.push('cancelled');
        } else {
          const result = await call;
          outcomes.push(result.isError ? expectFailure(result).error : result.structuredContent);
        }
      }
      expect(outcomes).toEqual([
        { ok: true, refund_id: 'R-1' },
        'permission_denied',
        'permission_denied',
        'permission_denied',
        'timeout',
        'cancelled',
        { ok: true, refund_id: 'R-2' },
      ]);
      expect(runs.count).toBe(2);
      // No slot is held; each confirmation's mark stays until its keys under the id expire.
      const kinds = await held();
      expect(kinds.filter((kind) => kind === 'slot')).toEqual([]);
      expect(kinds.filter((kind) => kind === 'mark')).toHaveLength(steps.length);
    });
  });

  describe('on a real Redis at its maxmemory (noeviction; a redis-server of its own)', () => {
    if (TEST_REDIS_URL === undefined) {
      reportRedisMissing('URL-mode confirmation on a full Redis (it starts a redis-server of its own)');
      return;
    }
    it('a new confirmation is refused rate_limited: nothing asked, run or left behind; with room again, the same call is confirmed on the page', async () => {
      const own = await startOwnRedis();
      closers.push(() => own.close());
      const prefix = 'confirm-full:';
      const { client, runs, asked, decisions } = await setUp(
        (params) => {
          setTimeout(() => void visit(urlOf(params), 'alice', 'yes'), 20);
          return { action: 'accept' };
        },
        { store: createRedisStore(own.client, { prefix }) },
      );
      expect(isStoreFullError(await fillRedis(own.client))).toBe(true);

      const refund = { order_id: 'A-1', amount: 25 };
      expect(expectFailure(await client.callTool('create_refund', refund))).toEqual({
        ok: false,
        error: 'rate_limited',
        message: 'The server is keeping track of too many confirmations right now; nothing was done.',
        hint: 'Finish or wait for your earlier calls before making new ones, then retry this one without a confirmation.',
        retryable: true,
      });
      expect(asked).toEqual([]);
      expect(runs.count).toBe(0);
      expect(decisions).toEqual([
        [
          {
            by: 'confirm',
            action: 'refused',
            reason: 'store full',
            detail: { digest: DIGEST, full: 'store' },
          },
        ],
      ]);
      // Nothing of the refused call is left: no slot counts against the caller once Redis has room.
      expect(await own.client.keys(`${prefix}*`)).toEqual([]);

      // The operator gives Redis room again: the same call is asked on the page and runs once.
      await own.client.config('SET', 'maxmemory', '0');
      expect((await client.callTool('create_refund', refund)).structuredContent).toEqual({
        ok: true,
        refund_id: 'R-1',
      });
      expect(asked.map((params) => params.mode)).toEqual(['url']);
      expect(runs.args).toEqual([refund]);
      const kinds = (await own.client.keys(`${prefix}*`)).map((key) => kindOf(key.slice(prefix.length)));
      expect(kinds.sort()).toEqual(['answer', 'mark', 'pending']);
    });
  });

  describe('pageOnly: only the page counts', () => {
    it('a client that can open the page confirms there as usual', async () => {
      const { client, runs } = await setUp(
        (params) => {
          setTimeout(() => void visit(urlOf(params), 'alice', 'yes'), 30);
          return { action: 'accept' };
        },
        { pageOnly: true },
      );
      const result = await client.callTool('create_refund', { order_id: 'A-1', amount: 25 });
      expect(result.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
      expect(runs.count).toBe(1);
    });

    it('a client that cannot open it is refused, not asked by form: nothing runs', async () => {
      const { client, runs, asked, decisions } = await setUp(() => ({ action: 'accept', content: {} }), {
        pageOnly: true,
        elicitUrl: false,
      });
      expect(expectFailure(await client.callTool('create_refund', { order_id: 'A-1', amount: 25 }))).toEqual({
        ok: false,
        error: 'unavailable',
        message:
          'This action needs the user to confirm on a confirmation page, which this client cannot open.',
        hint: 'Nothing was done. Tell the user this needs an MCP client that supports URL elicitation; do not try another way.',
        retryable: false,
      });
      expect(asked).toEqual([]);
      expect(runs.count).toBe(0);
      expect(decisions).toEqual([
        [{ by: 'confirm', action: 'refused', reason: 'no page', detail: { digest: '' } }],
      ]);
    });

    it('a two-step confirmation the model carries is refused, whatever it holds', async () => {
      const { client, runs, asked, decisions } = await setUp(() => ({ action: 'accept' }), {
        pageOnly: true,
      });
      const envelope = expectFailure(
        await client.callTool('create_refund', { order_id: 'A-1', amount: 25, confirmation: 'c1.1.2.3' }),
      );
      expect(envelope).toMatchObject({
        error: 'permission_denied',
        message: 'This tool is confirmed on the confirmation page only.',
      });
      expect(asked).toEqual([]);
      expect(runs.count).toBe(0);
      expect(decisions).toEqual([
        [{ by: 'confirm', action: 'refused', reason: 'page only', detail: { digest: '' } }],
      ]);
    });

    it('a client that loses URL elicitation mid-call is refused, not sent to two steps', async () => {
      const lost: ToolMiddleware = (ctx, next) => {
        // The client could carry URL elicitation when asked, and cannot when the request goes out.
        const server = ctx.server;
        const wrapper: ServerAccess = {
          ...server,
          supports: () => true,
          elicit: async () => {
            throw new ToolError('unavailable', 'The server cannot send the user to a page: gone.');
          },
        };
        // ctx.server is a getter on the call's context: an own property shadows it for this call.
        Object.defineProperty(ctx, 'server', { value: wrapper });
        return next();
      };
      for (const pageOnly of [true, false]) {
        const { tool, runs } = refundTool();
        const confirm = createConfirm({
          secret: SECRET,
          tools: { create_refund: { pageOnly } },
          url: { build: ({ id }) => `https://orders.test/confirm/${id}` },
        });
        const client = await serveTools([tool], { middleware: [lost, confirm], authInfo: authAs('alice') });
        closers.push(() => client.close());
        const envelope = expectFailure(
          await client.callTool('create_refund', { order_id: 'A-1', amount: 25 }),
        );
        expect(envelope.error).toBe(pageOnly ? 'unavailable' : 'confirmation_required');
        expect(runs.count).toBe(0);
      }
    });

    it('needs URL mode: refused at construction without url', () => {
      expect(() => createConfirm({ secret: SECRET, enabled: true, pageOnly: true })).toThrow(
        /createConfirm: pageOnly needs URL mode/,
      );
      expect(() => createConfirm({ secret: SECRET, tools: { create_refund: { pageOnly: true } } })).toThrow(
        /createConfirm: tools\.create_refund: pageOnly needs URL mode/,
      );
      expect(() =>
        createConfirm({ secret: SECRET, tools: { create_refund: { pageOnly: 'yes' as never } } }),
      ).toThrow(/pageOnly must be a boolean/);
    });
  });

  it('refuses bad URL options at construction, and the page methods without URL mode', async () => {
    expect(() => createConfirm({ secret: SECRET, url: {} as never })).toThrow(
      /url\.build must be a function/,
    );
    expect(() =>
      createConfirm({ secret: SECRET, url: { build: () => 'https://x.test/', pollMs: 0 } }),
    ).toThrow(/url\.pollMs must be a positive integer/);
    for (const maxOpenPerCaller of [0, 1.5, 101, Number.POSITIVE_INFINITY, '5' as never]) {
      expect(() =>
        createConfirm({ secret: SECRET, url: { build: () => 'https://x.test/', maxOpenPerCaller } }),
      ).toThrow('createConfirm: url.maxOpenPerCaller must be an integer from 1 to 100');
    }
    const plain = createConfirm({ secret: SECRET });
    expect(() => plain.answer('AAAAAAAAAAAAAAAAAAAAAA', { approve: true, principal: 'a' })).toThrow(
      /URL mode is off/,
    );
  });

  it('a page address that is not absolute http(s) is the server’s bug: internal, nothing asked or run', async () => {
    const { tool, runs } = refundTool();
    const asked: unknown[] = [];
    const confirm = createConfirm({
      secret: SECRET,
      tools: { create_refund: {} },
      url: { build: ({ id }) => `javascript:alert('${id}')` },
    });
    const client = await serveTools([tool], {
      middleware: [confirm],
      authInfo: authAs('alice'),
      elicitUrl: true,
      onElicit: (params) => {
        asked.push(params);
        return { action: 'accept' };
      },
    });
    closers.push(() => client.close());
    expect(
      expectFailure(await client.callTool('create_refund', { order_id: 'A-1', amount: 25 })),
    ).toMatchObject({
      error: 'internal',
    });
    expect(asked).toEqual([]);
    expect(runs.count).toBe(0);
  });
});
