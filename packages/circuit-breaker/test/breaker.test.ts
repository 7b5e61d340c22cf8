import { AsyncLocalStorage, createHook } from 'node:async_hooks';
import { createSilentLogger, type ToolMiddleware } from '@toolgate/core';
import { expectFailure, type LogEntry, parseResultText, recordingLogger } from '@toolgate/core/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CircuitEvent } from '../src/index.js';
import { actions, closeAll, deferred, scriptedTool, serve, sleep, waitFor } from './harness.js';

afterEach(closeAll);

const OPEN_HINT =
  'Do not retry now. Tell the user that track_shipment is unavailable at the moment; it can be tried once more after retryAfterMs.';

describe('a handler failing on a schedule', () => {
  it('opens the breaker at the threshold, then fails fast without reaching the handler', async () => {
    const track = scriptedTool('track_shipment', ['ok', 'unavailable', 'throw', 'unavailable']);
    const h = await serve([track], {
      volumeThreshold: 4,
      errorThresholdPercentage: 50,
      resetTimeout: 10_000,
    });

    expect(parseResultText(await h.client.callTool('track_shipment', {}))).toEqual({ ok: true, call: 1 });
    expect(expectFailure(await h.client.callTool('track_shipment', {})).error).toBe('unavailable');
    // A thrown error still propagates (core answers `internal`), and it counts.
    expect(expectFailure(await h.client.callTool('track_shipment', {})).error).toBe('internal');
    expect(h.breakers.stats().track_shipment!.state).toBe('closed');
    // 3 failures of 4 calls: 75% > 50% with the volume reached.
    expect(expectFailure(await h.client.callTool('track_shipment', {})).message).toBe(
      'Scripted unavailable.',
    );
    expect(h.decisions[3]).toEqual([
      {
        by: 'circuit-breaker',
        action: 'open',
        reason: '3 of 4 calls failed in the window',
        detail: { breaker: 'track_shipment' },
      },
    ]);
    expect(track.calls).toBe(4);

    for (let i = 0; i < 5; i += 1) {
      const envelope = expectFailure(await h.client.callTool('track_shipment', { id: `o${i}` }));
      expect(envelope).toEqual({
        ok: false,
        error: 'unavailable',
        message: 'track_shipment is temporarily unavailable: a service it depends on is failing.',
        hint: OPEN_HINT,
        retryable: true,
        retryAfterMs: envelope.retryAfterMs,
      });
      expect(envelope.retryAfterMs).toBeGreaterThan(9_000);
      expect(envelope.retryAfterMs).toBeLessThanOrEqual(10_000);
    }
    expect(track.calls).toBe(4);
    expect(h.decisions[4]).toEqual([
      {
        by: 'circuit-breaker',
        action: 'short-circuit',
        reason: 'breaker open',
        detail: { breaker: 'track_shipment', state: 'open', retryAfterMs: expect.any(Number) },
      },
    ]);
    const stats = h.breakers.stats().track_shipment!;
    expect(stats).toMatchObject({
      name: 'track_shipment',
      state: 'open',
      tools: ['track_shipment'],
      inFlight: 0,
      window: { calls: 4, successes: 1, failures: 3, errorPercentage: 75 },
      totals: { successes: 1, failures: 3, shortCircuits: 5, opened: 1, closed: 0, ignored: 0, stale: 0 },
    });
    expect(h.logs.filter((entry) => entry.message?.startsWith('circuit breaker'))).toEqual([
      {
        level: 'warn',
        message: 'circuit breaker opened',
        fields: {
          breaker: 'track_shipment',
          tools: ['track_shipment'],
          state: 'open',
          reason: '3 of 4 calls failed in the window',
          calls: 4,
          failures: 3,
          resetTimeoutMs: 10_000,
        },
      },
    ]);
  });

  it('goes half-open after the reset timeout and closes after one successful probe', async () => {
    const track = scriptedTool('track_shipment', ['unavailable', 'unavailable']);
    const h = await serve([track], { volumeThreshold: 2, resetTimeout: 120 });
    await h.client.callTool('track_shipment', {});
    await h.client.callTool('track_shipment', {});
    expect(h.breakers.stats().track_shipment!.state).toBe('open');
    expect(h.breakers.state('track_shipment')).toBe('open');
    expect(h.breakers.state('no_such_breaker')).toBeUndefined();
    expect(expectFailure(await h.client.callTool('track_shipment', {})).error).toBe('unavailable');
    expect(track.calls).toBe(2);

    await sleep(180);
    expect(h.breakers.state('track_shipment')).toBe('half-open');
    expect(parseResultText(await h.client.callTool('track_shipment', {}))).toEqual({ ok: true, call: 3 });
    expect(h.decisions.at(-1)).toEqual([
      {
        by: 'circuit-breaker',
        action: 'half-open',
        reason: 'probe call after the reset timeout',
        detail: { breaker: 'track_shipment' },
      },
      {
        by: 'circuit-breaker',
        action: 'close',
        reason: 'the probe call succeeded',
        detail: { breaker: 'track_shipment' },
      },
    ]);
    const stats = h.breakers.stats().track_shipment!;
    expect(stats.state).toBe('closed');
    // The window starts empty once closed: the failures that opened it no longer weigh.
    expect(stats.window).toEqual({ calls: 0, successes: 0, failures: 0, errorPercentage: 0 });
    expect(stats.totals).toMatchObject({ opened: 1, closed: 1, successes: 1, failures: 2, shortCircuits: 1 });
    expect(parseResultText(await h.client.callTool('track_shipment', {}))).toEqual({ ok: true, call: 4 });
    expect(
      h.logs.filter((entry) => entry.message?.startsWith('circuit breaker')).map((e) => [e.level, e.message]),
    ).toEqual([
      ['warn', 'circuit breaker opened'],
      ['info', 'circuit breaker half-open: the next call is a probe'],
      ['info', 'circuit breaker closed'],
    ]);
  });

  it('retryAfterMs counts down the reset timer, not the wall clock: a clock step neither stretches nor zeroes it', async () => {
    const track = scriptedTool('track_shipment', ['unavailable']);
    const h = await serve([track], { volumeThreshold: 1, resetTimeout: 60_000 });
    await h.client.callTool('track_shipment', {});
    expect(h.breakers.state('track_shipment')).toBe('open');
    const realNow = Date.now();
    for (const stepMs of [-3_600_000, 3_600_000]) {
      // The host's clock is stepped (NTP, a VM resumed) an hour back, then an hour ahead.
      const clock = vi.spyOn(Date, 'now').mockReturnValue(realNow + stepMs);
      try {
        const envelope = expectFailure(await h.client.callTool('track_shipment', {}));
        expect(envelope.error).toBe('unavailable');
        // The reset timer is monotonic: the breaker stays open for its minute whatever the clock says.
        expect(envelope.retryAfterMs).toBeGreaterThan(1);
        expect(envelope.retryAfterMs).toBeLessThanOrEqual(60_000);
      } finally {
        clock.mockRestore();
      }
    }
    expect(track.calls).toBe(1);
  });

  it('half-open lets exactly one probe through; a failing probe reopens it', async () => {
    const probe = deferred();
    const track = scriptedTool('track_shipment', [
      'unavailable',
      'unavailable',
      async () => {
        await probe.promise;
        return expectFailureResult();
      },
    ]);
    const h = await serve([track], { volumeThreshold: 2, resetTimeout: 100, timeout: 5_000 });
    await h.client.callTool('track_shipment', {});
    await h.client.callTool('track_shipment', {});
    await sleep(150);

    const probing = h.client.callTool('track_shipment', {});
    await waitFor(() => track.calls === 3);
    // retryAfterMs: until the probe ends or no longer holds half-open (resetTimeout after it began).
    let last = 101;
    for (let i = 0; i < 3; i += 1) {
      const answer = expectFailure(await h.client.callTool('track_shipment', { id: `x${i}` }));
      expect(answer).toEqual({
        ok: false,
        error: 'unavailable',
        message: 'track_shipment is temporarily unavailable: a service it depends on is being re-checked.',
        hint: OPEN_HINT,
        retryable: true,
        retryAfterMs: expect.any(Number),
      });
      expect(answer.retryAfterMs).toBeGreaterThan(0);
      expect(answer.retryAfterMs).toBeLessThanOrEqual(last);
      last = answer.retryAfterMs as number;
    }
    expect(track.calls).toBe(3);
    expect(actions(h.decisions.at(-1))).toEqual(['short-circuit']);
    expect(h.decisions.at(-1)![0]!.detail).toEqual({
      breaker: 'track_shipment',
      state: 'half-open',
      retryAfterMs: last,
    });

    probe.resolve();
    expect(expectFailure(await probing).error).toBe('unavailable');
    expect(actions(h.decisions.at(-1))).toEqual(['half-open', 'open']);
    expect(h.breakers.stats().track_shipment!.state).toBe('open');
    expect(expectFailure(await h.client.callTool('track_shipment', {})).message).toContain('is failing');
    expect(track.calls).toBe(3);
  });
});

