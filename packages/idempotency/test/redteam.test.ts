import { randomUUID } from 'node:crypto';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import {
  createMemoryStore,
  defineTool,
  type KeyValueStore,
  ok,
  type PolicyDecision,
  type ToolDefinition,
  type ToolMiddleware,
  type ToolRequest,
  type ToolResult,
} from '@toolgate/core';
import {
  createTestContext,
  expectFailure,
  type LogEntry,
  recordingLogger,
  serveTools,
  type TestClient,
} from '@toolgate/core/testing';
import { createRedisClient, createRedisStore, redisReady } from '@toolgate/redis-store';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createIdempotency, IDEMPOTENCY_META } from '../src/index.js';
import { reportRedisMissing, TEST_REDIS_URL } from './needs-redis.js';

// Red team: one caller must never replay, join, block or poison another caller's idempotent call,
// whatever the token claims or the explicit key look like, in one process or across replicas on Redis.
// Each attack: the victim's call runs and is stored; the attacker sends the identical call (and the
// identical explicit key); the attacker's call must run for the attacker (a refund of its own), and
// the victim's own retry still replays (so the middleware was on and the attack had its chance).

const open: TestClient[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((client) => client.close()));
});

function tokenOf(clientId: string, extra: Record<string, unknown>, scopes: string[] = []): AuthInfo {
  return { token: `t-${randomUUID()}`, clientId, scopes, extra };
}

const ownerOf = (auth: AuthInfo | undefined) =>
  JSON.stringify([auth?.clientId ?? null, auth?.scopes ?? null, auth?.extra ?? null]);

/** A side effect whose result names whom it ran for (what a replay to the wrong caller would leak). */
function refundTool(options: { delayMs?: number } = {}) {
  const runs: string[] = [];
  const tool = defineTool({
    name: 'create_refund',
    description: 'Refund an amount on one of the caller’s orders.',
    input: { order_id: z.string(), amount: z.number().positive(), confirmation: z.string().optional() },
    handler: async ({ order_id, amount }, ctx): Promise<ToolResult> => {
      const owner = ownerOf(ctx.request.authInfo);
      runs.push(owner);
      if (options.delayMs) await new Promise((resolve) => setTimeout(resolve, options.delayMs));
      return ok({ refund_id: `R-${runs.length}`, owner, order_id, amount });
    },
  }) as ToolDefinition;
  return { tool, runs };
}

const replayed = (result: { _meta?: Record<string, unknown> }) =>
  (result._meta?.[IDEMPOTENCY_META] as { replayed?: boolean } | undefined)?.replayed === true;

const refund = { order_id: 'A-1', amount: 25 };

/** Victim A, then attacker B with the identical call; two replicas on `store` when given. */
async function attackPair(
  a: AuthInfo | undefined,
  b: AuthInfo | undefined,
  options: { store?: () => KeyValueStore; key?: string } = {},
) {
  const { tool, runs } = refundTool();
  const shared =
    options.store === undefined ? createIdempotency({ tools: { create_refund: {} } }) : undefined;
  const connect = async (authInfo: AuthInfo | undefined) => {
    const middleware: ToolMiddleware =
      shared ?? createIdempotency({ store: options.store!(), tools: { create_refund: {} } });
    const client = await serveTools([tool], {
      middleware: [middleware],
      ...(authInfo === undefined ? {} : { authInfo }),
    });
    open.push(client);
    return client;
  };
  const [ca, cb] = [await connect(a), await connect(b)];
  const meta = options.key === undefined ? undefined : { meta: { 'toolgate/idempotency-key': options.key } };
  const first = await ca.callTool('create_refund', refund, meta);
  const second = await cb.callTool('create_refund', refund, meta);
  const again = await ca.callTool('create_refund', refund, meta);
  return { runs, first, second, again };
}

function expectApart(
  outcome: Awaited<ReturnType<typeof attackPair>>,
  a: AuthInfo | undefined,
  b: AuthInfo | undefined,
) {
  expect(outcome.first.structuredContent).toEqual({
    ok: true,
    refund_id: 'R-1',
    owner: ownerOf(a),
    ...refund,
  });
  // The attacker's identical call ran for the attacker: never the victim's stored result.
  expect(outcome.second.structuredContent).toEqual({
    ok: true,
    refund_id: 'R-2',
    owner: ownerOf(b),
    ...refund,
  });
  expect(replayed(outcome.second)).toBe(false);
  // The victim's retry replays its own result: the middleware was on.
  expect(outcome.again.structuredContent).toMatchObject({ refund_id: 'R-1', owner: ownerOf(a) });
  expect(replayed(outcome.again)).toBe(true);
  expect(outcome.runs).toEqual([ownerOf(a), ownerOf(b)]);
}

