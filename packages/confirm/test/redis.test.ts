import { randomUUID } from 'node:crypto';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { isStoreFullError } from '@toolgate/core';
import { expectFailure, serveTools } from '@toolgate/core/testing';
import { createRedisClient, createRedisStore, redisReady } from '@toolgate/redis-store';
import { fillRedis, type OwnRedisServer, startOwnRedis } from '@toolgate/redis-store/testing';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFIRM_META, createConfirm } from '../src/index.js';
import { authAs, refundTool, SECRET, sleep } from './fixtures.js';
import { reportRedisMissing, TEST_REDIS_URL } from './needs-redis.js';

if (TEST_REDIS_URL === undefined) {
  reportRedisMissing('the confirmation tests across two servers sharing Redis');
} else {
  const url = TEST_REDIS_URL;
  describe('confirm across two servers sharing Redis', () => {
    const prefix = `toolgate-test:${randomUUID()}:`;
    let clients: Redis[] = [];
    beforeAll(async () => {
      clients = [createRedisClient(url), createRedisClient(url)];
      await Promise.all(clients.map((client) => redisReady(client)));
    });
    afterAll(async () => {
      const keys = await clients[0]!.keys(`${prefix}*`);
      if (keys.length > 0) await clients[0]!.del(...keys);
      await Promise.all(clients.map((client) => client.quit()));
    });

    it('a confirmation issued by one replica works once on any replica', async () => {
      const { tool, runs } = refundTool();
      const servers = await Promise.all(
        clients.map((redis) =>
          serveTools([tool], {
            middleware: [
              createConfirm({
                secret: SECRET,
                audience: 'orders',
                store: createRedisStore(redis, { prefix }),
                tools: { create_refund: {} },
              }),
            ],
          }),
        ),
      );
      try {
        const refund = { order_id: 'A-1', amount: 25 };
        const first = await servers[0]!.callTool('create_refund', refund);
        const { confirmation } = (first._meta?.[CONFIRM_META] ?? {}) as { confirmation: string };
        // Issued: held under the server's audience, in the caller's hash tag under its nonce, for its 5
        // minutes plus a minute.
        const nonce = confirmation.split('.')[2];
        const keys = await clients[0]!.keys(`${prefix}*`);
        expect(keys).toEqual([
          expect.stringMatching(new RegExp(`^${prefix}confirm:orders:issued:\\{[\\w-]{22}\\}:${nonce}$`)),
        ]);
        const ttl = await clients[0]!.pttl(keys[0]!);
        expect(ttl).toBeGreaterThan(350_000);
        expect(ttl).toBeLessThanOrEqual(360_000);
        const results = await Promise.all(
          Array.from({ length: 6 }, (_, i) =>
            servers[i % 2]!.callTool('create_refund', { ...refund, confirmation }),
          ),
        );
        expect(runs.count).toBe(1);
        expect(results.filter((result) => result.isError !== true)).toHaveLength(1);
        // Used: nothing is left behind.
        expect(await clients[0]!.keys(`${prefix}*`)).toEqual([]);
      } finally {
        await Promise.all(servers.map((server) => server.close()));
      }
    });

    it('URL mode: url.maxOpenPerCaller holds across replicas; a confirmation that ends frees its slot on every one', async () => {
      const { tool, runs } = refundTool();
      const [here, there] = clients.map((redis) =>
        createConfirm({
          secret: SECRET,
          audience: 'orders',
          store: createRedisStore(redis, { prefix }),
          tools: { create_refund: {} },
          url: { build: ({ id }) => `https://orders.test/confirm/${id}`, pollMs: 25, maxOpenPerCaller: 2 },
        }),
      );
      // The page's id per order, as the client was sent there.
      const opened = new Map<string, string>();
      const idFor = async (order: string): Promise<string> => {
        for (let waited = 0; !opened.has(order) && waited < 5000; waited += 10) await sleep(10);
        return opened.get(order)!;
      };
      const serve = (confirm: typeof here, subject: string) =>
        serveTools([tool], {
          middleware: [confirm!],
          authInfo: authAs(subject),
          elicitUrl: true,
          onElicit: (params) => {
            const { elicitationId, message } = params as { elicitationId: string; message: string };
            opened.set(/order_id: "([^"]+)"/.exec(message)![1]!, elicitationId);
            return { action: 'accept' };
          },
        });
      const servers = [await serve(here, 'alice'), await serve(there, 'alice'), await serve(there, 'bob')];
      const [aliceHere, aliceThere, bob] = servers as [
        (typeof servers)[0],
        (typeof servers)[0],
        (typeof servers)[0],
      ];
      try {
        const first = aliceHere.callTool('create_refund', { order_id: 'A-1', amount: 1 });
        const second = aliceThere.callTool('create_refund', { order_id: 'A-2', amount: 2 });
        const [firstId, secondId] = [await idFor('A-1'), await idFor('A-2')];
        // One waits on each replica: a third is refused on either, before the client is asked.
        for (const server of [aliceHere, aliceThere]) {
          const refused = expectFailure(
            await server.callTool('create_refund', { order_id: 'A-3', amount: 3 }),
          );
          expect(refused).toMatchObject({ error: 'rate_limited', retryable: true });
          expect(refused.message).toBe(
            'Too many of your calls are waiting for the user on the confirmation page; nothing was done.',
          );
        }
        expect(opened.has('A-3')).toBe(false);
        // Another caller is not held back by alice's.
        const bobs = bob.callTool('create_refund', { order_id: 'B-1', amount: 1 });
        expect(await here!.answer(await idFor('B-1'), { approve: true, principal: 'bob' })).toBe('recorded');
        expect((await bobs).structuredContent).toEqual({ ok: true, refund_id: 'R-1' });

        // The page on the other replica declines the first: its slot is free again on both.
        expect(await there!.answer(firstId, { approve: false, principal: 'alice' })).toBe('recorded');
        expect(expectFailure(await first).error).toBe('permission_denied');
        const third = aliceHere.callTool('create_refund', { order_id: 'A-3', amount: 3 });
        expect(await there!.answer(await idFor('A-3'), { approve: true, principal: 'alice' })).toBe(
          'recorded',
        );
        expect((await third).structuredContent).toEqual({ ok: true, refund_id: 'R-2' });
        expect(await here!.answer(secondId, { approve: true, principal: 'alice' })).toBe('recorded');
        expect((await second).structuredContent).toEqual({ ok: true, refund_id: 'R-3' });
        expect(runs.args).toEqual([
          { order_id: 'B-1', amount: 1 },
          { order_id: 'A-3', amount: 3 },
          { order_id: 'A-2', amount: 2 },
        ]);

        // No slot is held any more; each confirmation's mark outlives its keys under the id (by a minute).
        const held = await clients[0]!.keys(`${prefix}confirm:orders:url-*`);
        expect(held.map((key) => key.replace(/\{[\w-]{22}\}:[\w-]{22}$/, '{tag}:id')).sort()).toEqual(
          Array.from({ length: 4 }, () => `${prefix}confirm:orders:url-open:{tag}:id`),
        );
        for (const key of held) {
          const ttl = await clients[0]!.pttl(key);
          expect(ttl).toBeGreaterThan(120_000);
          expect(ttl).toBeLessThanOrEqual(180_000);
        }
      } finally {
        await Promise.all(servers.map((server) => server.close()));
      }
    });

    it('URL mode: the page served by another replica answers the call waiting on this one', async () => {
      const { tool, runs } = refundTool();
      const [here, there] = clients.map((redis) =>
        createConfirm({
          secret: SECRET,
          audience: 'orders',
          store: createRedisStore(redis, { prefix }),
          tools: { create_refund: {} },
          url: { build: ({ id }) => `https://orders.test/confirm/${id}`, pollMs: 25 },
        }),
      );
      const seen: unknown[] = [];
      const server = await serveTools([tool], {
        middleware: [here!],
        authInfo: authAs('alice'),
        elicitUrl: true,
        onElicit: (params) => {
          const { elicitationId: id } = params as { elicitationId: string };
          void (async () => {
            await sleep(60);
            seen.push((await there!.pending(id, 'alice'))?.tool);
            seen.push(await there!.answer(id, { approve: true, principal: 'mallory' }));
            seen.push(await there!.answer(id, { approve: true, principal: 'alice' }));
            seen.push(await here!.answer(id, { approve: false, principal: 'alice' }));
          })();
          return { action: 'accept' };
        },
      });
      try {
        const result = await server.callTool('create_refund', { order_id: 'A-1', amount: 25 });
        expect(result.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
        expect(runs.count).toBe(1);
        for (let waited = 0; seen.length < 4 && waited < 5000; waited += 10) await sleep(10);
        expect(seen).toEqual(['create_refund', 'forbidden', 'recorded', 'already answered']);
      } finally {
        await server.close();
      }
    });

    it('staging and production sharing the secret and Redis: each takes only its own confirmations', async () => {
      const { tool, runs } = refundTool();
      const [staging, production] = await Promise.all(
        (['orders-staging', 'orders-prod'] as const).map((audience, i) =>
          serveTools([tool], {
            middleware: [
              createConfirm({
                secret: SECRET,
                audience,
                store: createRedisStore(clients[i]!, { prefix }),
                tools: { create_refund: {} },
              }),
            ],
            authInfo: authAs('alice'),
          }),
        ),
      );
      const confirmationOf = (result: CallToolResult): string =>
        ((result._meta?.[CONFIRM_META] ?? {}) as { confirmation: string }).confirmation;
      const mismatch = {
        error: 'permission_denied',
        message:
          'This confirmation does not match this call (other arguments, another caller or another tool).',
      };
      try {
        const refund = { order_id: 'A-1', amount: 25 };
        // The person confirmed the refund on staging; the model carries the confirmation to production.
        const stagings = confirmationOf(await staging!.callTool('create_refund', refund));
        const crossed = await production!.callTool('create_refund', { ...refund, confirmation: stagings });
        expect(expectFailure(crossed)).toMatchObject(mismatch);
        const prods = confirmationOf(await production!.callTool('create_refund', refund));
        const back = await staging!.callTool('create_refund', { ...refund, confirmation: prods });
        expect(expectFailure(back)).toMatchObject(mismatch);
        expect(runs.count).toBe(0);
        // Each held under its server's audience (earlier tests' keys are under 'orders').
        const held = await clients[0]!.keys(`${prefix}confirm:orders-*`);
        expect(held.map((key) => key.replace(/\{[\w-]{22}\}:[0-9a-f]{32}$/, '{tag}:nonce')).sort()).toEqual([
          `${prefix}confirm:orders-prod:issued:{tag}:nonce`,
          `${prefix}confirm:orders-staging:issued:{tag}:nonce`,
        ]);
        // Refused elsewhere, not used up: each works once where it was issued.
        const ran = [
          await production!.callTool('create_refund', { ...refund, confirmation: prods }),
          await staging!.callTool('create_refund', { ...refund, confirmation: stagings }),
        ];
        expect(ran.map((result) => result.structuredContent)).toEqual([
          { ok: true, refund_id: 'R-1' },
          { ok: true, refund_id: 'R-2' },
        ]);
        expect(await clients[0]!.keys(`${prefix}confirm:orders-*`)).toEqual([]);
      } finally {
        await Promise.all([staging!.close(), production!.close()]);
      }
    });

    it("URL mode: staging's page, on the same Redis, neither finds nor answers a call waiting on production", async () => {
      const { tool, runs } = refundTool();
      const [staging, production] = (['orders-staging', 'orders-prod'] as const).map((audience, i) =>
        createConfirm({
          secret: SECRET,
          audience,
          store: createRedisStore(clients[i]!, { prefix }),
          tools: { create_refund: {} },
          url: { build: ({ id }) => `https://${audience}.test/confirm/${id}`, pollMs: 25 },
        }),
      );
      const seen: unknown[] = [];
      const server = await serveTools([tool], {
        middleware: [production!],
        authInfo: authAs('alice'),
        elicitUrl: true,
        onElicit: (params) => {
          const { elicitationId: id } = params as { elicitationId: string };
          void (async () => {
            seen.push(await staging!.pending(id, 'alice'));
            seen.push(await staging!.answer(id, { approve: true, principal: 'alice' }));
            seen.push(await staging!.answer(id, { approve: false, principal: 'alice' }));
            seen.push((await production!.pending(id, 'alice'))?.tool);
            seen.push(await production!.answer(id, { approve: true, principal: 'alice' }));
          })();
          return { action: 'accept' };
        },
      });
      try {
        const result = await server.callTool('create_refund', { order_id: 'A-1', amount: 25 });
        expect(result.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
        for (let waited = 0; seen.length < 5 && waited < 5000; waited += 10) await sleep(10);
        expect(seen).toEqual([undefined, 'unknown', 'unknown', 'create_refund', 'recorded']);
        expect(runs.count).toBe(1);
        // Nothing under staging's audience: its page wrote nothing for production's call.
        expect(await clients[0]!.keys(`${prefix}confirm:orders-staging:*`)).toEqual([]);
      } finally {
        await server.close();
      }
    });
  });

  // Losing every key is server-wide: a redis-server of its own, so the shared one keeps its data.
  describe('confirm on a Redis that loses its data (restart without persistence, failover to an empty replica)', () => {
    let own: OwnRedisServer;
    beforeAll(async () => {
      own = await startOwnRedis({ maxmemory: '0' });
    }, 20_000);
    afterAll(async () => {
      await own?.close();
    });

    it('a used confirmation is not accepted again once Redis has forgotten it was used', async () => {
      const { tool, runs } = refundTool();
      const servers = await Promise.all(
        [0, 1].map(() =>
          serveTools([tool], {
            middleware: [
              createConfirm({
                secret: SECRET,
                audience: 'orders',
                store: createRedisStore(own.client, { prefix: 'orders:' }),
                tools: { create_refund: {} },
              }),
            ],
            authInfo: authAs('alice'),
          }),
        ),
      );
      try {
        const refund = { order_id: 'A-1', amount: 25 };
        const first = await servers[0]!.callTool('create_refund', refund);
        const { confirmation } = (first._meta?.[CONFIRM_META] ?? {}) as { confirmation: string };
        const done = await servers[0]!.callTool('create_refund', { ...refund, confirmation });
        expect(done.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });

        // What a restart without persistence leaves: an empty dataset. The model replays on any replica.
        await own.client.flushall();
        for (const server of servers) {
          const replay = expectFailure(await server.callTool('create_refund', { ...refund, confirmation }));
          expect(replay).toMatchObject({
            error: 'permission_denied',
            message: 'This confirmation was already used.',
          });
        }
        expect(runs.count).toBe(1);
      } finally {
        await Promise.all(servers.map((server) => server.close()));
      }
    });
  });

  // maxmemory is server-wide: a redis-server of its own, so the shared one never runs full.
  describe('confirm on a real Redis at its maxmemory (noeviction)', () => {
    let own: OwnRedisServer;
    const prefix = 'confirm-full:';
    beforeAll(async () => {
      own = await startOwnRedis();
    }, 20_000);
    afterAll(async () => {
      await own?.close();
    });

    it('on the full Redis a confirmation issued before is used exactly once; a new one is refused rate_limited, nothing issued', async () => {
      await own.client.config('SET', 'maxmemory', '3mb');
      const { tool, runs } = refundTool();
      const server = await serveTools([tool], {
        middleware: [
          createConfirm({
            secret: SECRET,
            audience: 'orders',
            store: createRedisStore(own.client, { prefix }),
            tools: { create_refund: {} },
          }),
        ],
        authInfo: authAs('alice'),
      });
      try {
        const refund = { order_id: 'A-1', amount: 25 };
        const first = await server.callTool('create_refund', refund);
        expect(expectFailure(first).error).toBe('confirmation_required');
        const { confirmation } = (first._meta?.[CONFIRM_META] ?? {}) as { confirmation: string };
        expect(isStoreFullError(await fillRedis(own.client))).toBe(true);

        // Using a confirmation deletes its key, which a full Redis still does: once, and only once.
        const done = await server.callTool('create_refund', { ...refund, confirmation });
        expect(done.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
        const again = expectFailure(await server.callTool('create_refund', { ...refund, confirmation }));
        expect(again).toMatchObject({
          error: 'permission_denied',
          message: 'This confirmation was already used.',
        });

        // A new confirmation needs a key: refused, and the model is given nothing to carry back.
        const other = { order_id: 'A-2', amount: 5 };
        const refused = await server.callTool('create_refund', other);
        expect(expectFailure(refused)).toMatchObject({ error: 'rate_limited', retryable: true });
        expect(expectFailure(refused).hint).toContain('without a confirmation');
        expect(refused._meta?.[CONFIRM_META]).toBeUndefined();
        expect(await own.client.keys(`${prefix}*`)).toEqual([]);

        await own.client.config('SET', 'maxmemory', '0');
        const asked = await server.callTool('create_refund', other);
        const { confirmation: fresh } = (asked._meta?.[CONFIRM_META] ?? {}) as { confirmation: string };
        const ran = await server.callTool('create_refund', { ...other, confirmation: fresh });
        expect(ran.structuredContent).toEqual({ ok: true, refund_id: 'R-2' });
        expect(runs.count).toBe(2);
      } finally {
        await server.close();
      }
    });

    it('URL mode: Redis fills while the call waits; the page cannot record an approval, the call fails closed and frees its slot', async () => {
      await own.client.config('SET', 'maxmemory', '0');
      await own.client.flushall();
      await own.client.config('SET', 'maxmemory', '3mb');
      const { tool, runs } = refundTool();
      const confirm = createConfirm({
        secret: SECRET,
        audience: 'orders',
        store: createRedisStore(own.client, { prefix }),
        tools: { create_refund: { elicitTimeoutMs: 1500 } },
        url: { build: ({ id }) => `https://orders.test/confirm/${id}`, pollMs: 25 },
      });
      const page: unknown[] = [];
      const server = await serveTools([tool], {
        middleware: [confirm],
        authInfo: authAs('alice'),
        elicitUrl: true,
        onElicit: (params) => {
          const { elicitationId: id } = params as { elicitationId: string };
          void (async () => {
            expect(isStoreFullError(await fillRedis(own.client))).toBe(true);
            page.push((await confirm.pending(id, 'alice'))?.tool);
            page.push(
              await confirm.answer(id, { approve: true, principal: 'alice' }).catch((error) => error),
            );
          })();
          return { action: 'accept' };
        },
      });
      try {
        const result = expectFailure(await server.callTool('create_refund', { order_id: 'A-1', amount: 25 }));
        expect(result).toMatchObject({ error: 'rate_limited', retryable: true });
        expect(runs.count).toBe(0);
        expect(page).toEqual(['create_refund', expect.objectContaining({ name: 'StoreFullError' })]);
        // Its slot is free (deletes work on a full Redis); its mark and pending call expire with their TTL.
        expect(await own.client.keys(`${prefix}confirm:orders:url-slot:*`)).toEqual([]);
      } finally {
        await server.close();
      }
    });
  });
}