describe('a breaker shared by a named dependency', () => {
  it('opens for every tool that guards the dependency, and only for them', async () => {
    const track = scriptedTool('track_shipment', ['unavailable', 'timeout', 'internal']);
    const eta = scriptedTool('get_carrier_eta');
    const status = scriptedTool('get_order_status', ['unavailable', 'unavailable', 'unavailable']);
    const h = await serve([track, eta, status], {
      volumeThreshold: 10,
      tools: {
        track_shipment: { dependency: 'carrier-api' },
        get_carrier_eta: { dependency: 'carrier-api' },
      },
      dependencies: { 'carrier-api': { volumeThreshold: 4, resetTimeout: 10_000 } },
    });
    expect(parseResultText(await h.client.callTool('get_carrier_eta', {}))).toEqual({ ok: true, call: 1 });
    for (let i = 0; i < 3; i += 1) await h.client.callTool('track_shipment', {});
    // 3 failures of 4 calls on carrier-api (its own volumeThreshold of 4 applies, not the global 10).
    expect(actions(h.decisions.at(-1))).toEqual(['open']);
    expect(h.decisions.at(-1)![0]!.detail).toEqual({ breaker: 'carrier-api' });

    const envelope = expectFailure(await h.client.callTool('get_carrier_eta', {}));
    expect(envelope.error).toBe('unavailable');
    expect(envelope.message).toBe(
      'get_carrier_eta is temporarily unavailable: a service it depends on is failing.',
    );
    expect(eta.calls).toBe(1);

    // Another tool keeps its own breaker and the global volume threshold of 10.
    for (let i = 0; i < 3; i += 1) await h.client.callTool('get_order_status', {});
    expect(status.calls).toBe(3);
    const stats = h.breakers.stats();
    expect(Object.keys(stats).sort()).toEqual(['carrier-api', 'get_order_status']);
    expect(stats['carrier-api']!.tools.sort()).toEqual(['get_carrier_eta', 'track_shipment']);
    expect(stats['carrier-api']!.state).toBe('open');
    expect(stats.get_order_status!.state).toBe('closed');
  });

  it('a tool that names another tool as its dependency shares that breaker with its settings, whichever tool is called first', async () => {
    for (const first of ['get_carrier_eta', 'track_shipment']) {
      const track = scriptedTool('track_shipment', ['unavailable']);
      const eta = scriptedTool('get_carrier_eta', ['unavailable']);
      const h = await serve([track, eta], {
        volumeThreshold: 10,
        tools: {
          // The breaker named track_shipment is configured here, and get_carrier_eta shares it.
          track_shipment: { volumeThreshold: 1, consecutiveFailures: 1, resetTimeout: 60_000 },
          get_carrier_eta: { dependency: 'track_shipment' },
        },
      });
      expect(expectFailure(await h.client.callTool(first, {})).error).toBe('unavailable');
      expect(actions(h.decisions.at(-1))).toEqual(['open']);
      const second = first === 'track_shipment' ? 'get_carrier_eta' : 'track_shipment';
      const envelope = expectFailure(await h.client.callTool(second, {}));
      expect(envelope.message).toBe(
        `${second} is temporarily unavailable: a service it depends on is failing.`,
      );
      expect(Object.keys(h.breakers.stats())).toEqual(['track_shipment']);
      expect(h.breakers.stats().track_shipment!.tools.sort()).toEqual(['get_carrier_eta', 'track_shipment']);
      expect(track.calls + eta.calls).toBe(1);
      await h.close();
    }
  });

  it('an opted-out tool is never guarded and gets no breaker', async () => {
    const poll = scriptedTool('poll_job', Array(12).fill('unavailable'));
    const h = await serve([poll], { volumeThreshold: 1, tools: { poll_job: false } });
    for (let i = 0; i < 12; i += 1)
      expect(expectFailure(await h.client.callTool('poll_job', {})).error).toBe('unavailable');
    expect(poll.calls).toBe(12);
    expect(h.breakers.stats()).toEqual({});
  });

  it('per-tool settings override the global ones', async () => {
    const fragile = scriptedTool('fragile', ['unavailable']);
    const sturdy = scriptedTool('sturdy', ['unavailable']);
    const h = await serve([fragile, sturdy], {
      volumeThreshold: 5,
      tools: { fragile: { volumeThreshold: 1 } },
    });
    await h.client.callTool('fragile', {});
    await h.client.callTool('sturdy', {});
    expect(h.breakers.stats().fragile!.state).toBe('open');
    expect(h.breakers.stats().sturdy!.state).toBe('closed');
  });
});

