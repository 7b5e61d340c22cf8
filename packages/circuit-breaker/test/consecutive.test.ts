import { expectFailure, parseResultText } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { actions, closeAll, deferred, scriptedTool, serve, sleep, waitFor } from './harness.js';

afterEach(closeAll);

const breakerLines = (logs: { message?: string | undefined }[]) =>
  logs.filter((entry) => entry.message?.startsWith('circuit breaker')).map((entry) => entry.message);

describe('consecutive failures', () => {
  it('open the breaker after 5 in a row by default, even after 100 healthy calls fill the window', async () => {
    const lookup = scriptedTool('lookup');
    const h = await serve([lookup], { resetTimeout: 10_000 });
    for (let i = 0; i < 100; i += 1) await h.client.callTool('lookup', { id: `h${i}` });
    // The dependency dies: every call fails the way a refused connection does.
    lookup.script.push('throw', 'throw', 'throw', 'throw', 'throw', 'throw', 'throw');
    for (let i = 0; i < 4; i += 1) {
      expect(expectFailure(await h.client.callTool('lookup', { id: `d${i}` })).error).toBe('internal');
    }
    expect(h.breakers.stats().lookup!.state).toBe('closed');
    await h.client.callTool('lookup', { id: 'd4' });
    expect(h.breakers.stats().lookup!.state).toBe('open');
    expect(h.decisions.at(-1)).toEqual([
      {
        by: 'circuit-breaker',
        action: 'open',
        reason: '5 failures in a row',
        detail: { breaker: 'lookup' },
      },
    ]);
    // 5 of 105 calls failed: the 50% rule alone would have kept sending calls to the dead dependency.
    expect(h.breakers.stats().lookup!.window).toMatchObject({ calls: 105, failures: 5 });
    expect(lookup.calls).toBe(105);
    const envelope = expectFailure(await h.client.callTool('lookup', { id: 'd5' }));
    expect(envelope).toMatchObject({ error: 'unavailable', retryable: true });
    expect(envelope.retryAfterMs).toBeGreaterThan(9_000);
    expect(lookup.calls).toBe(105);
    expect(h.logs.filter((entry) => entry.message === 'circuit breaker opened')).toEqual([
      {
        level: 'warn',
        message: 'circuit breaker opened',
        fields: {
          breaker: 'lookup',
          tools: ['lookup'],
          state: 'open',
          reason: '5 failures in a row',
          calls: 105,
          failures: 5,
          resetTimeoutMs: 10_000,
        },
      },
    ]);
  });

  it('a success resets the streak; model mistakes neither count nor reset it', async () => {
    const lookup = scriptedTool('lookup', [
      'unavailable',
      'unavailable',
      'unavailable',
      'ok',
      'unavailable',
      'unavailable',
      'not_found',
      'invalid_argument',
      'unavailable',
      'unavailable',
    ]);
    const h = await serve([lookup], { consecutiveFailures: 4, volumeThreshold: 100 });
    for (let i = 0; i < 9; i += 1) await h.client.callTool('lookup', { id: `c${i}` });
    expect(h.breakers.stats().lookup!.state).toBe('closed');
    await h.client.callTool('lookup', { id: 'c9' });
    expect(h.breakers.stats().lookup!.state).toBe('open');
    expect(actions(h.decisions.at(-1))).toEqual(['open']);
  });

  it('consecutiveFailures: false leaves only the error-rate rule', async () => {
    const lookup = scriptedTool('lookup', Array(20).fill('unavailable'));
    const h = await serve([lookup], { consecutiveFailures: false, volumeThreshold: 30 });
    for (let i = 0; i < 20; i += 1) await h.client.callTool('lookup', { id: `f${i}` });
    expect(h.breakers.stats().lookup!.state).toBe('closed');
    expect(lookup.calls).toBe(20);
  });

  it('a silent dependency (calls hang until their deadline) opens it after 5 timeouts, each answered at its deadline', async () => {
    // What a dropped-packet partition looks like from the handler: no answer, no error, until aborted.
    const hang = async (ctx: { signal: AbortSignal }) => {
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
      throw ctx.signal.reason;
    };
    const lookup = scriptedTool('lookup', Array(5).fill(hang));
    const h = await serve([lookup], { timeout: 60, resetTimeout: 10_000, capacity: 64 });
    const answers = await Promise.all(
      Array.from({ length: 5 }, (_, i) => h.client.callTool('lookup', { id: `p${i}` })),
    );
    expect(answers.map((answer) => expectFailure(answer).error)).toEqual(Array(5).fill('timeout'));
    expect(h.breakers.stats().lookup!.state).toBe('open');
    expect(h.breakers.stats().lookup!.totals).toMatchObject({ timeouts: 5, failures: 5, opened: 1 });
    expect(expectFailure(await h.client.callTool('lookup', { id: 'p5' })).error).toBe('unavailable');
    expect(lookup.calls).toBe(5);
  });
});