const ISS = 'https://idp.example';
const proto = JSON.parse('{"__proto__":{"tenant":"acme"},"org":"o"}') as Record<string, unknown>;

const PAIRS: [string, AuthInfo | undefined, AuthInfo | undefined][] = [
  [
    'two issuers, one subject',
    tokenOf('desk', { iss: 'https://idp-a.example', sub: 'alice' }),
    tokenOf('desk', { iss: 'https://idp-b.example', sub: 'alice' }),
  ],
  [
    'a | moved between issuer and subject',
    tokenOf('desk', { iss: 'https://a.example|x', sub: 'y' }),
    tokenOf('desk', { iss: 'https://a.example', sub: 'x|y' }),
  ],
  [
    'a numeric subject against its string',
    tokenOf('desk', { iss: ISS, sub: 7 }),
    tokenOf('desk', { iss: ISS, sub: '7' }),
  ],
  ['a tenant claim "1" against 1', tokenOf('portal', { tenant: '1' }), tokenOf('portal', { tenant: 1 })],
  [
    'claims as nested objects with other values',
    tokenOf('portal', { org: { id: 'a', region: 'eu' } }),
    tokenOf('portal', { org: { region: 'eu', id: 'b' } }),
  ],
  ['an empty-string claim against a missing one', tokenOf('portal', { tenant: '' }), tokenOf('portal', {})],
  [
    'unicode NFC against NFD in a subject',
    tokenOf('desk', { iss: ISS, sub: 'jos\u00e9' }),
    tokenOf('desk', { iss: ISS, sub: 'jose\u0301' }),
  ],
  ['a __proto__ claim against none', tokenOf('portal', proto), tokenOf('portal', { org: 'o' })],
  [
    'very long subjects differing in the last character',
    tokenOf('desk', { iss: ISS, sub: `${'s'.repeat(20_000)}1` }),
    tokenOf('desk', { iss: ISS, sub: `${'s'.repeat(20_000)}2` }),
  ],
  ['no auth (stdio: local) against a token without claims', undefined, tokenOf('portal', {})],
];

