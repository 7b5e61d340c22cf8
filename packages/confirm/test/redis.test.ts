import { randomUUID } from 'node:crypto';
import { serveTools } from '@toolgate/core/testing';
import { createRedisClient, createRedisStore, redisReady } from '@toolgate/redis-store';
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
        const results = await Promise.all(
          Array.from({ length: 6 }, (_, i) =>
            servers[i % 2]!.callTool('create_refund', { ...refund, confirmation }),
          ),
        );
        expect(runs.count).toBe(1);
        expect(results.filter((result) => result.isError !== true)).toHaveLength(1);
        const keys = await clients[0]!.keys(`${prefix}*`);
        expect(keys).toEqual([
          expect.stringMatching(new RegExp(`^${prefix}confirm:used:\\{[\\w-]{22}\\}:[0-9a-f]{32}$`)),
        ]);
        const ttl = await clients[0]!.pttl(keys[0]!);
        expect(ttl).toBeGreaterThan(350_000);
        expect(ttl).toBeLessThanOrEqual(360_000);
      } finally {
        await Promise.all(servers.map((server) => server.close()));
      }
    });

    it('URL mode: the page served by another replica answers the call waiting on this one', async () => {
      const { tool, runs } = refundTool();
      const [here, there] = clients.map((redis) =>
        createConfirm({
          secret: SECRET,
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
  });
}