describe('events, logs and decisions', () => {
  it('reports open, half-open and close to listeners; a throwing listener is logged, never fatal', async () => {
    const track = scriptedTool('track_shipment', ['unavailable']);
    const h = await serve([track], { volumeThreshold: 1, resetTimeout: 80 });
    const seen: CircuitEvent[] = [];
    for (const type of ['open', 'half-open', 'close', 'short-circuit'] as const) {
      h.breakers.on(type, (event) => seen.push(event));
    }
    const unsubscribe = h.breakers.on('open', () => {
      throw new Error('listener bug');
    });
    expect(expectFailure(await h.client.callTool('track_shipment', {})).message).toBe(
      'Scripted unavailable.',
    );
    unsubscribe();
    await h.client.callTool('track_shipment', {});
    await sleep(130);
    await h.client.callTool('track_shipment', {});
    expect(seen.map(({ type, breaker, state, toolName }) => ({ type, breaker, state, toolName }))).toEqual([
      { type: 'open', breaker: 'track_shipment', state: 'open', toolName: 'track_shipment' },
      { type: 'short-circuit', breaker: 'track_shipment', state: 'open', toolName: 'track_shipment' },
      { type: 'half-open', breaker: 'track_shipment', state: 'half-open', toolName: undefined },
      { type: 'close', breaker: 'track_shipment', state: 'closed', toolName: 'track_shipment' },
    ]);
    expect(seen.every((event) => typeof event.at === 'number')).toBe(true);
    const listenerErrors = h.logs.filter((entry) => entry.message === 'circuit breaker listener threw');
    expect(listenerErrors).toHaveLength(1);
    expect(listenerErrors[0]!.fields).toMatchObject({ event: 'open', breaker: 'track_shipment' });
  });

  it('a listener that throws on every short-circuit is logged once, not once per call, through a long outage', async () => {
    const track = scriptedTool('track_shipment', ['unavailable']);
    const h = await serve([track], { volumeThreshold: 1, resetTimeout: 60_000 });
    // A metrics hook with a bug (a label it never declared): it throws on every event.
    h.breakers.on('short-circuit', () => {
      throw new Error('Added label "tool" is not included in initial labelset');
    });
    await h.client.callTool('track_shipment', {});
    for (let i = 0; i < 50; i += 1) {
      expect(expectFailure(await h.client.callTool('track_shipment', { id: `c${i}` })).error).toBe(
        'unavailable',
      );
    }
    expect(h.breakers.stats().track_shipment!.totals.shortCircuits).toBe(50);
    const listenerErrors = h.logs.filter((entry) => entry.message === 'circuit breaker listener threw');
    expect(listenerErrors).toHaveLength(1);
    expect(listenerErrors[0]!.fields).toMatchObject({ event: 'short-circuit', breaker: 'track_shipment' });
    // The count of the lines held back is written when the breakers close.
    h.breakers.close();
    expect(h.logs.filter((entry) => entry.message === 'circuit breaker listener threw')).toHaveLength(2);
    expect(h.logs.at(-1)!.fields).toMatchObject({ event: 'short-circuit', suppressed: 49 });
  });

  it("the timer-driven half-open runs outside every call: its listeners and log line carry no call's context", async () => {
    // What an OpenTelemetry context manager does: each call's chain runs in its own async context.
    const calls = new AsyncLocalStorage<string>();
    const inCall: ToolMiddleware = (ctx, next) => calls.run(`call ${String(ctx.request.id)}`, next);
    const contexts: Array<[string, string | undefined]> = [];
    const logger = {
      ...createSilentLogger(),
      info: (_fields: unknown, message?: string) => contexts.push([`log ${message}`, calls.getStore()]),
    };
    const track = scriptedTool('track_shipment', ['unavailable']);
    const h = await serve([track], { volumeThreshold: 1, resetTimeout: 30, logger }, [inCall]);
    for (const type of ['open', 'half-open'] as const) {
      h.breakers.on(type, () => contexts.push([type, calls.getStore()]));
    }
    await h.client.callTool('track_shipment', {});
    await waitFor(() => contexts.length === 3);
    expect(contexts).toEqual([
      // Opening is this call's doing: its own context.
      ['open', expect.stringMatching(/^call \d+$/)],
      ['log circuit breaker half-open: the next call is a probe', undefined],
      ['half-open', undefined],
    ]);
  });

  it("a breaker made by a call keeps none of that call's context alive in its timers", async () => {
    const calls = new AsyncLocalStorage<string>();
    const inCall: ToolMiddleware = (ctx, next) => calls.run(`call ${String(ctx.request.id)}`, next);
    // Each repeating timer made while the first call runs, with the context it was made in (a
    // timer keeps that context, and whatever the call's span and baggage hold, as long as it lives).
    const intervals: Array<string | undefined> = [];
    const hook = createHook({
      init(_id, type, _trigger, resource) {
        if (type === 'Timeout' && (resource as { _repeat?: unknown })._repeat)
          intervals.push(calls.getStore());
      },
    });
    const track = scriptedTool('track_shipment');
    const h = await serve([track], {}, [inCall]);
    hook.enable();
    try {
      await h.client.callTool('track_shipment', {});
    } finally {
      hook.disable();
    }
    // opossum's rolling window rotates on an interval made with the breaker.
    expect(intervals.length).toBeGreaterThan(0);
    expect(intervals).toEqual(intervals.map(() => undefined));
  });

  it('logs state changes to options.logger when given, instead of ctx.logger', async () => {
    const own: LogEntry[] = [];
    const track = scriptedTool('track_shipment', ['unavailable']);
    const h = await serve([track], { volumeThreshold: 1, logger: recordingLogger(own) });
    await h.client.callTool('track_shipment', {});
    expect(own.map((entry) => [entry.level, entry.message])).toEqual([['warn', 'circuit breaker opened']]);
    expect(h.logs.filter((entry) => entry.message?.startsWith('circuit breaker'))).toEqual([]);
  });
});