describe('logging', () => {
  it('writes one line per state change; a dependency that stays down does not flood the log with probe failures', async () => {
    const lookup = scriptedTool('lookup', Array(30).fill('unavailable'));
    const h = await serve([lookup], { consecutiveFailures: 1, resetTimeout: 20 });
    let calls = 0;
    // About 10 reset periods: each lets one probe through, which fails and reopens the breaker. On a
    // loaded machine fewer fit in 250 ms, so it goes on (up to 10 s) until 4 probes failed and 21 calls ran.
    const until = Date.now() + 250;
    const enough = () => Date.now() >= until && h.breakers.stats().lookup!.totals.opened > 3 && calls > 20;
    while (!enough() && Date.now() < until + 10_000) {
      await h.client.callTool('lookup', { id: `l${calls}` });
      calls += 1;
      await sleep(2);
    }
    const opened = h.breakers.stats().lookup!.totals.opened;
    expect(opened).toBeGreaterThan(3);
    lookup.script.length = 0; // the dependency is back: the next probe succeeds
    await waitFor(() => h.breakers.stats().lookup!.state === 'half-open');
    expect(parseResultText(await h.client.callTool('lookup', { id: 'back' }))).toMatchObject({ ok: true });
    const lines = breakerLines(h.logs);
    expect(lines).toEqual([
      'circuit breaker opened',
      'circuit breaker half-open: the next call is a probe',
      'circuit breaker reopened: the probe call failed',
      // flushed on close: the held-back lines as counts
      'circuit breaker half-open: the next call is a probe',
      `circuit breaker reopened: probe calls keep failing (${opened - 2} more times since the last line)`,
      'circuit breaker closed',
    ]);
    const closed = h.logs.at(-1)!;
    expect(closed.fields).toMatchObject({
      breaker: 'lookup',
      state: 'close',
      shortCircuits: expect.any(Number),
    });
    expect(closed.fields.openMs).toBeGreaterThan(200);
    expect(calls).toBeGreaterThan(20);
  });
});

describe('capacity', () => {
  it('suggests a retry no later than the oldest running call deadline', async () => {
    const gate = deferred();
    const slow = scriptedTool('slow_lookup', [
      async () => {
        await gate.promise;
        return parseOkResult();
      },
    ]);
    const h = await serve([slow], { capacity: 1, timeout: 400 });
    const running = h.client.callTool('slow_lookup', { id: 'a' });
    await waitFor(() => slow.calls === 1);
    const envelope = expectFailure(await h.client.callTool('slow_lookup', { id: 'b' }));
    expect(envelope.error).toBe('rate_limited');
    expect(envelope.retryAfterMs).toBeGreaterThan(0);
    expect(envelope.retryAfterMs).toBeLessThanOrEqual(400);
    expect(envelope.hint).toBe(`The server is at capacity. Retry after ${envelope.retryAfterMs} ms.`);
    gate.resolve();
    await running;
  });

  it('half-open with every slot held by calls still running past their deadline: unavailable, never a retry-soon rate_limited', async () => {
    // A black-holed dependency behind a client that cannot be aborted: each call outlives its deadline.
    const stuck = deferred();
    const blackHoled = async () => {
      await stuck.promise;
      return parseOkResult();
    };
    const lookup = scriptedTool('lookup', [blackHoled, blackHoled, blackHoled]);
    const h = await serve([lookup], {
      timeout: 40,
      resetTimeout: 50,
      capacity: 2,
      consecutiveFailures: 1,
    });
    // The first call times out and opens the breaker; the probe after the reset times out and reopens it.
    expect(expectFailure(await h.client.callTool('lookup', { id: 'a' })).error).toBe('timeout');
    await waitFor(() => h.breakers.state('lookup') === 'half-open');
    expect(expectFailure(await h.client.callTool('lookup', { id: 'b' })).error).toBe('timeout');
    await waitFor(() => h.breakers.state('lookup') === 'half-open');
    expect(h.breakers.stats().lookup!.inFlight).toBe(2);

    // No slot is free for a probe: the dependency is still down, and the model must not retry at once.
    expect(expectFailure(await h.client.callTool('lookup', { id: 'c' }))).toEqual({
      ok: false,
      error: 'unavailable',
      message: 'lookup is temporarily unavailable: a service it depends on is failing.',
      hint: 'Do not retry now. Tell the user that lookup is unavailable at the moment; it can be tried once more after retryAfterMs.',
      retryable: true,
      retryAfterMs: 50,
    });
    expect(h.decisions.at(-1)).toEqual([
      {
        by: 'circuit-breaker',
        action: 'short-circuit',
        reason: 'half-open: every slot is held by a call still running',
        detail: { breaker: 'lookup', state: 'half-open', retryAfterMs: 50 },
      },
    ]);
    expect(lookup.calls).toBe(2);
    expect(h.breakers.stats().lookup!.totals).toMatchObject({ shortCircuits: 1, capacityRejections: 0 });

    // Once the stuck calls return, the next call is the probe, and its success closes the breaker.
    stuck.resolve();
    await waitFor(() => h.breakers.stats().lookup!.inFlight === 0);
    expect(parseResultText(await h.client.callTool('lookup', { id: 'd' }))).toEqual({ ok: true, done: true });
    expect(actions(h.decisions.at(-1))).toEqual(['half-open', 'close']);
  });
});

async function parseOkResult() {
  const { ok } = await import('@toolgate/core');
  return ok({ done: true });
}
