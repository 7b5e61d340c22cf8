import { randomUUID } from 'node:crypto';
import { type AddressInfo, createServer } from 'node:net';
import { errorOf, type PolicyDecision } from '@toolgate/core';
import { expectFailure, type FaultProxy, type LogEntry, startFaultProxy } from '@toolgate/core/testing';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRateLimit, RATE_LIMIT_META_KEY } from '../src/index.js';
import { closeAll, decisionRecorder, runs, serve, token } from './fixtures.js';

const REDIS_URL = process.env.TEST_REDIS_URL;
const NEEDS_REDIS =
  'needs TEST_REDIS_URL (a real Redis, e.g. redis://127.0.0.1:6379); not set, so the shared-Redis and blackhole tests did not run';
const alice = token('portal', { customerId: 41 });
const clients: Redis[] = [];

/** The one documented client configuration (see README): no offline queue, RESP2. */
function redisClient(url: string, socketTimeout = 2000): Redis {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    protocol: 2,
    maxRetriesPerRequest: 1,
    socketTimeout,
  });
  client.on('error', () => {}); // connection errors are the subject of these tests
  clients.push(client);
  return client;
}

async function ready(client: Redis): Promise<Redis> {
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
  return client;
}

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const storeLines = (log: LogEntry[]) =>
  log.filter((entry) => entry.message?.startsWith('rate-limit: Redis store failed'));

beforeEach(() => runs.clear());
afterEach(closeAll);
afterAll(() => {
  for (const client of clients.splice(0)) client.disconnect();
});

describe('Redis down (a closed loopback port: needs no Redis)', () => {
  it('fail-open judges calls by in-process copies of the limits, with one log line for the incident', async () => {
    const log: LogEntry[] = [];
    const recorder = decisionRecorder();
    const limiter = createRateLimit({
      limits: [{ name: 'per-caller', per: 'caller', points: 3, duration: '1m' }],
      keyPrefix: 'test:rl',
      store: { redis: redisClient(`redis://127.0.0.1:${await closedPort()}`) },
      onStoreError: 'open',
    });
    const client = await serve([recorder.middleware, limiter], { authInfo: alice, log });
    for (let i = 0; i < 3; i += 1) expect((await client.callTool('search_orders')).isError).toBeUndefined();
    const refused = await client.callTool('search_orders');
    expect(expectFailure(refused).error).toBe('rate_limited');
    expect(refused._meta?.[RATE_LIMIT_META_KEY]).toMatchObject({
      name: 'per-caller',
      limit: 3,
      remaining: 0,
    });
    expect(runs.get('search_orders')).toBe(3);
    expect(recorder.calls[0]).toEqual([
      { by: 'rate-limit', action: 'allow', reason: 'store_unavailable', detail: { judgedBy: 'insurance' } },
    ]);
    expect(storeLines(log)).toHaveLength(1);
    expect(storeLines(log)[0]).toMatchObject({
      level: 'warn',
      fields: { store: 'redis', onStoreError: 'open', suppressed: 0 },
    });
    limiter.close();
    expect(storeLines(log)).toHaveLength(2);
    expect(storeLines(log)[1]?.fields.suppressed).toBe(3); // three more calls judged in process, the refused one included
  });

  it('fail-closed answers unavailable with retryAfterMs and runs nothing', async () => {
    const log: LogEntry[] = [];
    const recorder = decisionRecorder();
    const limiter = createRateLimit({
      limits: [{ per: 'caller', points: 3, duration: '1m' }],
      keyPrefix: 'test:rl',
      store: { redis: redisClient(`redis://127.0.0.1:${await closedPort()}`) },
      onStoreError: 'closed',
      unavailableRetryAfterMs: 2000,
    });
    const client = await serve([recorder.middleware, limiter], { authInfo: alice, log });
    for (let i = 0; i < 5; i += 1) {
      expect(expectFailure(await client.callTool('search_orders'))).toMatchObject({
        error: 'unavailable',
        retryable: true,
        retryAfterMs: 2000,
      });
    }
    expect(runs.get('search_orders')).toBeUndefined();
    expect(recorder.calls[0]).toEqual([
      { by: 'rate-limit', action: 'short-circuit', reason: 'store_unavailable' },
    ]);
    expect(storeLines(log)).toHaveLength(1);
    expect(storeLines(log)[0]?.fields).toMatchObject({ onStoreError: 'closed', error: { name: 'Error' } });
  });
});