describe('calls the breaker leaves alone', () => {
  it('refused arguments and unknown tools pass straight through, and make no breaker', async () => {
    const track = scriptedTool('track_shipment');
    const h = await serve([track], { volumeThreshold: 1, errorThresholdPercentage: 0 });
    for (let i = 0; i < 5; i += 1) {
      expect(expectFailure(await h.client.callTool('track_shipment', { id: 42 })).error).toBe(
        'invalid_argument',
      );
    }
    // A hostile client inventing tool names gets -32602 and never grows the breaker map.
    for (let i = 0; i < 50; i += 1) {
      await expect(h.client.callTool(`evil_${i}`, {})).rejects.toThrow(`Unknown tool: evil_${i}`);
    }
    expect(h.breakers.stats()).toEqual({});
    expect(h.decisions).toHaveLength(55);
    expect(h.decisions.every((list) => list.length === 0)).toBe(true);
    expect(track.calls).toBe(0);
  });
});

function expectFailureResult() {
  return {
    isError: true,
    content: [{ type: 'text' as const, text: '{"ok":false,"error":"unavailable"}' }],
    _meta: {
      'toolgate/error': {
        ok: false,
        error: 'unavailable',
        message: 'Still down.',
        hint: 'Later.',
        retryable: true,
      },
    },
  };
}