describe('idempotency red team: callers never share claims or results (memory, one middleware)', () => {
  for (const [name, a, b] of PAIRS) {
    it(`keeps apart (implicit key): ${name}`, async () => {
      expectApart(await attackPair(a, b), a, b);
    });
    it(`keeps apart (the same explicit key): ${name}`, async () => {
      expectApart(await attackPair(a, b, { key: 'refund-A-1' }), a, b);
    });
  }

  it('an explicit key reused on another tool is another call: no replay of the other tool’s result', async () => {
    const runs: string[] = [];
    const make = (name: string) =>
      defineTool({
        name,
        description: `${name} on an order.`,
        input: { order_id: z.string() },
        handler: async ({ order_id }) => {
          runs.push(name);
          return ok({ did: name, order_id });
        },
      }) as ToolDefinition;
    const client = await serveTools([make('cancel_order'), make('refund_order')], {
      middleware: [createIdempotency({ enabled: true })],
      authInfo: tokenOf('desk', { iss: ISS, sub: 'alice' }),
    });
    open.push(client);
    const meta = { meta: { 'toolgate/idempotency-key': 'k-1' } };
    await client.callTool('cancel_order', { order_id: 'A-1' }, meta);
    const other = await client.callTool('refund_order', { order_id: 'A-1' }, meta);
    expect(other.structuredContent).toEqual({ ok: true, did: 'refund_order', order_id: 'A-1' });
    expect(replayed(other)).toBe(false);
    expect(runs).toEqual(['cancel_order', 'refund_order']);
  });

  it('prototype names as explicit keys are plain keys: each runs once and replays its own', async () => {
    const { tool, runs } = refundTool();
    const client = await serveTools([tool], {
      middleware: [createIdempotency({ tools: { create_refund: {} } })],
      authInfo: tokenOf('desk', { iss: ISS, sub: 'alice' }),
    });
    open.push(client);
    const keys = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'prototype'];
    for (const [i, key] of keys.entries()) {
      const first = await client.callTool('create_refund', refund, { meta: { idempotencyKey: key } });
      expect(first.structuredContent).toMatchObject({ refund_id: `R-${i + 1}` });
    }
    for (const [i, key] of keys.entries()) {
      const again = await client.callTool('create_refund', refund, { meta: { idempotencyKey: key } });
      expect(again.structuredContent).toMatchObject({ refund_id: `R-${i + 1}` });
      expect(replayed(again)).toBe(true);
    }
    expect(runs).toHaveLength(keys.length);
  });

  it('a key sent as a number or object is refused, never coerced onto the string key of the same spelling', async () => {
    const { tool, runs } = refundTool();
    const client = await serveTools([tool], {
      middleware: [createIdempotency({ tools: { create_refund: {} } })],
      authInfo: tokenOf('desk', { iss: ISS, sub: 'alice' }),
    });
    open.push(client);
    await client.callTool('create_refund', refund, { meta: { idempotencyKey: '1' } });
    for (const key of [1, ['1'], { toString: '1' }, true, '']) {
      const refused = await client.callTool('create_refund', refund, { meta: { idempotencyKey: key } });
      expect(expectFailure(refused).error).toBe('invalid_argument');
    }
    expect(runs).toHaveLength(1);
  });

  it('an attacker’s identical call does not join the victim’s call in flight: both run, each gets its own', async () => {
    const { tool, runs } = refundTool({ delayMs: 80 });
    const middleware = createIdempotency({ tools: { create_refund: {} } });
    const victim = tokenOf('desk', { iss: 'https://idp-a.example', sub: 'alice' });
    const attacker = tokenOf('desk', { iss: 'https://idp-b.example', sub: 'alice' });
    const a = await serveTools([tool], { middleware: [middleware], authInfo: victim });
    const b = await serveTools([tool], { middleware: [middleware], authInfo: attacker });
    open.push(a, b);
    const meta = { meta: { 'toolgate/idempotency-key': 'same' } };
    const [ra, rb, ra2] = await Promise.all([
      a.callTool('create_refund', refund, meta),
      b.callTool('create_refund', refund, meta),
      a.callTool('create_refund', refund, meta),
    ]);
    expect(runs.sort()).toEqual([ownerOf(victim), ownerOf(attacker)].sort());
    expect(ra.structuredContent).toMatchObject({ owner: ownerOf(victim) });
    expect(rb.structuredContent).toMatchObject({ owner: ownerOf(attacker) });
    expect(replayed(rb)).toBe(false);
    // The victim's own concurrent retry joined the victim's call.
    expect(ra2.structuredContent).toMatchObject({ owner: ownerOf(victim) });
    expect(replayed(ra2)).toBe(true);
  });

  it('an attacker cannot block the victim’s key: the attacker’s claim with other arguments leaves the victim’s call alone', async () => {
    const { tool, runs } = refundTool({ delayMs: 60 });
    const middleware = createIdempotency({ tools: { create_refund: {} } });
    const victim = tokenOf('desk', { iss: ISS, sub: 'alice' });
    const attacker = tokenOf('desk', { iss: ISS, sub: 'mallory' });
    const a = await serveTools([tool], { middleware: [middleware], authInfo: victim });
    const b = await serveTools([tool], { middleware: [middleware], authInfo: attacker });
    open.push(a, b);
    const meta = { meta: { 'toolgate/idempotency-key': 'order-A-1' } };
    // The attacker claims the key first, with other arguments, and is still running.
    const pending = b.callTool('create_refund', { order_id: 'A-1', amount: 9999 }, meta);
    await new Promise((resolve) => setTimeout(resolve, 10));
    const victimCall = await a.callTool('create_refund', refund, meta);
    expect(victimCall.isError).toBeUndefined();
    expect(victimCall.structuredContent).toMatchObject({ owner: ownerOf(victim), amount: 25 });
    expect(replayed(victimCall)).toBe(false);
    expect((await pending).structuredContent).toMatchObject({ owner: ownerOf(attacker), amount: 9999 });
    expect(runs).toHaveLength(2);
  });

  it('keeps HTTP callers apart: two sessions and a token never replay each other', async () => {
    const { tool } = refundTool();
    const middleware = createIdempotency({ tools: { create_refund: {} } });
    const runs: string[] = [];
    const callAs = (request: Partial<ToolRequest>) =>
      middleware(createTestContext({ tool, args: refund, request }), async () => {
        const who = JSON.stringify([request?.sessionId ?? null, request?.authInfo?.clientId ?? null]);
        runs.push(who);
        return ok({ who });
      });
    const http = { headers: {} };
    const who = [
      { ...http, sessionId: 's-1' },
      { ...http, sessionId: 's-2' },
      { ...http, authInfo: tokenOf('portal', {}) },
      { ...http, sessionId: 's-1', authInfo: tokenOf('other', {}) },
    ];
    for (const request of who) expect(replayed(await callAs(request))).toBe(false);
    for (const request of who) expect(replayed(await callAs(request))).toBe(true);
    expect(new Set(runs).size).toBe(who.length);
    expect(runs).toHaveLength(who.length);
  });

  it('lets nothing be replayed after windowMs (memory store)', async () => {
    const { tool, runs } = refundTool();
    const client = await serveTools([tool], {
      middleware: [
        createIdempotency({ store: createMemoryStore(), tools: { create_refund: { windowMs: 100 } } }),
      ],
      authInfo: tokenOf('desk', { iss: ISS, sub: 'alice' }),
    });
    open.push(client);
    await client.callTool('create_refund', refund);
    await new Promise((resolve) => setTimeout(resolve, 150));
    const later = await client.callTool('create_refund', refund);
    expect(replayed(later)).toBe(false);
    expect(runs).toHaveLength(2);
  });
});

