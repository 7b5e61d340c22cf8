import { randomUUID } from 'node:crypto';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { defineTool, ok, type ToolDefinition, type ToolRequest } from '@toolgate/core';
import {
  createTestContext,
  expectFailure,
  reportMissingService,
  serveTools,
  type TestClient,
} from '@toolgate/core/testing';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createRateLimit, type RateLimitOptions } from '../src/index.js';
import { runs, TOOLS } from './fixtures.js';

// Red team: one tenant must never drain, share or poison another tenant's per-caller budget, whatever
// its token claims look like, with refused or unknown calls, in one process or across replicas on Redis.
// Each attack: the attacker spends its whole per-caller budget (and one more, refused); the victim's
// first call must still run.

const open: TestClient[] = [];
beforeEach(() => runs.clear());
afterEach(async () => {
  await Promise.all(open.splice(0).map((client) => client.close()));
});

function tokenOf(clientId: string, extra: Record<string, unknown>, scopes: string[] = []): AuthInfo {
  return { token: `t-${randomUUID()}`, clientId, scopes, extra };
}

async function connect(limiter: ReturnType<typeof createRateLimit>, authInfo: AuthInfo | undefined) {
  const client = await serveTools(TOOLS, {
    middleware: [limiter],
    ...(authInfo === undefined ? {} : { authInfo }),
  });
  open.push(client);
  return client;
}

/** The attacker drains a per-caller budget of 2; the victim must still get its own 2. */
async function drainThenVictim(
  attacker: AuthInfo | undefined,
  victim: AuthInfo | undefined,
  limiters: () => ReturnType<typeof createRateLimit>,
) {
  const a = await connect(limiters(), attacker);
  const v = await connect(limiters(), victim);
  for (let i = 0; i < 2; i += 1)
    expect((await a.callTool('search_orders', { q: 'x' })).isError).toBeUndefined();
  expect(expectFailure(await a.callTool('search_orders', { q: 'x' })).error).toBe('rate_limited');
  for (let i = 0; i < 2; i += 1)
    expect((await v.callTool('search_orders', { q: 'x' })).isError).toBeUndefined();
  // The victim's own budget is its own: its third call is refused.
  expect(expectFailure(await v.callTool('search_orders', { q: 'x' })).error).toBe('rate_limited');
  expect(runs.get('search_orders')).toBe(4);
}

const ISS = 'https://idp.example';
const proto = JSON.parse('{"__proto__":{"tenant":"acme"},"org":"o"}') as Record<string, unknown>;

const PAIRS: [string, AuthInfo | undefined, AuthInfo | undefined][] = [
  [
    'two issuers, one subject',
    tokenOf('desk', { iss: 'https://idp-b.example', sub: 'alice' }),
    tokenOf('desk', { iss: 'https://idp-a.example', sub: 'alice' }),
  ],
  [
    'a | moved between issuer and subject',
    tokenOf('desk', { iss: 'https://a.example', sub: 'x|y' }),
    tokenOf('desk', { iss: 'https://a.example|x', sub: 'y' }),
  ],
  [
    'a numeric subject against its string',
    tokenOf('desk', { iss: ISS, sub: 1 }),
    tokenOf('desk', { iss: ISS, sub: '1' }),
  ],
  ['a tenant claim 1 against "1"', tokenOf('portal', { tenant: 1 }), tokenOf('portal', { tenant: '1' })],
  [
    'a tenant array against its joined string',
    tokenOf('portal', { tenant: ['a', 'b'] }),
    tokenOf('portal', { tenant: 'a,b' }),
  ],
  ['an empty-string claim against none', tokenOf('portal', { tenant: '' }), tokenOf('portal', {})],
  [
    'unicode NFD against NFC',
    tokenOf('desk', { iss: ISS, sub: 'jose\u0301' }),
    tokenOf('desk', { iss: ISS, sub: 'jos\u00e9' }),
  ],
  ['a __proto__ claim against none', tokenOf('portal', proto), tokenOf('portal', { org: 'o' })],
  [
    'very long subjects differing in the last character',
    tokenOf('desk', { iss: ISS, sub: `${'x'.repeat(20_000)}b` }),
    tokenOf('desk', { iss: ISS, sub: `${'x'.repeat(20_000)}a` }),
  ],
  [
    'a client id with # against one whose claims hold it',
    tokenOf('portal#x', {}),
    tokenOf('portal', { '#': 'x' }),
  ],
  ['a token against stdio without auth (local)', tokenOf('portal', {}), undefined],
  [
    'a subject spelled "anonymous" against stdio (local)',
    tokenOf('desk', { iss: ISS, sub: 'anonymous' }),
    undefined,
  ],
];

