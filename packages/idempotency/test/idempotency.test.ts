import { getEventListeners } from 'node:events';
import { createMemoryStore, type KeyValueStore, ok, type ToolMiddleware } from '@toolgate/core';
import { createTestContext, expectFailure, type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { describe, expect, it, vi } from 'vitest';
import { createIdempotency, IDEMPOTENCY_META } from '../src/index.js';
import { authAs, readTool, refundTool, serve } from './fixtures.js';

const refund = { order_id: 'A-1', amount: 25 };

describe('idempotency: one run per request', () => {
  it('50 concurrent identical calls run the handler once and all get its result', async () => {
    const { tool, runs } = refundTool({ delayMs: 100 });
    const client = await serve([tool], { middleware: [createIdempotency({ tools: { create_refund: {} } })] });
    const results = await Promise.all(
      Array.from({ length: 50 }, () => client.callTool('create_refund', refund)),
    );
    expect(runs.count).toBe(1);
    for (const result of results) {
      expect(result.structuredContent).toEqual({ ok: true, refund_id: 'R-1', order_id: 'A-1', amount: 25 });
    }
    const replayed = results.filter(
      (result) => (result._meta?.[IDEMPOTENCY_META] as { replayed?: boolean } | undefined)?.replayed === true,
    );
    expect(replayed).toHaveLength(49);
  });

  it('a retry after success replays the stored result, marked, without running again', async () => {
    const { tool, runs } = refundTool();
    const client = await serve([tool], { middleware: [createIdempotency({ tools: { create_refund: {} } })] });
    const first = await client.callTool('create_refund', refund);
    const retry = await client.callTool('create_refund', refund);
    expect(runs.count).toBe(1);
    expect(first._meta).toBeUndefined();
    expect(retry.structuredContent).toEqual(first.structuredContent);
    expect(retry.content).toEqual(first.content);
    expect(retry._meta).toEqual({
      [IDEMPOTENCY_META]: { replayed: true, key: expect.stringMatching(/^[\w-]{43}$/) },
    });
  });

  it('a retry after a failure runs again (failures are not kept by default)', async () => {
    const { tool, runs } = refundTool({ outcomes: ['fail', 'ok'] });
    const client = await serve([tool], { middleware: [createIdempotency({ tools: { create_refund: {} } })] });
    expect(expectFailure(await client.callTool('create_refund', refund)).error).toBe('unavailable');
    const retry = await client.callTool('create_refund', refund);
    expect(runs.count).toBe(2);
    expect(retry.structuredContent).toEqual({ ok: true, refund_id: 'R-2', order_id: 'A-1', amount: 25 });
  });

  it('a retry after a throw runs again too', async () => {
    const { tool, runs } = refundTool({ outcomes: ['throw', 'ok'] });
    const client = await serve([tool], {
      middleware: [createIdempotency({ tools: { create_refund: {} } })],
      logger: recordingLogger([]),
    });
    expect(expectFailure(await client.callTool('create_refund', refund)).error).toBe('internal');
    expect((await client.callTool('create_refund', refund)).structuredContent).toMatchObject({
      refund_id: 'R-2',
    });
    expect(runs.count).toBe(2);
  });

  it('with storeFailures a failure is replayed instead', async () => {
    const { tool, runs } = refundTool({ outcomes: ['fail', 'ok'] });
    const client = await serve([tool], {
      middleware: [createIdempotency({ tools: { create_refund: { storeFailures: true } } })],
    });
    await client.callTool('create_refund', refund);
    const retry = await client.callTool('create_refund', refund);
    expect(runs.count).toBe(1);
    expect(expectFailure(retry)).toMatchObject({
      error: 'unavailable',
      message: 'The payment service did not answer.',
    });
  });

  it('different arguments are different calls; a confirmation argument is not part of the call', async () => {
    const { tool, runs } = refundTool();
    const client = await serve([tool], { middleware: [createIdempotency({ tools: { create_refund: {} } })] });
    await client.callTool('create_refund', refund);
    await client.callTool('create_refund', { ...refund, amount: 30 });
    expect(runs.count).toBe(2);
    const confirmed = await client.callTool('create_refund', { ...refund, confirmation: 'c1.whatever' });
    expect(runs.count).toBe(2);
    expect(confirmed.structuredContent).toMatchObject({ refund_id: 'R-1' });
  });

  it('tools opt in: an unlisted tool runs every time', async () => {
    const { tool, runs } = refundTool();
    const client = await serve([tool, readTool], {
      middleware: [createIdempotency({ tools: { get_order: {} } })],
    });
    await client.callTool('create_refund', refund);
    await client.callTool('create_refund', refund);
    expect(runs.count).toBe(2);
  });

  it('enabled for all tools, a tool opts out with false', async () => {
    const { tool, runs } = refundTool();
    const client = await serve([tool], {
      middleware: [createIdempotency({ enabled: true, tools: { create_refund: false } })],
    });
    await client.callTool('create_refund', refund);
    await client.callTool('create_refund', refund);
    expect(runs.count).toBe(2);
  });
});

describe('idempotency: explicit keys and callers', () => {
  const middleware = () => [createIdempotency({ tools: { create_refund: {} } })];

  it('the same key replays; with other arguments it is refused', async () => {
    const { tool, runs } = refundTool();
    const client = await serve([tool], { middleware: middleware() });
    const meta = { 'toolgate/idempotency-key': 'req-7' };
    await client.callTool('create_refund', refund, { meta });
    expect((await client.callTool('create_refund', refund, { meta })).structuredContent).toMatchObject({
      refund_id: 'R-1',
    });
    const other = await client.callTool('create_refund', { ...refund, amount: 99 }, { meta });
    expect(runs.count).toBe(1);
    expect(expectFailure(other)).toEqual({
      ok: false,
      error: 'invalid_argument',
      message: 'This idempotency key was used with other arguments.',
      hint: 'Use a new idempotency key for a different request, or repeat the original arguments exactly.',
      retryable: false,
    });
  });

  it('the key may come as _meta.idempotencyKey; a key that is not a short string is refused', async () => {
    const { tool, runs } = refundTool();
    const client = await serve([tool], { middleware: middleware() });
    await client.callTool('create_refund', refund, { meta: { idempotencyKey: 'k1' } });
    await client.callTool('create_refund', refund, { meta: { idempotencyKey: 'k1' } });
    expect(runs.count).toBe(1);
    const bad = await client.callTool('create_refund', refund, { meta: { idempotencyKey: 42 } });
    expect(expectFailure(bad).message).toBe('The idempotency key must be a string of 1 to 200 characters.');
  });

  it('two callers with the same key and arguments never share a result', async () => {
    const { tool, runs } = refundTool();
    const shared = middleware();
    const alice = await serve([tool], { middleware: shared, authInfo: authAs('alice') });
    const bob = await serve([tool], { middleware: shared, authInfo: authAs('bob') });
    const meta = { 'toolgate/idempotency-key': 'same-key' };
    const a = await alice.callTool('create_refund', refund, { meta });
    const b = await bob.callTool('create_refund', refund, { meta });
    expect(runs.count).toBe(2);
    expect(a.structuredContent).toMatchObject({ refund_id: 'R-1' });
    expect(b.structuredContent).toMatchObject({ refund_id: 'R-2' });
    expect((await bob.callTool('create_refund', { ...refund }, { meta })).structuredContent).toMatchObject({
      refund_id: 'R-2',
    });
  });
});

describe('idempotency: replicas sharing a store', () => {
  it('concurrent identical calls split over two servers with their own middleware run once', async () => {
    const { tool, runs } = refundTool({ delayMs: 150 });
    const store = createMemoryStore();
    const one = await serve([tool], {
      middleware: [createIdempotency({ store, tools: { create_refund: {} } })],
    });
    const two = await serve([tool], {
      middleware: [createIdempotency({ store, tools: { create_refund: {} } })],
    });
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? one : two).callTool('create_refund', refund)),
    );
    expect(runs.count).toBe(1);
    for (const result of results) expect(result.structuredContent).toMatchObject({ refund_id: 'R-1' });
  });

  it('a call waiting on another replica follows its own cancellation and never runs', async () => {
    const store = createMemoryStore();
    const { tool } = refundTool();
    let release: () => void = () => {};
    const holder = createIdempotency({ store, tools: { create_refund: {} } });
    const held = holder(
      createTestContext({ tool, args: refund }),
      () =>
        new Promise((resolve) => {
          release = () => resolve(ok({ refund_id: 'R-held' }));
        }),
    );
    const controller = new AbortController();
    const waiter = createIdempotency({ store, tools: { create_refund: {} } });
    let ran = false;
    const waiting = waiter(
      createTestContext({ tool, args: refund, request: { signal: controller.signal } }),
      async () => {
        ran = true;
        return ok({});
      },
    );
    setTimeout(() => controller.abort(new Error('client cancelled')), 50);
    await expect(waiting).rejects.toThrow('client cancelled');
    expect(ran).toBe(false);
    release();
    expect((await held).structuredContent).toEqual({ ok: true, refund_id: 'R-held' });
  });

  it("a call polling another replica's claim holds no more abort listeners on its signal as the polls go on", async () => {
    const inner = createMemoryStore();
    let reads = 0;
    const store: KeyValueStore = {
      ...inner,
      get: (key, op) => {
        reads += 1;
        return inner.get(key, op);
      },
    };
    const { tool } = refundTool();
    let release: () => void = () => {};
    const holder = createIdempotency({ store, tools: { create_refund: {} } });
    const held = holder(
      createTestContext({ tool, args: refund }),
      () =>
        new Promise((resolve) => {
          release = () => resolve(ok({ refund_id: 'R-held' }));
        }),
    );
    let signal: AbortSignal | undefined;
    const capture: ToolMiddleware = (ctx, next) => {
      signal = ctx.signal;
      return next();
    };
    const client = await serve([tool], {
      middleware: [capture, createIdempotency({ store, pollIntervalMs: 1, tools: { create_refund: {} } })],
    });
    const waiting = client.callTool('create_refund', refund);
    await vi.waitFor(() => expect(reads).toBeGreaterThanOrEqual(5), { timeout: 5000, interval: 1 });
    const early = getEventListeners(signal!, 'abort').length;
    await vi.waitFor(() => expect(reads).toBeGreaterThanOrEqual(40), { timeout: 5000, interval: 1 });
    // One poll's own listeners at most may come and go between the two looks; one per poll, never.
    expect(getEventListeners(signal!, 'abort').length).toBeLessThanOrEqual(early + 2);
    release();
    expect((await held).structuredContent).toEqual({ ok: true, refund_id: 'R-held' });
    expect((await waiting).structuredContent).toEqual({ ok: true, refund_id: 'R-held' });
  });
});

