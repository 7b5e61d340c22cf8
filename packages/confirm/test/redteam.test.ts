// Red-team tests: a hostile model or MCP client tries to run a confirmed tool without the person's
// confirmation of exactly that call. Every attack must fail; each test asserts what the attacker gets.
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { CallToolResult, ElicitRequest, ElicitResult } from '@modelcontextprotocol/sdk/types.js';
import {
  createMemoryStore,
  defineTool,
  type KeyValueStore,
  ok,
  type PolicyDecision,
  type ToolDefinition,
} from '@toolgate/core';
import { expectFailure, type LogEntry, recordingLogger, serveTools } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { CONFIRM_META, type ConfirmMiddleware, confirmationArgument, createConfirm } from '../src/index.js';
import {
  authAs,
  decisionsOf,
  kindOf,
  promptsShown,
  refundTool,
  SECRET,
  sleep,
  watchedStore,
} from './fixtures.js';

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

const caller = (
  sub: string | undefined,
  extra: Record<string, unknown> = {},
  iss = 'https://idp.test',
): AuthInfo => ({
  token: `token-${sub}`,
  clientId: 'desk',
  scopes: [],
  extra: { iss, ...(sub === undefined ? {} : { sub }), ...extra },
});

describe('two steps: a confirmation is bound to the exact call', () => {
  it('arguments that only look the same (unicode forms, look-alikes, an added optional) are other calls', async () => {
    const { tool, runs } = refundTool();
    const client = await serve([tool], {
      middleware: [createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
      authInfo: authAs('alice'),
    });
    const shown = { order_id: 'Caf\u00e9-1', amount: 25 };
    const confirmation = confirmationOf(await client.callTool('create_refund', shown));
    for (const variant of [
      { order_id: 'Cafe\u0301-1', amount: 25 }, // NFD of what was shown
      { order_id: 'Caf\u00e9-\uff11', amount: 25 }, // fullwidth digit
      { order_id: 'Caf\u00e9-1 ', amount: 25 },
      { order_id: 'caf\u00e9-1', amount: 25 },
      { order_id: 'Caf\u00e9-1', amount: 25.000001 },
      { order_id: 'Caf\u00e9-1', amount: 25, note: '' },
      { order_id: 'Caf\u00e9-1', amount: 250 },
    ]) {
      const result = await client.callTool('create_refund', { ...variant, confirmation });
      expect(expectFailure(result).message).toBe(MISMATCH);
    }
    expect(runs.count).toBe(0);
    // None of the refusals consumed it: the call that was shown still runs, once.
    const accepted = await client.callTool('create_refund', {
      amount: 25,
      confirmation,
      order_id: 'Caf\u00e9-1',
    });
    expect(accepted.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
    expect(runs.args).toEqual([{ order_id: 'Caf\u00e9-1', amount: 25, confirmation }]);
  });

  it('reordered keys at any depth are the same call; a reordered list is another', async () => {
    let runs = 0;
    const ship = defineTool({
      name: 'ship',
      description: 'Ship items to an address.',
      input: {
        address: z.object({ street: z.string(), city: z.string() }),
        items: z.array(z.string()),
        confirmation: confirmationArgument,
      },
      handler: async () => {
        runs += 1;
        return ok({ shipped: true });
      },
    }) as ToolDefinition;
    const client = await serve([ship], {
      middleware: [createConfirm({ secret: SECRET, tools: { ship: {} } })],
    });
    const confirmation = confirmationOf(
      await client.callTool('ship', { address: { street: 'Main 1', city: 'Oslo' }, items: ['a', 'b'] }),
    );
    const swapped = await client.callTool('ship', {
      items: ['b', 'a'],
      address: { city: 'Oslo', street: 'Main 1' },
      confirmation,
    });
    expect(expectFailure(swapped).message).toBe(MISMATCH);
    const reordered = await client.callTool('ship', {
      confirmation,
      items: ['a', 'b'],
      address: { city: 'Oslo', street: 'Main 1' },
    });
    expect(reordered.structuredContent).toEqual({ ok: true, shipped: true });
    expect(runs).toBe(1);
  });

  it('tampered confirmations are refused and do not consume the real one; a re-encoding is the same one', async () => {
    const { tool, runs } = refundTool();
    const client = await serve([tool], {
      middleware: [createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
    });
    const confirmation = confirmationOf(await client.callTool('create_refund', refund));
    const other = confirmationOf(await client.callTool('create_refund', { ...refund, amount: 1 }));
    const [, expiry, nonce, mac] = confirmation.split('.') as [string, string, string, string];
    const [, , otherNonce, otherMac] = other.split('.') as [string, string, string, string];
    const foreign = confirmationOf(
      await (
        await serve([refundTool().tool], {
          middleware: [createConfirm({ secret: `${SECRET}-other-deployment`, tools: { create_refund: {} } })],
        })
      ).callTool('create_refund', refund),
    );
    for (const forged of [
      `c1.${expiry}.${nonce}.${mac.toUpperCase()}`,
      `c1.${expiry}.${otherNonce}.${mac}`,
      `c1.${expiry}.${nonce}.${otherMac}`,
      `c2.${expiry}.${nonce}.${mac}`,
      `c1.${(Number.parseInt(expiry, 36) + 1).toString(36)}.${nonce}.${mac}`,
      ` ${confirmation}`,
      `${confirmation}\n`,
      `${confirmation.slice(0, -1)}${mac.endsWith('0') ? '1' : '0'}`,
      foreign,
      '',
    ]) {
      expect(
        expectFailure(await client.callTool('create_refund', { ...refund, confirmation: forged })).error,
      ).toBe('permission_denied');
    }
    // Non-strings under _meta (a client can send any JSON there) are refused too.
    const { tool: metaTool, runs: metaRuns } = refundTool('meta_refund', false);
    const metaClient = await serve([metaTool], {
      middleware: [createConfirm({ secret: SECRET, tools: { meta_refund: {} } })],
    });
    for (const value of [null, 0, true, [confirmation], { confirmation }]) {
      const result = await metaClient.callTool('meta_refund', refund, {
        meta: { 'toolgate/confirmation': value },
      });
      expect(expectFailure(result).error).toBe('permission_denied');
    }
    expect(runs.count + metaRuns.count).toBe(0);
    // A leading zero re-encodes the same expiry: it is the same confirmation, usable once in total.
    const reencoded = `c1.0${expiry}.${nonce}.${mac}`;
    expect(
      (await client.callTool('create_refund', { ...refund, confirmation: reencoded })).isError,
    ).toBeFalsy();
    expect(expectFailure(await client.callTool('create_refund', { ...refund, confirmation })).message).toBe(
      USED,
    );
    expect(runs.count).toBe(1);
  });

  it('a confirmation in the arguments is the only one read: no fallback to another in _meta', async () => {
    const { tool, runs } = refundTool();
    const client = await serve([tool], {
      middleware: [createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
    });
    const confirmation = confirmationOf(await client.callTool('create_refund', refund));
    const result = await client.callTool(
      'create_refund',
      {
        ...refund,
        confirmation: 'c1.zzzzzzzz.00000000000000000000000000000000.00000000000000000000000000000000',
      },
      { meta: { 'toolgate/confirmation': confirmation } },
    );
    expect(expectFailure(result).message).toBe(MISMATCH);
    expect(runs.count).toBe(0);
  });

  it('racing one confirmation over two connections of the same caller runs the call once', async () => {
    const { tool, runs } = refundTool();
    const middleware = [createConfirm({ secret: SECRET, tools: { create_refund: {} } })];
    const one = await serve([tool], { middleware, authInfo: caller('alice') });
    const two = await serve([tool], { middleware, authInfo: caller('alice', { jti: 'refreshed' }) });
    const confirmation = confirmationOf(await one.callTool('create_refund', refund));
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        (i % 2 ? one : two).callTool('create_refund', { ...refund, confirmation }),
      ),
    );
    expect(runs.count).toBe(1);
    const refused = results.filter((result) => result.isError === true).map((r) => expectFailure(r).message);
    expect(refused).toEqual(Array.from({ length: 9 }, () => USED));
  });

  it('callers that share a subject or a client id are still other callers', async () => {
    const { tool, runs } = refundTool();
    const middleware = [createConfirm({ secret: SECRET, tools: { create_refund: {} } })];
    const alice = await serve([tool], { middleware, authInfo: caller('alice') });
    const confirmation = confirmationOf(await alice.callTool('create_refund', refund));
    const impostors = [
      caller('alice', {}, 'https://other-idp.test'), // the same subject at another issuer
      caller('Alice'),
      caller('alice\u200b'),
      caller(undefined, { customer: 'alice' }), // no subject: the client id and claims decide
    ];
    for (const authInfo of impostors) {
      const mallory = await serve([tool], { middleware, authInfo });
      const result = await mallory.callTool('create_refund', { ...refund, confirmation });
      expect(expectFailure(result).message).toBe(MISMATCH);
    }
    const local = await serve([tool], { middleware });
    expect(expectFailure(await local.callTool('create_refund', { ...refund, confirmation })).message).toBe(
      MISMATCH,
    );
    // Two customers behind one client (no subject): one's confirmation is not the other's.
    const acme = await serve([tool], { middleware, authInfo: caller(undefined, { customer: 'acme' }) });
    const globex = await serve([tool], { middleware, authInfo: caller(undefined, { customer: 'globex' }) });
    const acmes = confirmationOf(await acme.callTool('create_refund', refund));
    expect(
      expectFailure(await globex.callTool('create_refund', { ...refund, confirmation: acmes })).message,
    ).toBe(MISMATCH);
    expect(runs.count).toBe(0);
  });

  it('a replica whose clock lags cannot accept a confirmation another replica already used', async () => {
    // The shared store keeps time by its own clock (Redis does), each replica checks expiry by its own.
    // Replica one uses the confirmation; then the store's clock runs 5 s ahead of replica two's, which
    // still sees the confirmation as valid: the store must still remember that it was used.
    const { tool, runs } = refundTool();
    let storeSkewMs = 0;
    const store = createMemoryStore({ now: () => Date.now() + storeSkewMs });
    const options = {
      secret: SECRET,
      audience: 'orders',
      store,
      tools: { create_refund: { ttlMs: 60_000 } },
    };
    const one = await serve([tool], { middleware: [createConfirm(options)], authInfo: authAs('alice') });
    const two = await serve([tool], { middleware: [createConfirm(options)], authInfo: authAs('alice') });
    const confirmation = confirmationOf(await one.callTool('create_refund', refund));
    expect((await one.callTool('create_refund', { ...refund, confirmation })).isError).toBeFalsy();
    storeSkewMs = 60_000 + 5_000; // the token expired 5 s ago by the store's (and replica one's) time
    const replay = await two.callTool('create_refund', { ...refund, confirmation });
    expect(expectFailure(replay).message).toBe(USED);
    expect(runs.count).toBe(1);
  });

  it('a server restarted with the same secret (the default memory store is new) does not accept a confirmation again', async () => {
    // The secret outlives the process (a secret store); what the memory store remembered does not.
    // The model still holds the confirmation it used before the deploy and sends it once more.
    const { tool, runs } = refundTool();
    const before = await serve([tool], {
      middleware: [createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
      authInfo: authAs('alice'),
    });
    const confirmation = confirmationOf(await before.callTool('create_refund', refund));
    expect((await before.callTool('create_refund', { ...refund, confirmation })).isError).toBeFalsy();
    await before.close();

    const decisions: PolicyDecision[][] = [];
    const after = await serve([tool], {
      middleware: [decisionsOf(decisions), createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
      authInfo: authAs('alice'),
    });
    const replay = await after.callTool('create_refund', { ...refund, confirmation });
    expect(expectFailure(replay)).toMatchObject({ error: 'permission_denied', message: USED });
    expect(decisions).toEqual([
      [{ by: 'confirm', action: 'refused', reason: 'used', detail: { digest: confirmation.split('.')[3] } }],
    ]);
    expect(runs.count).toBe(1);
    // Asked again after the restart, the same call is confirmed and runs once more, as the user agreed.
    const fresh = confirmationOf(await after.callTool('create_refund', refund));
    expect((await after.callTool('create_refund', { ...refund, confirmation: fresh })).isError).toBeFalsy();
    expect(runs.count).toBe(2);
  });
});

describe('a flood of confirmations cannot push out another caller’s (memory store)', () => {
  const full = (retry: string) => ({
    ok: false,
    error: 'rate_limited',
    message: 'The server is keeping track of too many confirmations right now; nothing was done.',
    hint: `Finish or wait for your earlier calls before making new ones, then retry this one ${retry}.`,
    retryable: true,
  });
  // The attacker's own scope fills first (maxEntriesPerScope), or the whole store does (maxEntries,
  // which several identities of one tenant could reach).
  const limits = [
    { name: 'its own scope', store: { maxEntriesPerScope: 3 }, full: 'scope', attackers: 1 },
    { name: 'the whole store', store: { maxEntries: 4, maxEntriesPerScope: 2 }, full: 'store', attackers: 2 },
  ] as const;
  for (const limit of limits) {
    it(`an attacker who fills ${limit.name} is refused rate_limited, given nothing; the victim’s confirmation works once`, async () => {
      const { tool, runs } = refundTool();
      const decisions: PolicyDecision[][] = [];
      const logs: LogEntry[] = [];
      const middleware = [
        decisionsOf(decisions),
        createConfirm({
          secret: SECRET,
          audience: 'orders',
          store: createMemoryStore(limit.store),
          tools: { create_refund: {} },
        }),
      ];
      const bob = await serve([tool], { middleware, authInfo: caller('bob'), logger: recordingLogger(logs) });
      const bobs = confirmationOf(await bob.callTool('create_refund', refund));

      // Each attacker asks for confirmation after confirmation (a new key each) and never uses one.
      const refusals: CallToolResult[] = [];
      let issued = 0;
      for (let a = 0; a < limit.attackers; a += 1) {
        const mallory = await serve([tool], {
          middleware,
          authInfo: caller(`mallory-${a}`),
          logger: recordingLogger(logs),
        });
        for (let i = 0; i < 8; i += 1) {
          const result = await mallory.callTool('create_refund', { order_id: `M-${a}-${i}`, amount: 1 });
          if (confirmationOf(result) !== '') issued += 1;
          else refusals.push(result);
        }
      }
      // Three issued: the attacker's scope holds three; or two in the first attacker's scope and one in
      // the second's, until the store holds four with the victim's. Nothing ran.
      expect(issued).toBe(3);
      expect(refusals).toHaveLength(8 * limit.attackers - issued);
      for (const refusal of refusals) expect(expectFailure(refusal)).toEqual(full('without a confirmation'));
      expect(runs.count).toBe(0);
      expect(decisions.at(-1)).toEqual([
        {
          by: 'confirm',
          action: 'refused',
          reason: 'store full',
          detail: { digest: expect.any(String), full: limit.full },
        },
      ]);
      expect(logs.map((entry) => entry.message)).toContain(
        `confirm: the store is full (set, ${limit.full === 'scope' ? 'per scope' : 'in total'}); confirmations that need a new key are refused rate_limited`,
      );

      // Bob's confirmation, issued before the flood, was not pushed out: it runs once, a replay is refused.
      expect((await bob.callTool('create_refund', { ...refund, confirmation: bobs })).isError).toBeFalsy();
      const replay = await bob.callTool('create_refund', { ...refund, confirmation: bobs });
      expect(expectFailure(replay).message).toBe(USED);
      expect(runs.args).toEqual([{ ...refund, confirmation: bobs }]);
    });
  }

  it('URL mode: a call whose pending confirmation finds the store full is refused before anyone is asked', async () => {
    const { tool, runs } = refundTool();
    const store = createMemoryStore({ maxEntries: 1 });
    await store.set('confirm:used:{someone}:n', '1', 60_000);
    const asked: unknown[] = [];
    const client = await serve([tool], {
      middleware: [
        createConfirm({
          secret: SECRET,
          audience: 'orders',
          store,
          tools: { create_refund: {} },
          url: { build: ({ id }) => `https://page.test/confirm/${id}` },
        }),
      ],
      authInfo: caller('alice'),
      elicitUrl: true,
      onElicit: (params) => {
        asked.push(params);
        return { action: 'accept' };
      },
      logger: recordingLogger([]),
    });
    const result = await client.callTool('create_refund', refund);
    expect(expectFailure(result)).toEqual(full('without a confirmation'));
    expect(asked).toEqual([]);
    expect(runs.count).toBe(0);
  });
});

describe('URL mode: one caller’s confirmations count against its own scope (memory store)', () => {
  const full = {
    ok: false,
    error: 'rate_limited',
    message: 'The server is keeping track of too many confirmations right now; nothing was done.',
    hint: 'Finish or wait for your earlier calls before making new ones, then retry this one without a confirmation.',
    retryable: true,
  };
  const refusedFull = (scope: 'scope' | 'store') => [
    {
      by: 'confirm',
      action: 'refused',
      reason: 'store full',
      detail: { digest: expect.stringMatching(/^[0-9a-f]{32}$/), full: scope },
    },
  ];

  /** A server in URL mode on `store`; each caller is a client of its own, its page answers through `confirm`. */
  async function urlServer(store: KeyValueStore) {
    const { tool, runs } = refundTool();
    const decisions: PolicyDecision[][] = [];
    const confirm: ConfirmMiddleware = createConfirm({
      secret: SECRET,
      audience: 'orders',
      store,
      tools: { create_refund: {} },
      url: { build: ({ id }) => `https://page.test/confirm/${id}`, pollMs: 10 },
    });
    const connect = (
      subject: string,
      onElicit: (params: ElicitRequest['params']) => ElicitResult | Promise<ElicitResult>,
    ) =>
      serve([tool], {
        middleware: [decisionsOf(decisions), confirm],
        authInfo: caller(subject),
        elicitUrl: true,
        onElicit,
        logger: recordingLogger([]),
      });
    return { confirm, connect, runs, decisions };
  }
  const idOf = (params: ElicitRequest['params']) => (params as { elicitationId: string }).elicitationId;

  it('a caller holding many open fills only its own scope: its next is refused unrun, another caller still confirms', async () => {
    // Each open confirmation holds two keys in its caller's scope (a slot and a mark): three fill six.
    const { store, held } = watchedStore({ maxEntriesPerScope: 6 });
    const { confirm, connect, runs, decisions } = await urlServer(store);
    const asked: string[] = [];
    const mallory = await connect('mallory', (params) => {
      asked.push(idOf(params));
      return { action: 'accept' }; // and never answers on the page
    });
    const controller = new AbortController();
    const waiting = Array.from({ length: 3 }, (_, i) =>
      mallory.callTool('create_refund', { order_id: `M-${i}`, amount: 1 }, { signal: controller.signal }),
    );
    for (let waited = 0; asked.length < 3 && waited < 5000; waited += 10) await sleep(10);
    expect(asked).toHaveLength(3);

    const refused = await mallory.callTool('create_refund', { order_id: 'M-3', amount: 1 });
    expect(expectFailure(refused)).toEqual(full);
    expect(decisions).toEqual([refusedFull('scope')]);
    expect(asked).toHaveLength(3);
    // The refused call left nothing: three open confirmations' keys, no more.
    expect(await held()).toEqual([
      ...Array(3).fill('mark'),
      ...Array(3).fill('pending'),
      ...Array(3).fill('slot'),
    ]);

    const bob = await connect('bob', (params) => {
      setTimeout(() => void confirm.answer(idOf(params), { approve: true, principal: 'bob' }), 20);
      return { action: 'accept' };
    });
    expect((await bob.callTool('create_refund', refund)).structuredContent).toEqual({
      ok: true,
      refund_id: 'R-1',
    });
    expect(runs.args).toEqual([refund]);

    controller.abort();
    await Promise.allSettled(waiting);
    for (let waited = 0; decisions.length < 5 && waited < 5000; waited += 10) await sleep(10);
    expect(runs.count).toBe(1);
    // The cancelled calls freed their slots.
    expect((await held()).filter((kind) => kind === 'slot')).toEqual([]);
  });

  it('a caller dismissing pages as fast as it can is refused once its scope is full: what a closed one leaves counts until it expires', async () => {
    let skewMs = 0;
    // Opening needs room for a slot and a mark: three marks left behind and the fourth's slot fill four.
    const { store, held } = watchedStore({ maxEntriesPerScope: 4, now: () => Date.now() + skewMs });
    const { connect, runs, decisions } = await urlServer(store);
    const mallory = await connect('mallory', () => ({ action: 'decline' }));
    const outcomes: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const result = await mallory.callTool('create_refund', { order_id: `M-${i}`, amount: 1 });
      outcomes.push(expectFailure(result).error);
    }
    // A dismissed confirmation frees its slot, while its mark stays as long as its keys under the id.
    expect(outcomes).toEqual([
      'permission_denied',
      'permission_denied',
      'permission_denied',
      'rate_limited',
      'rate_limited',
    ]);
    expect(decisions.at(-1)).toEqual(refusedFull('scope'));
    expect(await held()).toEqual([
      ...Array(3).fill('answer'),
      ...Array(3).fill('mark'),
      ...Array(3).fill('pending'),
    ]);
    expect(
      expectFailure(
        await (await connect('bob', () => ({ action: 'decline' }))).callTool('create_refund', refund),
      ).error,
    ).toBe('permission_denied');

    // A minute past the confirmations' expiry (elicitTimeoutMs, 2 minutes), their keys are gone.
    skewMs = 180_001;
    expect(await held()).toEqual([]);
    expect(expectFailure(await mallory.callTool('create_refund', refund)).error).toBe('permission_denied');
    expect(runs.count).toBe(0);
  });

  for (const room of [1, 2]) {
    it(`nothing is left behind when the store refuses the ${room === 1 ? 'mark' : 'pending call'}: rate_limited, nothing asked or run`, async () => {
      const { store, written, held } = watchedStore({ maxEntries: 1 + room });
      await store.set('confirm:used:{someone}:n', '1', 60_000);
      const { connect, runs, decisions } = await urlServer(store);
      const asked: unknown[] = [];
      const alice = await connect('alice', (params) => {
        asked.push(params);
        return { action: 'accept' };
      });
      expect(expectFailure(await alice.callTool('create_refund', refund))).toEqual(full);
      expect(written.map(kindOf)).toEqual(
        ['confirm:used:{someone}:n', 'slot', 'mark', 'pending'].slice(0, 2 + room),
      );
      expect(await held()).toEqual(['confirm:used:{someone}:n']);
      expect(decisions).toEqual([refusedFull('store')]);
      expect(asked).toEqual([]);
      expect(runs.count).toBe(0);
    });
  }
});

describe('hostile clients with elicitation', () => {
  const withClient = async (
    onElicit: (params: ElicitRequest['params']) => ElicitResult | Promise<ElicitResult>,
  ) => {
    const { tool, runs } = refundTool();
    const decisions: PolicyDecision[][] = [];
    const client = await serve([tool], {
      middleware: [decisionsOf(decisions), createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
      authInfo: authAs('alice'),
      logger: recordingLogger([]),
      onElicit,
    });
    return { client, runs, decisions };
  };

  it('an answer that is not a well-formed accept never runs the call', async () => {
    for (const answer of [
      { action: 'ACCEPT' },
      { action: 'yes' },
      { action: 'accept ' },
      {},
      { approved: true },
    ]) {
      const { client, runs } = await withClient(() => answer as unknown as ElicitResult);
      const result = await client.callTool('create_refund', refund).catch((error: unknown) => error);
      expect((result as CallToolResult).isError ?? true).toBe(true);
      expect(runs.count).toBe(0);
    }
  });

  it('a client that declares elicitation but answers with an error neither runs nor gets a confirmation', async () => {
    const { client, runs } = await withClient(() => {
      throw new Error('not implemented');
    });
    const result = await client.callTool('create_refund', refund);
    expect(result.isError).toBe(true);
    expect(result._meta?.[CONFIRM_META]).toBeUndefined();
    expect(JSON.stringify(result)).not.toMatch(/c1\.[0-9a-z]+\.[0-9a-f]{32}/);
    expect(runs.count).toBe(0);
  });

  it('a client that answers elicitation cannot also skip it with a forged or carried confirmation', async () => {
    const { client, runs } = await withClient(() => ({ action: 'decline' }));
    expect(expectFailure(await client.callTool('create_refund', refund)).message).toBe(
      'The user declined this request.',
    );
    const forged = `c1.${(Date.now() + 60_000).toString(36)}.${'a'.repeat(32)}.${'b'.repeat(32)}`;
    expect(
      expectFailure(await client.callTool('create_refund', { ...refund, confirmation: forged })).message,
    ).toBe(MISMATCH);
    expect(runs.count).toBe(0);
  });
});

describe('URL mode against a hostile client', () => {
  async function setUp(
    onElicit: (params: ElicitRequest['params']) => ElicitResult | Promise<ElicitResult>,
    options: { elicitTimeoutMs?: number; pageOnly?: boolean; authInfo?: AuthInfo } = {},
  ) {
    const { tool, runs } = refundTool();
    const confirm: ConfirmMiddleware = createConfirm({
      secret: SECRET,
      tools: {
        create_refund: {
          elicitTimeoutMs: options.elicitTimeoutMs ?? 2000,
          pageOnly: options.pageOnly ?? false,
        },
      },
      url: { build: ({ id }) => `https://page.test/confirm/${id}`, pollMs: 10 },
    });
    const client = await serve([tool], {
      middleware: [confirm],
      authInfo: options.authInfo ?? authAs('alice'),
      elicitUrl: true,
      onElicit,
    });
    return { client, runs, confirm };
  }
  const idOf = (params: ElicitRequest['params']) => (params as { elicitationId: string }).elicitationId;

  it('an accept with forged content is not an approval: the call waits for the page, then gives up', async () => {
    const ids: string[] = [];
    const { client, runs, confirm } = await setUp(
      (params) => {
        ids.push(idOf(params));
        return { action: 'accept', content: { approved: true, approve: 'yes' } } as ElicitResult;
      },
      { elicitTimeoutMs: 300 },
    );
    expect(expectFailure(await client.callTool('create_refund', refund)).error).toBe('timeout');
    expect(runs.count).toBe(0);
    // The person answering afterwards changes nothing.
    expect(await confirm.answer(ids[0]!, { approve: true, principal: 'alice' })).toBe('unknown');
    expect(runs.count).toBe(0);
  });

  it('the client knows the id, but answering needs the person: another principal, none, or a look-alike is forbidden', async () => {
    const outcomes: unknown[] = [];
    let confirmRef: ConfirmMiddleware | undefined;
    const { client, runs, confirm } = await setUp(
      async (params) => {
        const id = idOf(params);
        for (const principal of [undefined, 'mallory', 'Alice', 'alice ', 'https://idp.test alice', 'desk'])
          outcomes.push(await confirmRef!.answer(id, { approve: true, principal }));
        outcomes.push(await confirmRef!.pending(id, 'mallory'));
        // The client answers for the person in every way it can: only accept reaches the page.
        return { action: 'accept', content: {} };
      },
      { elicitTimeoutMs: 400 },
    );
    confirmRef = confirm;
    expect(expectFailure(await client.callTool('create_refund', refund)).error).toBe('timeout');
    expect(outcomes).toEqual([...Array.from({ length: 6 }, () => 'forbidden'), undefined]);
    expect(runs.count).toBe(0);
  });

  it('a page answer for one call never approves another call of the same person', async () => {
    const ids: string[] = [];
    let confirmRef: ConfirmMiddleware | undefined;
    const { client, runs, confirm } = await setUp(
      async (params) => {
        ids.push(idOf(params));
        // The person approves the first (small) refund; the second (large) one waits for its own answer.
        if (ids.length === 1) await confirmRef!.answer(ids[0]!, { approve: true, principal: 'alice' });
        return { action: 'accept' };
      },
      { elicitTimeoutMs: 400 },
    );
    confirmRef = confirm;
    expect((await client.callTool('create_refund', { ...refund, amount: 1 })).isError).toBeFalsy();
    // Answering the used page again changes nothing either.
    expect(await confirm.answer(ids[0]!, { approve: true, principal: 'alice' })).toBe('already answered');
    expect(expectFailure(await client.callTool('create_refund', { ...refund, amount: 9999 })).error).toBe(
      'timeout',
    );
    expect(ids[0]).not.toBe(ids[1]);
    expect(runs.args).toEqual([{ ...refund, amount: 1 }]);
  });

  it('pageOnly: a client that hides its URL support or carries a confirmation gets nothing run', async () => {
    const { tool, runs } = refundTool();
    const confirm = createConfirm({
      secret: SECRET,
      tools: { create_refund: { pageOnly: true } },
      url: { build: ({ id }) => `https://page.test/confirm/${id}` },
    });
    const formOnly = await serve([tool], {
      middleware: [confirm],
      authInfo: authAs('alice'),
      onElicit: () => ({ action: 'accept', content: {} }),
    });
    expect(expectFailure(await formOnly.callTool('create_refund', refund)).error).toBe('unavailable');
    // A confirmation minted by a non-pageOnly server with the same secret does not open a pageOnly tool.
    const twoStep = await serve([refundTool().tool], {
      middleware: [createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
      authInfo: authAs('alice'),
    });
    const confirmation = confirmationOf(await twoStep.callTool('create_refund', refund));
    const bare = await serve([tool], { middleware: [confirm], authInfo: authAs('alice') });
    expect(expectFailure(await bare.callTool('create_refund', { ...refund, confirmation })).error).toBe(
      'permission_denied',
    );
    expect(runs.count).toBe(0);
  });
});

describe('what the model and client see', () => {
  it('no result reveals the secret, the expected MAC or another caller’s call', async () => {
    const { tool } = refundTool();
    const middleware = [createConfirm({ secret: SECRET, tools: { create_refund: { ttlMs: 50 } } })];
    const alice = await serve([tool], { middleware, authInfo: authAs('alice') });
    const mallory = await serve([tool], { middleware, authInfo: authAs('mallory') });
    const alicesCall = { order_id: 'ALICE-SECRET-ORDER', amount: 77 };
    const alicesFirst = await alice.callTool('create_refund', alicesCall);
    const alices = confirmationOf(alicesFirst);
    const seen: CallToolResult[] = [];
    const mine = await mallory.callTool('create_refund', refund);
    seen.push(mine);
    const [, expiry, nonce] = alices.split('.') as [string, string, string];
    for (const confirmation of [alices, `c1.${expiry}.${nonce}.${'0'.repeat(32)}`, 'garbage']) {
      seen.push(await mallory.callTool('create_refund', { ...alicesCall, confirmation }));
      seen.push(await mallory.callTool('create_refund', { ...refund, confirmation }));
    }
    await sleep(80);
    seen.push(await alice.callTool('create_refund', { ...alicesCall, confirmation: alices })); // expired
    const text = JSON.stringify(seen);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(Buffer.from(SECRET).toString('hex'));
    expect(text).not.toContain(Buffer.from(SECRET).toString('base64'));
    // The only confirmations any result carries are the one issued to mallory and those sent in.
    const tokens = new Set(text.match(/c1\.[0-9a-z]+\.[0-9a-f]{32}\.[0-9a-f]{32}/g));
    expect([...tokens].sort()).toEqual([confirmationOf(mine)].sort());
    expect(JSON.stringify(seen.slice(0, 1))).not.toContain('ALICE-SECRET-ORDER');
    // Refusals are one fixed text each: nothing about what was expected.
    for (const result of seen.slice(1)) {
      expect(expectFailure(result).message).toMatch(
        /^This confirmation (does not match this call|has expired)/,
      );
    }
    expect(alicesFirst.isError).toBe(true);
  });
});

describe('the prompt cannot be made to hide an argument', () => {
  /** What the person is shown for `args`: by form, in two steps (the message and _meta) and on the page. */
  const shownEverywhere = (
    tool: ToolDefinition,
    args: Record<string, unknown>,
    options: { maxPromptChars?: number } = {},
  ) => promptsShown(serve, tool, args, options);

  it('a value shaped like the start of a private key hides only itself: every argument after it is shown, by form, in two steps and on the page', async () => {
    // Core redacts the message a client or page shows; a BEGIN line without its END ran to the end of
    // the whole prompt, so the amount below it became part of one [REDACTED] without a word.
    const { tool, runs } = refundTool();
    const shown = await shownEverywhere(tool, {
      order_id: '-----BEGIN PRIVATE KEY-----',
      amount: 99999,
      note: 'goodwill',
    });
    const expected =
      'Run "Refund an order"?\nTool: create_refund\nArguments:\n  order_id: "[REDACTED]\n  amount: 99999\n  note: "goodwill"';
    expect(shown).toEqual({
      form: expected,
      twoStep: expected,
      meta: expected,
      urlMessage: expected,
      page: expected,
    });
    expect(runs.count).toBe(0);
  });

  it('a value describe() interpolates that looks like a key hides itself only: the amount after it stays in the sentence', async () => {
    const { tool, runs } = refundTool();
    const asked: string[] = [];
    const client = await serve([tool], {
      middleware: [
        createConfirm({
          secret: SECRET,
          tools: {
            create_refund: { describe: (args) => `Refund order ${args.order_id}: ${args.amount} EUR` },
          },
        }),
      ],
      onElicit: (params) => {
        asked.push((params as { message: string }).message);
        return { action: 'decline' };
      },
    });
    await client.callTool('create_refund', { order_id: '-----BEGIN RSA PRIVATE KEY-----', amount: 99999 });
    expect(asked).toEqual([
      'Refund order \\u005bREDACTED\\u005d: 99999 EUR\nTool: create_refund\nArguments:\n  order_id: "[REDACTED]\n  amount: 99999',
    ]);
    expect(runs.count).toBe(0);
  });

  it('long values cannot push the arguments after them out of the prompt: they share its room', async () => {
    let runs = 0;
    const transfer = defineTool({
      name: 'transfer',
      description: 'Transfer money.',
      input: {
        memo: z.string(),
        reference: z.string(),
        purpose: z.string(),
        beneficiary_note: z.string(),
        internal_note: z.string(),
        amount: z.number(),
        to_account: z.string(),
        confirmation: confirmationArgument,
      },
      handler: async () => {
        runs += 1;
        return ok({ done: true });
      },
    }) as ToolDefinition;
    const filler = (word: string) => `${word} `.repeat(400);
    const args = {
      memo: filler('memo'),
      reference: filler('ref'),
      purpose: filler('purpose'),
      beneficiary_note: filler('note'),
      internal_note: filler('internal'),
      amount: 99999,
      to_account: 'MALLORY-1',
    };
    // The default maxPromptChars (1500): five values of 300 characters each used to fill it.
    const shown = await shownEverywhere(transfer, args);
    for (const prompt of Object.values(shown)) {
      const lines = (prompt ?? '').split('\n');
      expect(prompt!.length).toBeLessThanOrEqual(1500);
      expect(lines.slice(-2)).toEqual(['  amount: 99999', '  to_account: "MALLORY-1"']);
      expect(lines.slice(3, -2).map((line) => line.split(':')[0])).toEqual([
        '  memo',
        '  reference',
        '  purpose',
        '  beneficiary_note',
        '  internal_note',
      ]);
      for (const line of lines.slice(3, -2)) expect(line).toMatch(/ … \(\d+ more characters not shown\)$/);
    }
    // The shortest prompt a tool may set (200): one long value cannot push the amount out either.
    const { tool, runs: refunds } = refundTool();
    const short = await shownEverywhere(
      tool,
      { order_id: 'A'.repeat(5000), amount: 99999, note: 'x' },
      { maxPromptChars: 200 },
    );
    for (const prompt of Object.values(short)) {
      expect(prompt!.length).toBeLessThanOrEqual(200);
      expect(prompt!.split('\n').slice(-2)).toEqual(['  amount: 99999', '  note: "x"']);
    }
    expect(runs + refunds.count).toBe(0);
  });

  it('stacked combining marks cannot paint over the lines around a value; text that carries a few keeps them', async () => {
    const { tool, runs } = refundTool();
    const asked: string[] = [];
    const client = await serve([tool], {
      middleware: [createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
      onElicit: (params) => {
        asked.push((params as { message: string }).message);
        return { action: 'decline' };
      },
    });
    // Marks above and below, dozens per letter ("zalgo" text), drawn over the amount line above.
    const zalgo = `x${'\u0346\u0353'.repeat(30)}y${'\u20dd'.repeat(10)}`;
    const vietnamese = 'Nguye\u0302\u0303n'; // NFD: two marks on one letter
    await client.callTool('create_refund', { order_id: vietnamese, amount: 99999, note: zalgo });
    const lines = (asked[0] ?? '').split('\n');
    expect(lines[3]).toBe(`  order_id: "${vietnamese}"`);
    expect(lines[4]).toBe('  amount: 99999');
    expect(lines[5]).toBe(
      `  note: "x\u0346\u0353\u0346\u0353${'\uFFFD'.repeat(56)}y${'\u20dd'.repeat(4)}${'\uFFFD'.repeat(6)}"`,
    );
    expect(runs.count).toBe(0);
  });
});

describe('markdown across the prompt’s lines', () => {
  it('strikethrough opened in one value and closed in a later one cannot strike out the amount between', async () => {
    // A renderer reads the prompt's lines as one paragraph: `~~` pairs across them.
    const { tool, runs } = refundTool();
    const asked: string[] = [];
    const client = await serve([tool], {
      middleware: [createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
      onElicit: (params) => {
        asked.push((params as { message: string }).message);
        return { action: 'decline' };
      },
    });
    await client.callTool('create_refund', { order_id: 'A-1 ~~', amount: 99999, note: '~~ test only' });
    expect(asked).toEqual([
      'Run "Refund an order"?\nTool: create_refund\nArguments:\n  order_id: "A-1 \\u007e\\u007e"\n  amount: 99999\n  note: "\\u007e\\u007e test only"',
    ]);
    expect(asked[0]).not.toContain('~');
    expect(runs.count).toBe(0);
  });
});