const perCaller: RateLimitOptions = {
  limits: [{ name: 'per-caller', per: 'caller', points: 2, duration: '1h' }],
};

describe('rate-limit red team: one tenant never drains another’s budget (memory)', () => {
  for (const [name, attacker, victim] of PAIRS) {
    it(`keeps budgets apart: ${name}`, async () => {
      await drainThenVictim(
        attacker,
        victim,
        (() => {
          const limiter = createRateLimit(perCaller);
          return () => limiter;
        })(),
      );
    });
  }

  it('per caller and tool: draining one tool spends neither the victim’s budget on it nor the attacker’s on another tool', async () => {
    const limiter = createRateLimit({
      limits: [{ name: 'per-caller-tool', per: 'caller-tool', points: 1, duration: '1h' }],
    });
    const attacker = await connect(limiter, tokenOf('desk', { iss: 'https://idp-b.example', sub: 'alice' }));
    const victim = await connect(limiter, tokenOf('desk', { iss: 'https://idp-a.example', sub: 'alice' }));
    await attacker.callTool('search_orders', {});
    expect(expectFailure(await attacker.callTool('search_orders', {})).error).toBe('rate_limited');
    expect((await attacker.callTool('get_order_status', {})).isError).toBeUndefined();
    expect((await victim.callTool('search_orders', {})).isError).toBeUndefined();
    expect((await victim.callTool('get_order_status', {})).isError).toBeUndefined();
  });

  it('invented tool names and refused arguments spend only the attacker’s own budget, never a tool’s shared one', async () => {
    const limiter = createRateLimit({
      limits: [
        { name: 'per-caller', per: 'caller', points: 48, duration: '1h' },
        { name: 'per-tool', per: 'tool', points: 3, duration: '1h' },
      ],
    });
    const attacker = await connect(limiter, tokenOf('desk', { iss: ISS, sub: 'mallory' }));
    const victim = await connect(limiter, tokenOf('desk', { iss: ISS, sub: 'alice' }));
    for (let i = 0; i < 16; i += 1) {
      await expect(attacker.callTool('search_orders\u0000', { q: 'x' })).rejects.toThrow(/-32602/);
      await expect(attacker.callTool('SEARCH_ORDERS', { q: 'x' })).rejects.toThrow(/-32602/);
      expect(expectFailure(await attacker.callTool('search_orders', { q: 'x'.repeat(21) })).error).toBe(
        'invalid_argument',
      );
    }
    // 48 refused calls: the attacker has spent its own 48, the tool's shared 3 untouched.
    expect(expectFailure(await attacker.callTool('search_orders', { q: 'x' })).error).toBe('rate_limited');
    for (let i = 0; i < 3; i += 1)
      expect((await victim.callTool('search_orders', { q: 'x' })).isError).toBeUndefined();
    expect(expectFailure(await victim.callTool('search_orders', { q: 'x' })).error).toBe('rate_limited');
  });

  it('keeps HTTP callers apart: two sessions without auth, and a token, each have their own budget', async () => {
    const limiter = createRateLimit({ limits: [{ per: 'caller', points: 1, duration: '1h' }] });
    const tool = TOOLS[0]!;
    const call = (request: Partial<ToolRequest>) =>
      limiter(createTestContext({ tool, args: {}, request }), async () => ok({}));
    const http = { headers: {} };
    const who = [
      { ...http, sessionId: 's-1' },
      { ...http, sessionId: 's-2' },
      { ...http, authInfo: tokenOf('portal', {}) },
      { ...http, sessionId: 's-1', authInfo: tokenOf('other', {}) },
    ];
    for (const request of who) expect((await call(request)).isError).toBeUndefined();
    for (const request of who) expect((await call(request)).isError).toBe(true);
  });

  it('keeps tenants behind one bound value type apart: a customer bound as "1" and as 1', async () => {
    const ran: unknown[] = [];
    const tool = defineTool({
      name: 'my_orders',
      description: 'The bound customer’s orders.',
      input: {},
      bind: (request) => ({ customerId: request.authInfo?.extra?.customer_id }),
      handler: async (_args, ctx) => {
        ran.push(ctx.bindings.customerId);
        return ok({});
      },
    }) as ToolDefinition;
    const limiter = createRateLimit({ limits: [{ per: 'caller', points: 1, duration: '1h' }] });
    const identify = () => ({ id: 'client:portal', kind: 'client' as const, clientId: 'portal' });
    const a = await serveTools([tool], {
      middleware: [limiter],
      identify,
      authInfo: tokenOf('portal', { customer_id: 1 }),
    });
    const b = await serveTools([tool], {
      middleware: [limiter],
      identify,
      authInfo: tokenOf('portal', { customer_id: '1' }),
    });
    open.push(a, b);
    expect((await a.callTool('my_orders', {})).isError).toBeUndefined();
    expect(expectFailure(await a.callTool('my_orders', {})).error).toBe('rate_limited');
    expect((await b.callTool('my_orders', {})).isError).toBeUndefined();
    expect(ran).toEqual([1, '1']);
  });
});