describe('idempotency: store down', () => {
  const broken = (fault: 'reject' | 'hang'): KeyValueStore => {
    const op = () =>
      fault === 'reject'
        ? Promise.reject(new Error('ECONNREFUSED 127.0.0.1:6379'))
        : new Promise<never>(() => {});
    return { setIfAbsent: op, set: op, get: op, delete: op };
  };

  it('fails closed by default: unavailable, nothing ran, one log line for many calls', async () => {
    const { tool, runs } = refundTool();
    const entries: LogEntry[] = [];
    const client = await serve([tool], {
      middleware: [createIdempotency({ store: broken('reject'), tools: { create_refund: {} } })],
      logger: recordingLogger(entries),
    });
    const results = await Promise.all(
      [1, 2, 3].map((i) => client.callTool('create_refund', { ...refund, amount: i })),
    );
    expect(runs.count).toBe(0);
    for (const result of results) {
      expect(expectFailure(result)).toEqual({
        ok: false,
        error: 'unavailable',
        message: 'The server cannot make sure this call runs only once right now, so it did not run it.',
        hint: 'Nothing was done. Retry once in a few seconds; if it fails again, tell the user the service is unavailable.',
        retryable: true,
        retryAfterMs: 2000,
      });
    }
    expect(
      entries.filter((entry) => entry.message?.startsWith('idempotency: the store failed')),
    ).toHaveLength(1);
  });

  it('a store that never answers is cut off at storeTimeoutMs (no hang)', async () => {
    const { tool, runs } = refundTool();
    const client = await serve([tool], {
      middleware: [
        createIdempotency({ store: broken('hang'), storeTimeoutMs: 50, tools: { create_refund: {} } }),
      ],
      logger: recordingLogger([]),
    });
    expect(expectFailure(await client.callTool('create_refund', refund, { timeoutMs: 5000 })).error).toBe(
      'unavailable',
    );
    expect(runs.count).toBe(0);
  });

  it('fails open when asked: the call runs without the once-only guarantee', async () => {
    const { tool, runs } = refundTool();
    const client = await serve([tool], {
      middleware: [
        createIdempotency({ store: broken('reject'), onStoreFailure: 'open', tools: { create_refund: {} } }),
      ],
      logger: recordingLogger([]),
    });
    expect((await client.callTool('create_refund', refund)).structuredContent).toMatchObject({
      refund_id: 'R-1',
    });
    expect(runs.count).toBe(1);
  });
});

describe('createIdempotency: options', () => {
  it('refuses a per-tool option it does not know', () => {
    expect(() => createIdempotency({ tools: { create_refund: { windowMS: 5 } as never } })).toThrow(
      'createIdempotency: tools.create_refund has unknown option(s) windowMS',
    );
  });
  it('refuses a window that is not a positive integer', () => {
    expect(() => createIdempotency({ windowMs: 0 })).toThrow(
      'createIdempotency: windowMs must be a positive integer of milliseconds',
    );
  });
});
