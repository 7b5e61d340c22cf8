import { randomUUID } from 'node:crypto';
import { ok, type PolicyDecision, type ToolDefinition, type ToolResult } from '@toolgate/core';
import {
  createTestContext,
  expectFailure,
  type FaultProxy,
  type LogEntry,
  recordingLogger,
  startFaultProxy,
} from '@toolgate/core/testing';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  createRedisRepeatStore,
  createRepeatGuard,
  type RepeatGuardOptions,
  type RepeatStore,
} from '../src/index.js';
import { closeAll, createFixture, decisionRecorder, serve, sleep } from './fixtures.js';

afterEach(closeAll);

// Generous: the bound is the time limit plus scheduling on a loaded 2-core machine, not a speed claim.
const MARGIN_MS = 1000;

/** A store whose operations never settle until `release()`: a Redis that drops every packet. */
function silentStore(): RepeatStore & { release(): void; operations: number } {
  let open = false;
  const waiting: (() => void)[] = [];
  const data = new Map<string, string>();
  const hang = <T>(answer: () => T): Promise<T> =>
    open ? Promise.resolve(answer()) : new Promise<T>((resolve) => waiting.push(() => resolve(answer())));
  const store = {
    operations: 0,
    release() {
      open = true;
      for (const wake of waiting.splice(0)) wake();
    },
    get(key: string) {
      store.operations += 1;
      return hang(() => data.get(key));
    },
    set(key: string, value: string) {
      store.operations += 1;
      return hang(() => void data.set(key, value));
    },
    delete(key: string) {
      store.operations += 1;
      return hang(() => void data.delete(key));
    },
  };
  return store;
}

async function setup(options: RepeatGuardOptions) {
  const fixture = createFixture();
  const decisions: PolicyDecision[][] = [];
  const logs: LogEntry[] = [];
  const client = await serve(fixture.tools, [decisionRecorder(decisions), createRepeatGuard(options)], {
    logger: recordingLogger(logs),
  });
  return { fixture, decisions, logs, client };
}

async function timed<T>(work: Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work;
  return { value, ms: performance.now() - started };
}

