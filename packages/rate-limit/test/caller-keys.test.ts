import { randomUUID } from 'node:crypto';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { defineTool, ok, type ToolDefinition, ToolError } from '@toolgate/core';
import { expectFailure, reportMissingService, serveTools, type TestClient } from '@toolgate/core/testing';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRateLimit, type RateLimitOptions } from '../src/index.js';
import { closeAll, runs, serve, TOOLS } from './fixtures.js';

// Who a limit counts: core's caller identity plus the tool's bindings, nothing the model or the
// transport varies per call (session, a refreshed token, the spelling of a tool name).

const open: TestClient[] = [];
beforeEach(() => runs.clear());
afterEach(async () => {
  await closeAll();
  await Promise.all(open.splice(0).map((client) => client.close()));
});

/** A token with a subject, as a verifier that keeps the claims would pass it on. */
function subjectToken(token: string, claims: Record<string, unknown>): AuthInfo {
  return {
    token,
    clientId: 'portal',
    scopes: ['orders:read'],
    extra: { iss: 'https://idp.example', ...claims },
  };
}

/** Two customers' tokens of one client, which a client-only identity rule cannot tell apart. */
function portalToken(customerId: number): AuthInfo {
  return { token: `token-${customerId}`, clientId: 'portal', scopes: ['orders:read'], extra: { customerId } };
}

const clientOnly = () => ({ id: 'client:portal', kind: 'client' as const, clientId: 'portal' });

/** A customer-scoped tool: the customer comes from the token (a binding), never from the model. */
function myOrdersTool(invocations: Map<number, number>): ToolDefinition {
  return defineTool({
    name: 'list_my_orders',
    description: 'The calling customer’s orders.',
    input: { status: z.enum(['open', 'shipped']) },
    bind: (request) => {
      const customerId = request.authInfo?.extra?.customerId;
      if (typeof customerId !== 'number') throw new ToolError('permission_denied', 'No customer bound.');
      return { customerId };
    },
    handler: async (_args, ctx) => {
      const customerId = ctx.bindings.customerId as number;
      invocations.set(customerId, (invocations.get(customerId) ?? 0) + 1);
      return ok({ customerId });
    },
  }) as ToolDefinition;
}

async function twoCustomers(options: RateLimitOptions) {
  const invocations = new Map<number, number>();
  const tools = [myOrdersTool(invocations)];
  // ONE limiter shared by two connections, as one replica serves many.
  const limiter = createRateLimit(options);
  const connect = async (customerId: number) => {
    const client = await serveTools(tools, {
      middleware: [limiter],
      authInfo: portalToken(customerId),
      identify: clientOnly,
    });
    open.push(client);
    return client;
  };
  return { invocations, c42: await connect(42), c43: await connect(43) };
}

