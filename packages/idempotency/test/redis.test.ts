import { randomUUID } from 'node:crypto';
import { defineTool, ok, type ToolDefinition } from '@toolgate/core';
import { recordingLogger, serveTools } from '@toolgate/core/testing';
import { createRedisClient, createRedisStore, redisReady } from '@toolgate/redis-store';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createIdempotency } from '../src/index.js';
import { authAs, refundTool } from './fixtures.js';
import { reportRedisMissing, TEST_REDIS_URL } from './needs-redis.js';

if (TEST_REDIS_URL === undefined) {
  reportRedisMissing('the idempotency tests across two servers sharing Redis');
} else {
  const url = TEST_REDIS_URL;
  describe('idempotency across two servers sharing Redis', () => {
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

    it('concurrent identical calls split over two McpServers run the handler once', async () => {
      const { tool, runs } = refundTool({ delayMs: 200 });
      const servers = await Promise.all(
        clients.map((redis) =>
          serveTools([tool], {
            middleware: [
              createIdempotency({ store: createRedisStore(redis, { prefix }), tools: { create_refund: {} } }),
            ],
          }),
        ),
      );
      try {
        const results = await Promise.all(
          Array.from({ length: 30 }, (_, i) =>
            servers[i % 2]!.callTool('create_refund', { order_id: 'A-9', amount: 5 }),
          ),
        );
        expect(runs.count).toBe(1);
        for (const result of results)
          expect(result.structuredContent).toEqual({
            ok: true,
            refund_id: 'R-1',
            order_id: 'A-9',
            amount: 5,
          });
        // A later retry on either server replays from Redis.
        expect(
          (await servers[1]!.callTool('create_refund', { order_id: 'A-9', amount: 5 }))._meta,
        ).toMatchObject({
          'toolgate/idempotency': { replayed: true },
        });
        expect(runs.count).toBe(1);
        const keys = await clients[0]!.keys(`${prefix}*`);
        expect(keys).toHaveLength(1);
        expect(keys[0]).toMatch(new RegExp(`^${prefix}idem:\\{[\\w-]{22}\\}:[\\w-]{43}$`));
      } finally {
        await Promise.all(servers.map((server) => server.close()));
      }
    });

    it('a failure releases the claim in Redis, so a retry on the other server runs', async () => {
      const { tool, runs } = refundTool({ outcomes: ['fail', 'ok'] });
      const servers = await Promise.all(
        clients.map((redis) =>
          serveTools([tool], {
            middleware: [
              createIdempotency({ store: createRedisStore(redis, { prefix }), tools: { create_refund: {} } }),
            ],
            logger: recordingLogger([]),
          }),
        ),
      );
      try {
        expect((await servers[0]!.callTool('create_refund', { order_id: 'B-1', amount: 1 })).isError).toBe(
          true,
        );
        expect(
          (await servers[1]!.callTool('create_refund', { order_id: 'B-1', amount: 1 })).structuredContent,
        ).toMatchObject({
          refund_id: 'R-2',
        });
        expect(runs.count).toBe(2);
      } finally {
        await Promise.all(servers.map((server) => server.close()));
      }
    });

    it('two servers (staging, prod) on one Redis, each with its own prefix, never replay each other’s results', async () => {
      const ran: string[] = [];
      const serverOf = (env: string, envPrefix: string) =>
        serveTools(
          [
            defineTool({
              name: 'create_refund',
              description: 'Refund an amount on an order.',
              input: { order_id: z.string(), amount: z.number().positive() },
              handler: async ({ order_id }) => {
                ran.push(env);
                return ok({ env, refund_id: `${env}-R-${ran.length}`, order_id });
              },
            }) as ToolDefinition,
          ],
          {
            middleware: [
              createIdempotency({
                store: createRedisStore(clients[0]!, { prefix: envPrefix }),
                tools: { create_refund: {} },
              }),
            ],
            authInfo: authAs('alice'),
          },
        );
      const servers = await Promise.all([
        serverOf('staging', `${prefix}staging:`),
        serverOf('prod', `${prefix}prod:`),
        // Under staging's prefix: what the prefix keeps apart.
        serverOf('sharing', `${prefix}staging:`),
      ]);
      try {
        const refund = { order_id: 'A-1', amount: 25 };
        const staging = await servers[0]!.callTool('create_refund', refund);
        const prod = await servers[1]!.callTool('create_refund', refund);
        expect(staging.structuredContent).toEqual({
          ok: true,
          env: 'staging',
          refund_id: 'staging-R-1',
          order_id: 'A-1',
        });
        expect(prod.structuredContent).toEqual({
          ok: true,
          env: 'prod',
          refund_id: 'prod-R-2',
          order_id: 'A-1',
        });
        expect(prod._meta?.['toolgate/idempotency']).toBeUndefined();
        const sharing = await servers[2]!.callTool('create_refund', refund);
        expect(sharing.structuredContent).toEqual(staging.structuredContent);
        expect(sharing._meta).toMatchObject({ 'toolgate/idempotency': { replayed: true } });
        expect(ran).toEqual(['staging', 'prod']);
      } finally {
        await Promise.all(servers.map((server) => server.close()));
      }
    });
  });
}