describe('a store that never answers', () => {
  it('fails open: 50 concurrent calls all run, none waits past the time limit twice, one warning, one recovery line with the count', async () => {
    const store = silentStore();
    const { fixture, logs, client } = await setup({ store, storeTimeoutMs: 100 });
    const calls = await Promise.all(
      Array.from({ length: 50 }, (_, i) => timed(client.callTool('get_order_status', { id: `s${i}` }))),
    );
    expect(calls.every((call) => call.value.isError !== true)).toBe(true);
    expect(fixture.invocations.get_order_status).toBe(50);
    // A read and a write, each bounded by storeTimeoutMs.
    expect(Math.max(...calls.map((call) => call.ms))).toBeLessThan(2 * 100 + MARGIN_MS);
    expect(logs.filter((log) => log.level === 'warn').map((log) => log.message)).toEqual([
      'repeat-guard: the store failed; calls run unguarded until it answers',
    ]);
    store.release();
    await client.callTool('get_order_status', { id: 'after' });
    const recovered = logs.filter((log) => log.message?.startsWith('repeat-guard: the store answers again'));
    expect(recovered).toHaveLength(1);
    // 50 reads and 50 writes timed out.
    expect(recovered[0]!.fields).toMatchObject({ failures: 100 });
  });

  it('fails closed when asked: unavailable with retryAfterMs, and the handler never runs', async () => {
    const store = silentStore();
    const { fixture, logs, client } = await setup({ store, storeTimeoutMs: 50, onStoreFailure: 'closed' });
    for (let i = 0; i < 3; i += 1) {
      expect(expectFailure(await client.callTool('get_order_status', { id: `c${i}` }))).toEqual({
        ok: false,
        error: 'unavailable',
        message: 'get_order_status is temporarily unavailable.',
        hint: 'Do not retry now; it can be tried once more after retryAfterMs.',
        retryable: true,
        retryAfterMs: 5000,
      });
    }
    expect(fixture.invocations.get_order_status).toBeUndefined();
    expect(logs.filter((log) => log.level === 'warn').map((log) => log.message)).toEqual([
      'repeat-guard: the store failed; calls are answered unavailable until it answers',
    ]);
  });

  it('follows the call abort while the store is silent, even with a long time limit', async () => {
    const store = silentStore();
    const guard = createRepeatGuard({ store, storeTimeoutMs: 60_000 });
    const controller = new AbortController();
    const ctx = createTestContext({
      tool: { name: 'search_orders' } as ToolDefinition,
      args: { q: 'x' },
      request: { signal: controller.signal },
    });
    let ran = false;
    const pending = guard(ctx, async () => {
      ran = true;
      return ok({});
    });
    await sleep(20);
    controller.abort(new DOMException('cancelled by the client', 'AbortError'));
    await expect(pending).rejects.toThrow('cancelled by the client');
    expect(ran).toBe(false);
  });

  it('a waiter on an identical call in flight follows its own abort', async () => {
    const guard = createRepeatGuard();
    const tool = { name: 'search_orders' } as ToolDefinition;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const owner = guard(createTestContext({ tool, args: { q: 'same' } }), async (): Promise<ToolResult> => {
      await gate;
      return ok({ items: [] });
    });
    await sleep(10);
    const controller = new AbortController();
    let waiterRan = false;
    const waiter = guard(
      createTestContext({ tool, args: { q: 'same' }, request: { signal: controller.signal } }),
      async () => {
        waiterRan = true;
        return ok({});
      },
    );
    await sleep(10);
    controller.abort(new DOMException('waiter cancelled', 'AbortError'));
    await expect(waiter).rejects.toThrow('waiter cancelled');
    expect(waiterRan).toBe(false);
    release();
    expect((await owner).isError).not.toBe(true);
  });

  it('refuses a time limit or a failure mode that cannot work', () => {
    expect(() => createRepeatGuard({ storeTimeoutMs: 0 })).toThrow(
      'createRepeatGuard: storeTimeoutMs must be',
    );
    expect(() => createRepeatGuard({ onStoreFailure: 'maybe' as never })).toThrow(
      "onStoreFailure must be 'open' or 'closed'",
    );
  });
});

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

describe('Redis behind a blackholing proxy (real Redis)', () => {
  let proxy: FaultProxy | undefined;
  let redis: Redis | undefined;
  let unreachable: string | undefined;
  const prefix = `toolgate:repeat-guard-fault:${randomUUID()}:`;

  beforeAll(async () => {
    const target = new URL(REDIS_URL);
    proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port || 6379) });
    // The client a server would use: no offline queue and few retries, so it reports rather than buffers.
    // Its socketTimeout is far longer than the blackhole lasts: the connection is kept, and the
    // commands queued on it are answered once healed (a silence longer than it is the next describe's).
    const client = new Redis({
      host: '127.0.0.1',
      port: proxy.port,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 2000,
      socketTimeout: 10_000,
    });
    try {
      await client.connect();
      await client.ping();
      redis = client;
    } catch (error) {
      client.disconnect();
      unreachable = `Redis unreachable at ${REDIS_URL}: ${(error as Error).message}`;
      if (process.env.CI === 'true') throw new Error(`${unreachable} (CI=true requires it)`);
      process.stderr.write(`repeat-guard: ${unreachable}; the Redis fault test needs Redis and is skipped\n`);
    }
  });

  afterAll(async () => {
    proxy?.heal();
    if (redis) {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    }
    await proxy?.close();
  });

  it('no call hangs past the time limit while packets are dropped, one warning, repeats again once healed', async ({
    skip,
  }) => {
    if (!redis) skip(unreachable ?? 'Redis unreachable');
    const store = createRedisRepeatStore(redis!, { prefix });
    const { fixture, logs, client } = await setup({ store, storeTimeoutMs: 200 });
    await client.callTool('get_order_status', { id: 'r1' });
    await client.callTool('get_order_status', { id: 'r1' });
    expect(fixture.invocations.get_order_status).toBe(1); // healthy: the repeat was answered from Redis

    proxy!.blackhole();
    const calls = await Promise.all(
      Array.from({ length: 40 }, (_, i) => timed(client.callTool('get_order_status', { id: `b${i}` }))),
    );
    const hung = calls.filter((call) => call.ms > 2 * 200 + MARGIN_MS);
    process.stderr.write(
      `repeat-guard fault: Redis blackholed, 40 calls, slowest ${Math.round(Math.max(...calls.map((c) => c.ms)))} ms, ${hung.length} hung past ${2 * 200 + MARGIN_MS} ms\n`,
    );
    expect(hung).toEqual([]);
    expect(calls.every((call) => call.value.isError !== true)).toBe(true);
    expect(fixture.invocations.get_order_status).toBe(41);
    expect(logs.filter((log) => log.level === 'warn').map((log) => log.message)).toEqual([
      'repeat-guard: the store failed; calls run unguarded until it answers',
    ]);

    proxy!.heal();
    // The commands queued on the connection are answered once packets flow again.
    await client.callTool('get_order_status', { id: 'r2' });
    await client.callTool('get_order_status', { id: 'r2' });
    expect(fixture.invocations.get_order_status).toBe(42);
    expect(
      logs.filter((log) => log.message?.startsWith('repeat-guard: the store answers again')),
    ).toHaveLength(1);
  });
});

