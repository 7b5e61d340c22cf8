import { type AddressInfo, createServer } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { CallerIdentity, ToolRequest } from '@toolgate/core';
import {
  expectFailure,
  type LogEntry,
  recordingLogger,
  serveTools,
  type TestClient,
} from '@toolgate/core/testing';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createRateLimit, type RateLimitOptions } from '../src/index.js';
import { runs, TOOLS } from './fixtures.js';

// Red team against the in-process counters (the memory store, and the Redis store's fail-open
// insurance): a flood of distinct callers must not grow them without bound, a caller id of any length
// must not be held at its length, and a step of the wall clock must neither open a window early nor
// hold one past its length.

const open: TestClient[] = [];
const redisClients: Redis[] = [];
beforeEach(() => runs.clear());
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(open.splice(0).map((client) => client.close()));
});
afterAll(() => {
  for (const client of redisClients.splice(0)) client.disconnect();
});

/** Each call names its caller in `_meta.who`, as a verifier would from a token (one client, many callers). */
function callerOf(request: ToolRequest): CallerIdentity {
  return Object.freeze({ id: `client:${String(request.meta?.who)}`, kind: 'client' });
}

async function serveMany(options: RateLimitOptions, log?: LogEntry[]): Promise<TestClient> {
  const client = await serveTools(TOOLS, {
    middleware: [createRateLimit(options)],
    identify: callerOf,
    ...(log === undefined ? {} : { logger: recordingLogger(log) }),
  });
  open.push(client);
  return client;
}

const as = (who: string) => ({ meta: { who } });

async function closedPortRedis(): Promise<Redis> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  const client = new Redis(`redis://127.0.0.1:${port}`, {
    enableOfflineQueue: false,
    protocol: 2,
    maxRetriesPerRequest: 0,
    socketTimeout: 2000,
    lazyConnect: false,
  });
  client.on('error', () => {}); // Redis is down on purpose
  redisClients.push(client);
  return client;
}

const perCaller = { name: 'per-caller', per: 'caller', points: 1, duration: '1h' } as const;

describe('rate-limit red team: the memory store stays bounded', () => {
  it('a flood of distinct callers keeps at most maxMemoryKeys windows: the one that ends first goes, and the flood is logged', async () => {
    const log: LogEntry[] = [];
    const client = await serveMany({ limits: [perCaller], maxMemoryKeys: 50 }, log);
    expect((await client.callTool('search_orders', {}, as('first'))).isError).toBeUndefined();
    expect(expectFailure(await client.callTool('search_orders', {}, as('first'))).error).toBe('rate_limited');
    for (let i = 0; i < 120; i += 1) {
      expect((await client.callTool('search_orders', {}, as(`flood-${i}`))).isError).toBeUndefined();
    }
    // The 50 latest windows are held and keep counting...
    for (let i = 70; i < 120; i += 1) {
      expect(expectFailure(await client.callTool('search_orders', {}, as(`flood-${i}`))).error).toBe(
        'rate_limited',
      );
    }
    // ...the oldest went to make room (a flood that large holds as many fresh budgets anyway).
    expect((await client.callTool('search_orders', {}, as('first'))).isError).toBeUndefined();
    const full = log.filter((entry) => entry.message?.startsWith('rate-limit: the memory store is full'));
    expect(full.length).toBeGreaterThanOrEqual(1);
    expect(full[0]).toMatchObject({ level: 'warn', fields: { limit: 'per-caller', maxMemoryKeys: 50 } });
    // The log names no caller.
    expect(JSON.stringify(full)).not.toMatch(/client:|flood-/);
  });

  it('the Redis store’s fail-open insurance is bounded the same way during an outage', async () => {
    const client = await serveMany({
      limits: [perCaller],
      maxMemoryKeys: 20,
      keyPrefix: 'test:rl',
      store: { redis: await closedPortRedis() },
      onStoreError: 'open',
    });
    expect((await client.callTool('search_orders', {}, as('first'))).isError).toBeUndefined();
    expect(expectFailure(await client.callTool('search_orders', {}, as('first'))).error).toBe('rate_limited');
    for (let i = 0; i < 60; i += 1) {
      expect((await client.callTool('search_orders', {}, as(`flood-${i}`))).isError).toBeUndefined();
    }
    expect(expectFailure(await client.callTool('search_orders', {}, as('flood-59'))).error).toBe(
      'rate_limited',
    );
    expect((await client.callTool('search_orders', {}, as('first'))).isError).toBeUndefined();
  });

  it('holds a short key per caller, however long its id (memory does not grow with id length)', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const client = await serveMany({ limits: [perCaller] });
    const long = 'x'.repeat(16_000);
    // Warm up the server and client before measuring.
    for (let i = 0; i < 20; i += 1) await client.callTool('search_orders', {}, as(`warm-${i}`));
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 1500; i += 1) {
      expect((await client.callTool('search_orders', {}, as(`${long}${i}`))).isError).toBeUndefined();
    }
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    // 1500 ids of 16 kB are 24 MB; each held as its digest is well under 1 MB.
    expect(grown).toBeLessThan(8_000_000);
    // Each is still counted as its own caller.
    expect(expectFailure(await client.callTool('search_orders', {}, as(`${long}7`))).error).toBe(
      'rate_limited',
    );
    expect((await client.callTool('search_orders', {}, as(`${long}1500`))).isError).toBeUndefined();
  });
});

describe('rate-limit red team: wall-clock steps (memory store)', () => {
  it('a clock stepped forward opens no window early; one stepped back never holds a caller past the window', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: new Date('2030-01-01T00:00:00Z') });
    const client = await serveMany({
      limits: [{ name: 'per-caller', per: 'caller', points: 2, duration: '1m' }],
    });
    for (let i = 0; i < 2; i += 1)
      expect((await client.callTool('search_orders', {}, as('alice'))).isError).toBeUndefined();
    expect(expectFailure(await client.callTool('search_orders', {}, as('alice'))).error).toBe('rate_limited');
    // NTP (or an operator) steps the wall clock forward a day: the window has not really passed.
    vi.setSystemTime(new Date('2030-01-02T00:00:00Z'));
    const forward = expectFailure(await client.callTool('search_orders', {}, as('alice')));
    expect(forward.error).toBe('rate_limited');
    expect(forward.retryAfterMs).toBeLessThanOrEqual(60_000);
    // Stepped back two days: the caller still waits at most what is left of one window.
    vi.setSystemTime(new Date('2029-12-31T00:00:00Z'));
    for (let i = 0; i < 2; i += 1)
      expect((await client.callTool('search_orders', {}, as('bob'))).isError).toBeUndefined();
    const backAlice = expectFailure(await client.callTool('search_orders', {}, as('alice')));
    expect(backAlice.error).toBe('rate_limited');
    expect(backAlice.retryAfterMs).toBeLessThanOrEqual(60_000);
    expect(runs.get('search_orders')).toBe(4);
  });
});