describe('rate-limit: who a caller is', () => {
  it('counts one person as one caller across sessions, refreshed tokens and a tool name spelled in another case', async () => {
    const limiter = createRateLimit({ limits: [{ per: 'caller', points: 3, duration: '1h' }] });
    const morning = await serve([limiter], {
      authInfo: subjectToken('t-1', { sub: 'user-7', iat: 1, exp: 3601, jti: 'a' }),
    });
    const refreshed = await serveTools(TOOLS, {
      middleware: [limiter],
      sessionId: 'another-session',
      authInfo: subjectToken('t-2', { sub: 'user-7', iat: 3600, exp: 7200, jti: 'b' }),
    });
    open.push(refreshed);
    expect((await morning.callTool('search_orders', { q: 'a' })).isError).toBeUndefined();
    expect((await morning.callTool('get_order_status')).isError).toBeUndefined();
    // An unknown spelling is refused by core (-32602) and still spends the caller's budget.
    await expect(refreshed.callTool('SEARCH_ORDERS', { q: 'a' })).rejects.toThrow(/-32602/);
    const refused = expectFailure(await morning.callTool('search_orders', { q: 'b' }));
    expect(refused.error).toBe('rate_limited');
    expect(runs.get('search_orders')).toBe(1);
  });

  it('keeps two customers behind one identity apart by their bound values', async () => {
    const { invocations, c42, c43 } = await twoCustomers({
      limits: [{ per: 'caller', points: 2, duration: '1h' }],
    });
    for (let i = 0; i < 2; i += 1) {
      expect((await c42.callTool('list_my_orders', { status: 'open' })).isError).toBeUndefined();
    }
    expect(expectFailure(await c42.callTool('list_my_orders', { status: 'open' })).error).toBe(
      'rate_limited',
    );
    for (let i = 0; i < 2; i += 1) {
      expect((await c43.callTool('list_my_orders', { status: 'open' })).isError).toBeUndefined();
    }
    expect(expectFailure(await c43.callTool('list_my_orders', { status: 'open' })).error).toBe(
      'rate_limited',
    );
    expect(Object.fromEntries(invocations)).toEqual({ 42: 2, 43: 2 });
  });

  it('never names another caller, a key or a hash in a refusal', async () => {
    const { c42 } = await twoCustomers({
      limits: [{ name: 'per-customer', per: 'caller-tool', points: 1, duration: '1m' }],
    });
    await c42.callTool('list_my_orders', { status: 'open' });
    const refused = await c42.callTool('list_my_orders', { status: 'open' });
    const envelope = expectFailure(refused);
    expect(envelope).toEqual({
      ok: false,
      error: 'rate_limited',
      message: 'Rate limit reached: 1 call per minute for your account on list_my_orders.',
      hint: expect.stringMatching(/^Wait 60 s \(retryAfterMs\) before calling list_my_orders again\. /),
      retryable: true,
      retryAfterMs: envelope.retryAfterMs,
    });
    expect(Object.keys(refused._meta ?? {}).sort()).toEqual(['toolgate/error', 'toolgate/rate-limit']);
    const text = JSON.stringify(refused);
    for (const internal of ['client:portal', 'customerId', 'tg:rl']) expect(text).not.toContain(internal);
  });
});

const REDIS_URL = process.env.TEST_REDIS_URL;

if (REDIS_URL === undefined) {
  reportMissingService(
    it,
    'rate-limit caller keys on a shared Redis',
    'TEST_REDIS_URL',
    'redis://127.0.0.1:6379',
  );
} else {
  const url = REDIS_URL;
  describe('rate-limit: caller keys on a shared Redis', () => {
    const keyPrefix = `tg:rl-test-callers:${randomUUID()}`;
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

    afterAll(async () => {
      const admin = clients[0];
      if (admin !== undefined) {
        const keys = await admin.keys(`${keyPrefix}:*`);
        if (keys.length > 0) await admin.del(...keys);
      }
      for (const client of clients.splice(0)) client.disconnect();
    });

    it('gives two customers behind one identity their own count and their own hash tag, even for 40 parallel calls', async () => {
      const admin = await redisClient();
      const { invocations, c42, c43 } = await twoCustomers({
        limits: [{ name: 'per-customer', per: 'caller', points: 5, duration: '1m' }],
        keyPrefix,
        store: { redis: admin },
      });
      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          (i % 2 === 0 ? c42 : c43).callTool('list_my_orders', { status: 'open' }),
        ),
      );
      expect(results.filter((result) => result.isError !== true)).toHaveLength(10);
      expect(Object.fromEntries(invocations)).toEqual({ 42: 5, 43: 5 });
      const keys = await admin.keys(`${keyPrefix}:*`);
      expect(keys).toHaveLength(2);
      const tags = keys.map((key) => /^.*:\{([A-Za-z0-9_-]{22})\}:per-customer$/.exec(key)?.[1]);
      expect(new Set(tags).size).toBe(2);
      for (const key of keys) expect(await admin.get(key)).toBe('20');
    });
  });
}