describe('idempotency red team: a flood of new keys cannot push out another caller’s result (memory store)', () => {
  const FULL = {
    ok: false,
    error: 'rate_limited',
    message: 'The server is keeping track of too many calls right now, so it did not run this one.',
    hint: 'Nothing was done. Finish or wait for your earlier calls before making new ones, then retry this one.',
    retryable: true,
  };
  // The attacker's own scope fills first (maxEntriesPerScope), or the whole store does (maxEntries,
  // which many identities of one tenant could reach). Either way: fail closed, even with 'open'.
  const limits = [
    { name: 'its own scope', store: { maxEntriesPerScope: 5 }, full: 'scope', attackers: 1 },
    { name: 'the whole store', store: { maxEntries: 6, maxEntriesPerScope: 3 }, full: 'store', attackers: 2 },
  ] as const;
  for (const limit of limits) {
    it(`an attacker who fills ${limit.name} is refused rate_limited, unrun; the victim’s retry still replays`, async () => {
      const { tool, runs } = refundTool();
      const decisions: PolicyDecision[][] = [];
      const logs: LogEntry[] = [];
      const middleware: ToolMiddleware[] = [
        async (ctx, next) => {
          try {
            return await next();
          } finally {
            decisions.push([...ctx.decisions]);
          }
        },
        createIdempotency({
          store: createMemoryStore(limit.store),
          onStoreFailure: 'open',
          tools: { create_refund: {} },
        }),
      ];
      const connect = async (authInfo: AuthInfo) => {
        const client = await serveTools([tool], { middleware, authInfo, logger: recordingLogger(logs) });
        open.push(client);
        return client;
      };
      const victim = tokenOf('desk', { iss: ISS, sub: 'victim' });
      const first = await (await connect(victim)).callTool('create_refund', refund);
      expect(first.structuredContent).toMatchObject({ refund_id: 'R-1', owner: ownerOf(victim) });

      // Each attacker floods with new keys (new arguments, or new explicit keys) until refused.
      const attackers = Array.from({ length: limit.attackers }, (_, i) =>
        tokenOf('desk', { iss: ISS, sub: `mallory-${i}` }),
      );
      const refusals: CallToolResult[] = [];
      let ran = 0;
      for (const [a, attacker] of attackers.entries()) {
        const client = await connect(attacker);
        for (let i = 0; i < 10; i += 1) {
          const meta = i % 2 === 0 ? undefined : { meta: { 'toolgate/idempotency-key': `flood-${a}-${i}` } };
          const result = await client.callTool('create_refund', { order_id: `M-${i}`, amount: 1 }, meta);
          if (result.isError === true) refusals.push(result);
          else ran += 1;
        }
      }
      // Five ran: the attacker's scope holds five; or three in the first attacker's scope, then two
      // more until the store holds six with the victim's. Nothing else ran.
      expect(ran).toBe(5);
      expect(refusals).toHaveLength(10 * limit.attackers - ran);
      for (const refusal of refusals) expect(expectFailure(refusal)).toEqual(FULL);
      expect(runs).toHaveLength(1 + ran);
      expect(decisions.at(-1)).toEqual([
        {
          by: 'idempotency',
          action: 'refused',
          reason: 'store full',
          detail: { key: expect.any(String), full: limit.full },
        },
      ]);
      expect(logs.map((entry) => entry.message)).toContain(
        `idempotency: the store is full (setIfAbsent, ${limit.full === 'scope' ? 'per scope' : 'in total'}); calls that need a new key are refused rate_limited`,
      );

      // The victim's retry replays its own stored result: its refund ran exactly once.
      const again = await (await connect(victim)).callTool('create_refund', refund);
      expect(again.structuredContent).toEqual(first.structuredContent);
      expect(replayed(again)).toBe(true);
      expect(runs.filter((owner) => owner === ownerOf(victim))).toHaveLength(1);
    });
  }
});

