import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ERROR_CODE_DEFAULTS, ok, outcomeOf, type ToolContext, type ToolMiddleware } from '@toolgate/core';
import { expectFailure, parseResultText } from '@toolgate/core/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  actions,
  closeAll,
  type Deferred,
  deferred,
  scriptedTool,
  serve,
  sleep,
  waitFor,
} from './harness.js';

afterEach(closeAll);

/** A real HTTP server on 127.0.0.1 that never answers, and tells when a client gives up on a request. */
let carrier: Server;
let carrierUrl: string;
let requestSeen: Deferred<void>;
let requestClosed: Deferred<void>;
beforeEach(async () => {
  requestSeen = deferred();
  requestClosed = deferred();
  carrier = createServer((req, res) => {
    if (req.url === '/warm') {
      res.writeHead(204).end();
      return;
    }
    requestSeen.resolve();
    req.socket.on('close', () => requestClosed.resolve());
  });
  await new Promise<void>((resolve) => carrier.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(carrier.address() as AddressInfo).port}`;
  carrierUrl = `${origin}/track`;
  // Node loads its fetch implementation on first use; keep that out of the deadline under test.
  await fetch(`${origin}/warm`);
});
afterEach(async () => {
  carrier.closeAllConnections();
  await new Promise((resolve) => carrier.close(resolve));
});

describe("the breaker's deadline", () => {
  it('aborts the handler through ctx.signal, so its HTTP request is really cancelled, and answers timeout', async () => {
    const seen: { aborted?: boolean; reason?: string; fetchError?: string } = {};
    const track = scriptedTool('track_shipment', [
      async (ctx) => {
        try {
          await fetch(carrierUrl, { signal: ctx.signal });
          return ok({ unexpected: true });
        } catch (error) {
          seen.aborted = ctx.signal.aborted;
          seen.reason = (ctx.signal.reason as DOMException).name;
          seen.fetchError = (error as Error).name;
          throw error;
        }
      },
    ]);
    const h = await serve([track], { timeout: 250 });
    const result = await h.client.callTool('track_shipment', {});
    expect(expectFailure(result)).toEqual({
      ok: false,
      error: 'timeout',
      message: 'track_shipment did not finish within 250 ms and was cancelled.',
      hint: ERROR_CODE_DEFAULTS.timeout.hint,
      retryable: true,
    });
    // The carrier saw the request arrive and then the connection drop: the work stopped for real.
    await requestSeen.promise;
    await requestClosed.promise;
    await waitFor(() => seen.fetchError !== undefined);
    expect(seen).toEqual({ aborted: true, reason: 'TimeoutError', fetchError: 'TimeoutError' });
    expect(h.decisions[0]).toEqual([
      {
        by: 'circuit-breaker',
        action: 'timeout',
        reason: "no answer within 250 ms; the call's signal was aborted",
        detail: { breaker: 'track_shipment', timeoutMs: 250 },
      },
    ]);
    // A timeout is a dependency failure.
    expect(h.breakers.stats().track_shipment!.totals).toMatchObject({ timeouts: 1, failures: 1 });
    expect(h.breakers.stats().track_shipment!.window.failures).toBe(1);
  });

  it('opens the breaker after enough timeouts', async () => {
    const hang = async () => {
      await sleep(1_000);
      return ok({});
    };
    const track = scriptedTool('track_shipment', [hang, hang]);
    const h = await serve([track], { timeout: 30, volumeThreshold: 2 });
    await h.client.callTool('track_shipment', {});
    expect(expectFailure(await h.client.callTool('track_shipment', {})).error).toBe('timeout');
    expect(actions(h.decisions.at(-1))).toEqual(['timeout', 'open']);
    expect(expectFailure(await h.client.callTool('track_shipment', {})).error).toBe('unavailable');
    expect(track.calls).toBe(2);
  });

  it('a handler that ignores its signal keeps its capacity slot until it really returns', async () => {
    const release = deferred();
    let lateSignalAborted: boolean | undefined;
    const slow = scriptedTool('slow_lookup', [
      async (ctx) => {
        await release.promise;
        // First read after the deadline: the signal it gets is already aborted.
        lateSignalAborted = ctx.signal.aborted;
        return ok({});
      },
    ]);
    const h = await serve([slow], { timeout: 40, capacity: 1 });
    expect(expectFailure(await h.client.callTool('slow_lookup', {})).error).toBe('timeout');
    expect(h.breakers.stats().slow_lookup!.inFlight).toBe(1);
    expect(expectFailure(await h.client.callTool('slow_lookup', {})).error).toBe('rate_limited');
    release.resolve();
    await waitFor(() => h.breakers.stats().slow_lookup!.inFlight === 0);
    expect(lateSignalAborted).toBe(true);
    expect(parseResultText(await h.client.callTool('slow_lookup', {}))).toEqual({ ok: true, call: 2 });
  });

  it('gives each of several concurrent calls its own full deadline', async () => {
    const hang = async (ctx: ToolContext) => {
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
      return ok({});
    };
    const slow = scriptedTool('slow_lookup', [hang, 'ok', hang]);
    const h = await serve([slow], { timeout: 80 });
    const timed = async (id: string) => {
      const started = performance.now();
      const result = await h.client.callTool('slow_lookup', { id });
      return { outcome: outcomeOf(result as never), elapsed: performance.now() - started };
    };
    const first = timed('a');
    await waitFor(() => slow.calls === 1);
    const fast = await timed('b');
    await sleep(40);
    const second = timed('c');
    const [a, c] = await Promise.all([first, second]);
    expect(fast.outcome).toBe('ok');
    expect(a.outcome).toBe('timeout');
    expect(c.outcome).toBe('timeout');
    // The later call was not expired with the earlier one: it had its own 80 ms.
    expect(a.elapsed).toBeGreaterThanOrEqual(75);
    expect(c.elapsed).toBeGreaterThanOrEqual(75);
    expect(h.breakers.stats().slow_lookup!.totals.timeouts).toBe(2);
  });

  it('a middleware further in that combines ctx.signal with its own still passes the deadline on', async () => {
    let reason: string | undefined;
    const own = new AbortController();
    const combine: ToolMiddleware = (ctx, next) => {
      ctx.signal = AbortSignal.any([ctx.signal, own.signal]);
      return next();
    };
    const slow = scriptedTool(
      'slow_lookup',
      [
        async (ctx) => {
          await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
          reason = (ctx.signal.reason as DOMException).name;
          return ok({});
        },
      ],
      [combine],
    );
    const h = await serve([slow], { timeout: 40 });
    expect(expectFailure(await h.client.callTool('slow_lookup', {})).error).toBe('timeout');
    await waitFor(() => reason !== undefined);
    expect(reason).toBe('TimeoutError');
  });

  it('timeout: false sets no deadline and leaves ctx.signal as the request signal', async () => {
    let sameSignal: boolean | undefined;
    const slow = scriptedTool('slow_lookup', [
      async (ctx) => {
        sameSignal = ctx.signal === ctx.request.signal;
        await sleep(60);
        return ok({ done: true });
      },
    ]);
    const h = await serve([slow], { timeout: 20, tools: { slow_lookup: { timeout: false } } });
    expect(parseResultText(await h.client.callTool('slow_lookup', {}))).toEqual({ ok: true, done: true });
    expect(sameSignal).toBe(true);
  });
});

describe("the caller's abort signal", () => {
  it('a cancelled call stops waiting, the handler sees the abort, and nothing is counted', async () => {
    const handlerDone = deferred();
    let abortedWhileRunning: boolean | undefined;
    const lookup = scriptedTool('lookup', [
      async (ctx) => {
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
        abortedWhileRunning = ctx.signal.aborted;
        // It ignores the abort for a while; the breaker has answered by then.
        await handlerDone.promise;
        return ok({});
      },
    ]);
    const h = await serve([lookup], { timeout: 5_000, volumeThreshold: 1, errorThresholdPercentage: 0 });
    const controller = new AbortController();
    const call = h.client.callTool('lookup', {}, { signal: controller.signal });
    await waitFor(() => lookup.calls === 1);
    controller.abort();
    await expect(call).rejects.toThrow();
    await waitFor(() => h.results.length === 1);
    expect(abortedWhileRunning).toBe(true);
    expect(expectFailure(h.results[0]!)).toEqual({
      ok: false,
      error: 'timeout',
      message: 'lookup was cancelled before it finished.',
      hint: 'The request was cancelled. Call again only if the answer is still needed.',
      retryable: true,
    });
    expect(h.breakers.stats().lookup!.totals).toMatchObject({ ignored: 1, failures: 0, timeouts: 0 });
    expect(h.breakers.stats().lookup!.inFlight).toBe(1);
    handlerDone.resolve();
    await waitFor(() => h.breakers.stats().lookup!.inFlight === 0);
    expect(h.breakers.stats().lookup!.state).toBe('closed');
  });

  it('a cancelled call stops waiting even when the handler never reads ctx.signal', async () => {
    const handlerDone = deferred();
    const lookup = scriptedTool('lookup', [
      async () => {
        await handlerDone.promise;
        return ok({});
      },
    ]);
    const h = await serve([lookup], { timeout: 5_000, volumeThreshold: 1, errorThresholdPercentage: 0 });
    const controller = new AbortController();
    const call = h.client.callTool('lookup', {}, { signal: controller.signal });
    await waitFor(() => lookup.calls === 1);
    controller.abort();
    await expect(call).rejects.toThrow();
    await waitFor(() => h.results.length === 1);
    expect(expectFailure(h.results[0]!)).toEqual({
      ok: false,
      error: 'timeout',
      message: 'lookup was cancelled before it finished.',
      hint: 'The request was cancelled. Call again only if the answer is still needed.',
      retryable: true,
    });
    expect(h.breakers.stats().lookup!.totals).toMatchObject({ ignored: 1, successes: 0, failures: 0 });
    expect(h.breakers.stats().lookup!.inFlight).toBe(1);
    handlerDone.resolve();
    await waitFor(() => h.breakers.stats().lookup!.inFlight === 0);
    expect(h.breakers.stats().lookup!.totals).toMatchObject({ ignored: 1, successes: 0, failures: 0 });
  });
});