const REDIS_URL = process.env.TEST_REDIS_URL;

if (REDIS_URL === undefined) {
  reportMissingService(
    it,
    'rate-limit red team on a shared Redis',
    'TEST_REDIS_URL',
    'redis://127.0.0.1:6379',
  );
} else {
  const url = REDIS_URL;
  describe('rate-limit red team: one tenant never drains another’s budget (replicas on one Redis)', () => {
    const base = `tg:rl-redteam:${randomUUID()}`;
    const clients: Redis[] = [];
    const redisClient = async (): Promise<Redis> => {
      const client = new Redis(url, {
        enableOfflineQueue: false,
        protocol: 2,
        maxRetriesPerRequest: 1,
        socketTimeout: 2000,
      });
      clients.push(client);
      if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
      return client;
    };
    let admin!: Redis;
    beforeAll(async () => {
      admin = await redisClient();
    });
    afterAll(async () => {
      const keys = await admin.keys(`${base}*`);
      if (keys.length > 0) await admin.del(...keys);
      for (const client of clients.splice(0)) client.disconnect();
    });

    for (const [name, attacker, victim] of PAIRS) {
      it(`keeps budgets apart across replicas: ${name}`, async () => {
        const keyPrefix = `${base}:${randomUUID()}`;
        const redis = await redisClient();
        await drainThenVictim(attacker, victim, () =>
          createRateLimit({ ...perCaller, keyPrefix, store: { redis } }),
        );
      });
    }

    it('keys carry no claim text (CRLF, globs, braces): a fixed hash tag per caller, and they expire with the window', async () => {
      const keyPrefix = `${base}:inject`;
      const redis = await redisClient();
      const limiter = createRateLimit({
        limits: [
          { name: 'per-caller', per: 'caller', points: 5, duration: 2 },
          { name: 'per-caller-tool', per: 'caller-tool', points: 5, duration: 2 },
        ],
        keyPrefix,
        store: { redis },
      });
      const hostile = tokenOf('x}\r\n*\r\n{', { iss: 'https://a}{b', sub: '}\r\nFLUSHALL\r\n{*?[a]' });
      const client = await connect(limiter, hostile);
      expect((await client.callTool('search_orders', {})).isError).toBeUndefined();
      const keys = (await admin.keys(`${keyPrefix}:*`)).sort();
      expect(keys).toHaveLength(2);
      expect(keys[0]).toMatch(new RegExp(`^${keyPrefix}:\\{[A-Za-z0-9_-]{22}\\}:per-caller$`));
      expect(keys[1]).toMatch(
        new RegExp(`^${keyPrefix}:\\{[A-Za-z0-9_-]{22}\\}:per-caller-tool:search_orders$`),
      );
      for (const key of keys) {
        const ttl = await admin.pttl(key);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(2000);
      }
      expect(await admin.ping()).toBe('PONG');
    });
  });
}