if (TEST_REDIS_URL === undefined) {
  reportRedisMissing('the idempotency red team on a shared Redis');
} else {
  const url = TEST_REDIS_URL;
  describe('idempotency red team: callers never share claims or results (replicas on one Redis)', () => {
    const prefix = `toolgate-redteam:${randomUUID()}:`;
    let redis!: Redis;
    beforeAll(async () => {
      redis = createRedisClient(url);
      await redisReady(redis);
    });
    afterAll(async () => {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      await redis.quit();
    });

    for (const [name, a, b] of PAIRS) {
      it(`keeps apart across replicas (the same explicit key): ${name}`, async () => {
        const own = `${prefix}${randomUUID()}:`;
        expectApart(
          await attackPair(a, b, { store: () => createRedisStore(redis, { prefix: own }), key: 'k' }),
          a,
          b,
        );
      });
    }

    it('an attacker polling on another replica never gets the victim’s running call’s result', async () => {
      const own = `${prefix}poll:`;
      const { tool, runs } = refundTool({ delayMs: 150 });
      const victim = tokenOf('desk', { iss: 'https://idp-a.example', sub: 'alice' });
      const attacker = tokenOf('desk', { iss: 'https://idp-b.example', sub: 'alice' });
      const replica = () =>
        createIdempotency({
          store: createRedisStore(redis, { prefix: own }),
          pollIntervalMs: 10,
          tools: { create_refund: {} },
        });
      const a = await serveTools([tool], { middleware: [replica()], authInfo: victim });
      const b = await serveTools([tool], { middleware: [replica()], authInfo: attacker });
      open.push(a, b);
      const meta = { meta: { 'toolgate/idempotency-key': 'same' } };
      const [ra, rb] = await Promise.all([
        a.callTool('create_refund', refund, meta),
        new Promise((resolve) => setTimeout(resolve, 20)).then(() =>
          b.callTool('create_refund', refund, meta),
        ),
      ]);
      expect(ra.structuredContent).toMatchObject({ owner: ownerOf(victim) });
      expect(rb.structuredContent).toMatchObject({ owner: ownerOf(attacker) });
      expect(replayed(rb)).toBe(false);
      expect(runs).toHaveLength(2);
      // One key per caller, each under its own hash tag.
      const keys = await redis.keys(`${own}*`);
      expect(keys).toHaveLength(2);
      const tags = keys.map((key) => /^.*idem:\{([\w-]{22})\}:[\w-]{43}$/.exec(key)?.[1]);
      expect(new Set(tags).size).toBe(2);
    });

    it('explicit keys with CRLF, globs and braces are hashed: fixed-size keys, no injection, no glob match', async () => {
      const own = `${prefix}inject:`;
      const { tool, runs } = refundTool();
      const client = await serveTools([tool], {
        middleware: [
          createIdempotency({
            store: createRedisStore(redis, { prefix: own }),
            tools: { create_refund: {} },
          }),
        ],
        authInfo: tokenOf('desk', { iss: ISS, sub: 'x}\r\nFLUSHALL\r\n{*' }),
      });
      open.push(client);
      const hostile = ['*', '?', '[a-z]*', '}{', 'a\r\nDEL *\r\n', `idem:{x}:*`];
      for (const key of hostile) {
        const result = await client.callTool('create_refund', refund, { meta: { idempotencyKey: key } });
        expect(replayed(result)).toBe(false);
      }
      expect(runs).toHaveLength(hostile.length);
      const keys = await redis.keys(`${own}*`);
      expect(keys).toHaveLength(hostile.length);
      for (const key of keys) expect(key).toMatch(new RegExp(`^${own}idem:\\{[\\w-]{22}\\}:[\\w-]{43}$`));
      expect(await redis.ping()).toBe('PONG');
    });

    it('lets nothing be replayed after windowMs: Redis expires the result', async () => {
      const own = `${prefix}ttl:`;
      const { tool, runs } = refundTool();
      const client = await serveTools([tool], {
        middleware: [
          createIdempotency({
            store: createRedisStore(redis, { prefix: own }),
            tools: { create_refund: { windowMs: 300 } },
          }),
        ],
        authInfo: tokenOf('desk', { iss: ISS, sub: 'alice' }),
      });
      open.push(client);
      await client.callTool('create_refund', refund);
      const [key] = await redis.keys(`${own}*`);
      const ttl = await redis.pttl(key!);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(300);
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(await redis.exists(key!)).toBe(0);
      expect(replayed(await client.callTool('create_refund', refund))).toBe(false);
      expect(runs).toHaveLength(2);
    });
  });
}