describe('Redis connection gone silent without a reset (real Redis behind the fault proxy)', () => {
  let proxy: FaultProxy | undefined;
  let viaProxy = '';
  let unreachable: string | undefined;
  const clients: Redis[] = [];
  const prefix = `toolgate:repeat-guard-silent:${randomUUID()}:`;

  /** The README's client (no offline queue, never a command sent twice), plus `extra`, once ready. */
  async function readmeClient(url: string, extra: { socketTimeout?: number } = {}): Promise<Redis> {
    const client = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      ...extra,
    });
    client.on('error', () => {}); // the lost connection is the subject here
    clients.push(client);
    if (client.status !== 'ready') {
      await new Promise((resolve, reject) => {
        client.once('ready', resolve);
        client.once('end', () => reject(new Error('the client gave up connecting')));
      });
    }
    return client;
  }

  beforeAll(async () => {
    const target = new URL(REDIS_URL);
    proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port || 6379) });
    target.port = String(proxy.port);
    viaProxy = target.toString();
    const probe = new Redis(REDIS_URL, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    try {
      await probe.connect();
      await probe.ping();
    } catch (error) {
      unreachable = `Redis unreachable at ${REDIS_URL}: ${(error as Error).message}`;
      if (process.env.CI === 'true') throw new Error(`${unreachable} (CI=true requires it)`);
      process.stderr.write(`repeat-guard: ${unreachable}; the silent-connection tests are skipped\n`);
    } finally {
      probe.disconnect();
    }
  });

  afterEach(() => {
    for (const client of clients.splice(0)) client.disconnect();
  });

  afterAll(async () => {
    if (unreachable === undefined) {
      const admin = new Redis(REDIS_URL, { maxRetriesPerRequest: 0 });
      const keys = await admin.keys(`${prefix}*`);
      if (keys.length > 0) await admin.del(...keys);
      admin.disconnect();
    }
    await proxy?.close();
  });

  it('without socketTimeout (a client that shows no options) the silent connection is kept for good: no repeat is recognised again, every call leaves its commands queued', async ({
    skip,
  }) => {
    if (unreachable !== undefined) skip(unreachable);
    const redis = await readmeClient(viaProxy);
    // The store sees only the commands: what a client with no visible options (not ioredis's own
    // object, so not checked) gets. This is the README's client before socketTimeout was required.
    const commands = {
      get: (key: string) => redis.get(key),
      set: (key: string, value: string, px: 'PX', ms: number) => redis.set(key, value, px, ms),
      del: (key: string) => redis.del(key),
    };
    const store = createRedisRepeatStore(commands, { prefix: `${prefix}kept:` });
    const { fixture, logs, client } = await setup({ store, storeTimeoutMs: 200 });
    await client.callTool('get_order_status', { id: 'k1' });
    await client.callTool('get_order_status', { id: 'k1' });
    expect(fixture.invocations.get_order_status).toBe(1); // healthy: the repeat came from Redis

    const connectionsBefore = proxy!.connections;
    // A NAT or firewall forgets the flow: no reset, the client's socket stays open and hears nothing.
    proxy!.silenceLive();
    const queuedBefore = redis.commandQueue.length;
    const calls = 6;
    for (let i = 0; i < calls / 2; i += 1) await client.callTool('get_order_status', { id: 'k2' });
    // Far longer than the socketTimeout of the next test, which gets its connection back well within this.
    await sleep(2000);
    for (let i = 0; i < calls / 2; i += 1) await client.callTool('get_order_status', { id: 'k2' });

    // Every identical call ran: none was recognised as a repeat.
    expect(fixture.invocations.get_order_status).toBe(1 + calls);
    // New connections are relayed as usual (the partition is over for them), yet this client never
    // makes one: its silent connection is still 'ready', and holds each call's read and write.
    const fresh = await readmeClient(viaProxy);
    expect(await fresh.ping()).toBe('PONG');
    expect(redis.status).toBe('ready');
    expect(proxy!.connections).toBe(connectionsBefore + 1); // the fresh client's, none of this one's
    const queued = redis.commandQueue.length - queuedBefore;
    process.stderr.write(
      `repeat-guard silent connection, no socketTimeout: ${calls} calls ran unguarded, ${queued} commands still queued in the client, which made ${proxy!.connections - connectionsBefore - 1} new connections\n`,
    );
    expect(queued).toBeGreaterThanOrEqual(2 * calls);
    expect(logs.filter((log) => log.message?.startsWith('repeat-guard: the store answers again'))).toEqual(
      [],
    );
  }, 30_000);

  it('with socketTimeout the silent connection is closed and made again: repeats are recognised again and nothing stays queued', async ({
    skip,
  }) => {
    if (unreachable !== undefined) skip(unreachable);
    // The client of the test above, given as it is, is refused: ioredis shows its options.
    const without = await readmeClient(viaProxy);
    expect(() => createRedisRepeatStore(without, { prefix: 'test:repeat:' })).toThrow(TypeError);
    expect(() => createRedisRepeatStore(without, { prefix: 'test:repeat:' })).toThrow(
      /^createRedisRepeatStore: create the ioredis client with socketTimeout/,
    );
    const redis = await readmeClient(viaProxy, { socketTimeout: 300 });
    const store = createRedisRepeatStore(redis, { prefix: `${prefix}healed:` });
    const { fixture, logs, client } = await setup({ store, storeTimeoutMs: 200 });
    await client.callTool('get_order_status', { id: 'h0' });
    await client.callTool('get_order_status', { id: 'h0' });
    expect(fixture.invocations.get_order_status).toBe(1);

    const connectionsBefore = proxy!.connections;
    proxy!.silenceLive();
    let silent = 0;
    let recovered = false;
    // Until an identical call is answered from Redis again (a kept silent connection never is).
    for (let attempt = 0; attempt < 100 && !recovered; attempt += 1) {
      const before = fixture.invocations.get_order_status ?? 0;
      await client.callTool('get_order_status', { id: `h${attempt + 1}` });
      await client.callTool('get_order_status', { id: `h${attempt + 1}` });
      if ((fixture.invocations.get_order_status ?? 0) - before === 2) silent += 1;
      else recovered = true;
      await sleep(50);
    }
    expect(silent).toBeGreaterThan(0); // the partition was felt
    expect(recovered).toBe(true);
    expect(redis.status).toBe('ready');
    expect(proxy!.connections).toBeGreaterThan(connectionsBefore); // on a connection made again
    expect(await redis.ping()).toBe('PONG'); // answered after every command sent before it
    expect(redis.commandQueue.length).toBe(0); // nothing left waiting in the client
    expect(logs.filter((log) => log.level === 'warn').map((log) => log.message)).toEqual([
      'repeat-guard: the store failed; calls run unguarded until it answers',
    ]);
    expect(
      logs.filter((log) => log.message?.startsWith('repeat-guard: the store answers again')),
    ).toHaveLength(1);
  }, 30_000);
});
