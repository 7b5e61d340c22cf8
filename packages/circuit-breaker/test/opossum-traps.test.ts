// Each of opossum's traps for a tool server: first what opossum 9 itself does, then the guarantee here.
import { expectFailure, parseResultText } from '@toolgate/core/testing';
import CircuitBreaker from 'opossum';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type CircuitBreakerOptions, createCircuitBreaker } from '../src/index.js';
import { actions, closeAll, deferred, scriptedTool, serve, sleep, waitFor } from './harness.js';

const raw: CircuitBreaker[] = [];
afterEach(async () => {
  for (const breaker of raw.splice(0)) breaker.shutdown();
  vi.restoreAllMocks();
  await closeAll();
});

function rawBreaker<T>(
  action: () => Promise<T>,
  options: CircuitBreaker.Options = {},
): CircuitBreaker<[], T> {
  const breaker = new CircuitBreaker(action, options);
  raw.push(breaker as unknown as CircuitBreaker);
  return breaker;
}
const failing = () => Promise.reject(new Error('down'));

describe('opossum traps, each guarded', () => {
  it('volumeThreshold defaults to 0 in opossum (one failure opens); here the default needs 5 calls', async () => {
    const breaker = rawBreaker(failing);
    await expect(breaker.fire()).rejects.toThrow('down');
    expect(breaker.opened).toBe(true);

    const track = scriptedTool('track_shipment', Array(5).fill('unavailable'));
    const h = await serve([track]);
    for (let i = 0; i < 4; i += 1) await h.client.callTool('track_shipment', {});
    expect(h.breakers.stats().track_shipment!.state).toBe('closed');
    await h.client.callTool('track_shipment', {});
    expect(h.breakers.stats().track_shipment!.state).toBe('open');
  });

  it('an errorFilter-excluded error counts as a success in opossum and closes a half-open breaker; model mistakes here do not', async () => {
    let mistake = false;
    const breaker = rawBreaker(() => (mistake ? Promise.reject(new Error('not_found')) : failing()), {
      resetTimeout: 50,
      errorFilter: (error: Error) => error.message === 'not_found',
    });
    await expect(breaker.fire()).rejects.toThrow('down');
    await sleep(80);
    expect(breaker.halfOpen).toBe(true);
    mistake = true;
    await expect(breaker.fire()).rejects.toThrow('not_found');
    expect(breaker.closed).toBe(true);

    const track = scriptedTool('track_shipment', ['unavailable', 'not_found']);
    const h = await serve([track], { volumeThreshold: 1, resetTimeout: 50 });
    await h.client.callTool('track_shipment', {});
    await sleep(80);
    expect(expectFailure(await h.client.callTool('track_shipment', {})).error).toBe('not_found');
    expect(h.breakers.stats().track_shipment!.state).toBe('half-open');
  });

  it('opossum counts its capacity refusals as failures and opens; here they are rate_limited and never counted', async () => {
    const gate = deferred();
    const breaker = rawBreaker(() => gate.promise, { capacity: 1 });
    const first = breaker.fire();
    await expect(breaker.fire()).rejects.toThrow('Semaphore locked');
    await expect(breaker.fire()).rejects.toThrow('Semaphore locked');
    expect(breaker.opened).toBe(true);
    gate.resolve();
    await first;

    const hold = deferred();
    const slow = scriptedTool('slow_lookup', [
      async () => {
        await hold.promise;
        return { content: [{ type: 'text', text: '{"ok":true}' }] };
      },
    ]);
    const h = await serve([slow], { capacity: 1, volumeThreshold: 1, errorThresholdPercentage: 0 });
    const running = h.client.callTool('slow_lookup', {});
    await waitFor(() => slow.calls === 1);
    expect(expectFailure(await h.client.callTool('slow_lookup', {})).error).toBe('rate_limited');
    expect(h.breakers.stats().slow_lookup!.state).toBe('closed');
    hold.resolve();
    await running;
  });

  it("opossum's timeout leaves the work running; here the handler's signal is aborted (see deadline.test.ts)", async () => {
    let finished = false;
    const breaker = rawBreaker(
      async () => {
        await sleep(60);
        finished = true;
      },
      { timeout: 20 },
    );
    await expect(breaker.fire()).rejects.toThrow('Timed out after 20ms');
    await waitFor(() => finished);
    expect(finished).toBe(true);

    let sawAbort = false;
    const track = scriptedTool('track_shipment', [
      async (ctx) => {
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
        sawAbort = true;
        throw ctx.signal.reason;
      },
    ]);
    const h = await serve([track], { timeout: 20 });
    expect(expectFailure(await h.client.callTool('track_shipment', {})).error).toBe('timeout');
    await waitFor(() => sawAbort);
  });

  it('in opossum a call started before the breaker opened closes it by succeeding during half-open; here it is stale', async () => {
    const slowGate = deferred();
    let slowTurn = true;
    const breaker = rawBreaker(() => (slowTurn ? slowGate.promise : failing()), { resetTimeout: 50 });
    const early = breaker.fire();
    slowTurn = false;
    await expect(breaker.fire()).rejects.toThrow('down');
    await expect(breaker.fire()).rejects.toThrow('down');
    await sleep(80);
    expect(breaker.halfOpen).toBe(true);
    slowGate.resolve();
    await early;
    expect(breaker.closed).toBe(true);

    const gate = deferred();
    const track = scriptedTool('track_shipment', [
      async () => {
        await gate.promise;
        return { content: [{ type: 'text', text: '{"ok":true}' }], structuredContent: { ok: true } };
      },
      'unavailable',
      'ok',
    ]);
    const h = await serve([track], { volumeThreshold: 1, resetTimeout: 50, timeout: 5_000 });
    const earlyCall = h.client.callTool('track_shipment', { id: 'early' });
    await waitFor(() => track.calls === 1);
    await h.client.callTool('track_shipment', {});
    await sleep(80);
    expect(h.breakers.stats().track_shipment!.state).toBe('half-open');
    gate.resolve();
    expect(parseResultText(await earlyCall)).toEqual({ ok: true });
    expect(h.breakers.stats().track_shipment!.state).toBe('half-open');
    expect(h.breakers.stats().track_shipment!.totals.stale).toBe(1);
    // The real probe still runs and decides.
    expect(parseResultText(await h.client.callTool('track_shipment', {}))).toEqual({ ok: true, call: 3 });
    expect(actions(h.decisions.at(-1))).toEqual(['half-open', 'close']);
  });

  it('opossum counts short-circuit rejections as fires, diluting the error rate; here the window holds real calls only', async () => {
    const breaker = rawBreaker(failing, { resetTimeout: 10_000 });
    await expect(breaker.fire()).rejects.toThrow('down');
    for (let i = 0; i < 9; i += 1) await expect(breaker.fire()).rejects.toThrow('Breaker is open');
    expect(breaker.stats.fires).toBe(10);
    expect(breaker.stats.failures).toBe(1);

    const track = scriptedTool('track_shipment', [
      'unavailable',
      'unavailable',
      'ok',
      'unavailable',
      'unavailable',
    ]);
    const h = await serve([track], { volumeThreshold: 2, resetTimeout: 60 });
    await h.client.callTool('track_shipment', {});
    await h.client.callTool('track_shipment', {});
    for (let i = 0; i < 9; i += 1) await h.client.callTool('track_shipment', {});
    expect(h.breakers.stats().track_shipment!.window).toEqual({
      calls: 2,
      successes: 0,
      failures: 2,
      errorPercentage: 100,
    });
    await sleep(100);
    await h.client.callTool('track_shipment', {}); // the probe succeeds and closes it
    // Two fresh failures reopen it at once: nothing dilutes them.
    await h.client.callTool('track_shipment', {});
    await h.client.callTool('track_shipment', {});
    expect(actions(h.decisions.at(-1))).toEqual(['open']);
    expect(track.calls).toBe(5);
  });

  it("opossum's constructor writes into the options it gets; here the caller's (even frozen) options are never touched", async () => {
    const given: CircuitBreaker.Options = { resetTimeout: 1_000 };
    rawBreaker(failing, given);
    expect(Object.keys(given).length).toBeGreaterThan(10);

    const options: CircuitBreakerOptions = deepFreeze({
      volumeThreshold: 1,
      tools: { track_shipment: { dependency: 'carrier-api' } },
      dependencies: { 'carrier-api': { resetTimeout: 5_000 } },
    });
    const snapshot = structuredClone(options);
    const track = scriptedTool('track_shipment', ['unavailable']);
    const h = await serve([track], options);
    await h.client.callTool('track_shipment', {});
    expect(h.breakers.stats()['carrier-api']!.state).toBe('open');
    expect(options).toEqual(snapshot);
  });

  it("timeout: 0 silently disables opossum's timeout; here it is refused, and false is the way to disable", async () => {
    let done = false;
    const breaker = rawBreaker(
      async () => {
        await sleep(30);
        done = true;
      },
      { timeout: 0 },
    );
    await breaker.fire();
    expect(done).toBe(true);

    expect(() => createCircuitBreaker({ timeout: 0 })).toThrow(
      new RangeError(
        'createCircuitBreaker: timeout must be a positive number of milliseconds, or false to disable the deadline',
      ),
    );
    expect(() => createCircuitBreaker({ tools: { slow: { timeout: 0 } } })).toThrow(
      'createCircuitBreaker: tools.slow: timeout must be a positive number',
    );
    expect(() => createCircuitBreaker({ timeout: false }).close()).not.toThrow();
  });

  it("one breaker per tool or dependency for the server's life, never one per call", async () => {
    const made = vi.spyOn(globalThis, 'setInterval');
    const track = scriptedTool('track_shipment');
    const eta = scriptedTool('get_carrier_eta');
    const h = await serve([track, eta], {
      tools: {
        track_shipment: { dependency: 'carrier-api' },
        get_carrier_eta: { dependency: 'carrier-api' },
      },
    });
    for (let i = 0; i < 20; i += 1) {
      await h.client.callTool('track_shipment', { id: `t${i}` });
      await h.client.callTool('get_carrier_eta', { id: `e${i}` });
    }
    expect(Object.keys(h.breakers.stats())).toEqual(['carrier-api']);
    expect(h.breakers.stats()['carrier-api']!.window.calls).toBe(40);
    // One bucket-rotation timer for the one breaker.
    expect(made).toHaveBeenCalledTimes(1);
  });

  it('shutdown() stops the timers of every breaker; later calls are answered unavailable', async () => {
    const made = vi.spyOn(globalThis, 'setInterval');
    const cleared = vi.spyOn(globalThis, 'clearInterval');
    const track = scriptedTool('track_shipment', ['unavailable']);
    const h = await serve([track], { volumeThreshold: 1, resetTimeout: 50 });
    await h.client.callTool('track_shipment', {});
    expect(h.breakers.stats().track_shipment!.state).toBe('open');
    const rotation = made.mock.results[0]!.value;
    h.breakers.shutdown();
    expect(cleared).toHaveBeenCalledWith(rotation);
    expect(h.breakers.stats()).toEqual({});
    await sleep(80);
    // The reset timer was cleared too: no half-open transition was ever logged.
    expect(h.logs.some((entry) => entry.message?.includes('half-open'))).toBe(false);
    expect(expectFailure(await h.client.callTool('track_shipment', {}))).toEqual({
      ok: false,
      error: 'unavailable',
      message: 'track_shipment is unavailable: the server is shutting down.',
      hint: 'Do not retry now; tell the user the service is restarting.',
      retryable: true,
    });
    expect(track.calls).toBe(1);
    // A policy's answer, recorded as such (audit shows why; idempotency never keeps it as the outcome).
    expect(h.decisions.at(-1)).toEqual([
      {
        by: 'circuit-breaker',
        action: 'shut-down',
        reason: 'the breakers were closed: the server is shutting down',
        detail: {},
      },
    ]);
  });
});

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