if (REDIS_URL === undefined) {
  describe('real Redis', () => {
    // Counted in the report with its reason; in CI a missing Redis is a broken pipeline.
    it(NEEDS_REDIS, (context) => {
      if (process.env.CI === 'true') throw new Error(`${NEEDS_REDIS} (CI=true requires it)`);
      context.skip(NEEDS_REDIS);
    });
  });
} else {
  const url = REDIS_URL;
  describe('real Redis', () => {
    const keyPrefix = `tg:rl-test:${randomUUID()}`;

    afterAll(async () => {
      const admin = await ready(redisClient(url));
      const keys = await admin.keys(`${keyPrefix}:*`);
      if (keys.length > 0) await admin.del(...keys);
    });

    it('holds one limit across two servers, each with its own client, even for 100 parallel calls', async () => {
      const limits = [{ name: 'per-caller', per: 'caller', points: 10, duration: '1m' }] as const;
      const first = await serve(
        [createRateLimit({ limits, keyPrefix, store: { redis: await ready(redisClient(url)) } })],
        { authInfo: alice },
      );
      const second = await serve(
        [createRateLimit({ limits, keyPrefix, store: { redis: await ready(redisClient(url)) } })],
        { authInfo: alice },
      );
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          (i % 2 === 0 ? first : second).callTool('search_orders', { q: `p${i}` }),
        ),
      );
      expect(results.filter((result) => result.isError !== true)).toHaveLength(10);
      const refused = results.filter((result) => errorOf(result)?.error === 'rate_limited');
      expect(refused).toHaveLength(90);
      expect(expectFailure(refused[0]!).retryAfterMs).toBeGreaterThan(50_000);
      expect(expectFailure(refused[0]!).retryAfterMs).toBeLessThanOrEqual(60_000);
      expect(runs.get('search_orders')).toBe(10);
      // Another caller has its own count on the same Redis
      const other = await serve(
        [createRateLimit({ limits, keyPrefix, store: { redis: await ready(redisClient(url)) } })],
        { authInfo: token('portal', { customerId: 42 }) },
      );
      expect((await other.callTool('search_orders')).isError).toBeUndefined();
    });

    it('two servers on one Redis, each with its own keyPrefix, spend their own budgets', async () => {
      const limits = [{ name: 'per-caller', per: 'caller', points: 2, duration: '1m' }] as const;
      const server = async (prefix: string) =>
        serve(
          [createRateLimit({ limits, keyPrefix: prefix, store: { redis: await ready(redisClient(url)) } })],
          { authInfo: alice },
        );
      const staging = await server(`${keyPrefix}:staging`);
      const prod = await server(`${keyPrefix}:prod`);
      // The same person spends staging's budget...
      for (const q of ['a', 'b'])
        expect((await staging.callTool('search_orders', { q })).isError).toBeUndefined();
      expect(errorOf(await staging.callTool('search_orders', { q: 'c' }))?.error).toBe('rate_limited');
      // ...and prod's is whole; a server under staging's prefix would share staging's.
      for (const q of ['a', 'b'])
        expect((await prod.callTool('search_orders', { q })).isError).toBeUndefined();
      const sharing = await server(`${keyPrefix}:staging`);
      expect(errorOf(await sharing.callTool('search_orders', { q: 'd' }))?.error).toBe('rate_limited');
    });

    it('keys a caller limit under a hash tag of the caller and a tool limit without one', async () => {
      const admin = await ready(redisClient(url));
      const client = await serve(
        [
          createRateLimit({
            limits: [
              { name: 'mine', per: 'caller-tool', points: 5, duration: '1m' },
              { name: 'everyone', per: 'tool', points: 50, duration: '1m' },
            ],
            keyPrefix: `${keyPrefix}:keys`,
            store: { redis: admin },
          }),
        ],
        { authInfo: alice },
      );
      await client.callTool('search_orders');
      const keys = (await admin.keys(`${keyPrefix}:keys:*`)).sort();
      expect(keys).toHaveLength(2);
      expect(keys[0]).toBe(`${keyPrefix}:keys:everyone:search_orders`);
      expect(keys[1]).toMatch(new RegExp(`^${keyPrefix}:keys:\\{[A-Za-z0-9_-]{22}\\}:mine:search_orders$`));
      expect(await admin.get(keys[1]!)).toBe('1');
      const ttl = await admin.pttl(keys[1]!);
      expect(ttl).toBeGreaterThan(55_000);
      expect(ttl).toBeLessThanOrEqual(60_000);
    });

    describe('blackholed Redis (a TCP proxy that stops forwarding)', () => {
      let proxy: FaultProxy;
      beforeEach(async () => {
        const target = new URL(url);
        proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port || 6379) });
      });
      afterEach(async () => {
        proxy.heal();
        await proxy.close();
      });

      const viaProxy = async (socketTimeout?: number): Promise<Redis> => {
        const target = new URL(url);
        target.port = String(proxy.port);
        return ready(redisClient(target.toString(), socketTimeout));
      };

      it('fail-open: no call waits past timeoutMs, the insurance limits count, one log line', async () => {
        const log: LogEntry[] = [];
        const limiter = createRateLimit({
          limits: [{ per: 'caller', points: 4, duration: '1m' }],
          keyPrefix,
          store: { redis: await viaProxy() },
          timeoutMs: 100,
        });
        const client = await serve([limiter], { authInfo: token('portal', { customerId: 50 }), log });
        expect((await client.callTool('search_orders')).isError).toBeUndefined(); // counted in Redis
        proxy.blackhole();
        // A hang would hit the client's own 5 s request timeout and fail the test.
        const during = await Promise.all(
          Array.from({ length: 5 }, () => client.callTool('search_orders', {}, { timeoutMs: 5000 })),
        );
        // The insurance continues the window Redis counted: 3 more, not a fresh 4.
        expect(during.filter((result) => result.isError !== true)).toHaveLength(3);
        expect(during.filter((result) => errorOf(result)?.error === 'rate_limited')).toHaveLength(2);
        expect(storeLines(log)).toHaveLength(1);
        expect(storeLines(log)[0]?.fields).toMatchObject({
          onStoreError: 'open',
          error: { name: 'TimeoutError' },
        });
      });

      it('a connection gone silent for good (no reset): the client closes it after socketTimeout and the replicas share one count again', async () => {
        const limits = [{ name: 'shared', per: 'caller', points: 1000, duration: '1m' }] as const;
        const log: LogEntry[] = [];
        const admin = await ready(redisClient(url));
        const recorder = decisionRecorder();
        const authInfo = token('portal', { customerId: 52 });
        const replicas = [];
        for (let i = 0; i < 2; i += 1) {
          const redis = await viaProxy(300);
          const limiter = createRateLimit({ limits, keyPrefix: `${keyPrefix}:silent`, store: { redis } });
          replicas.push(await serve([recorder.middleware, limiter], { authInfo, log }));
        }
        await replicas[0]!.callTool('search_orders');
        const [key] = await admin.keys(`${keyPrefix}:silent:*`);
        expect(await admin.get(key!)).toBe('1');
        // A NAT or firewall forgets both flows: no reset, the clients' sockets stay open and hear nothing.
        proxy.silenceLive();
        const judgedInProcess = (calls: readonly PolicyDecision[][]) =>
          calls.some((decisions) => decisions.some((decision) => decision.reason === 'store_unavailable'));
        let silent = 0;
        let recovered = false;
        // Until both replicas are heard by Redis again (a kept silent connection never is).
        for (let attempt = 0; attempt < 100 && !recovered; attempt += 1) {
          recorder.calls.length = 0;
          await Promise.all(replicas.map((replica) => replica.callTool('search_orders')));
          if (judgedInProcess(recorder.calls)) silent += 1;
          else recovered = true;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        expect(silent).toBeGreaterThan(0); // the partition was felt
        expect(recovered).toBe(true);
        // Counted in Redis again, by both replicas: one count, not one per replica.
        const before = Number(await admin.get(key!));
        await Promise.all(replicas.map((replica) => replica.callTool('search_orders')));
        expect(Number(await admin.get(key!))).toBe(before + 2);
        expect(storeLines(log)).toHaveLength(2); // one line per replica for the incident, not one per call
      }, 30_000);

      it('fail-closed: every call answers unavailable within timeoutMs, never hangs', async () => {
        const log: LogEntry[] = [];
        const limiter = createRateLimit({
          limits: [{ per: 'caller', points: 100, duration: '1m' }],
          keyPrefix,
          store: { redis: await viaProxy() },
          onStoreError: 'closed',
          timeoutMs: 100,
        });
        const client = await serve([limiter], { authInfo: token('portal', { customerId: 51 }), log });
        proxy.blackhole();
        const during = await Promise.all(
          Array.from({ length: 5 }, () => client.callTool('search_orders', {}, { timeoutMs: 5000 })),
        );
        for (const result of during) {
          expect(expectFailure(result)).toMatchObject({
            error: 'unavailable',
            retryable: true,
            retryAfterMs: 1000,
          });
        }
        expect(runs.get('search_orders')).toBeUndefined();
        expect(storeLines(log)).toHaveLength(1);
      });
    });
  });
}
