import { callerTag, defineTool, fail, ok, type ToolDefinition } from '@toolgate/core';
import {
  expectFailure,
  type LogEntry,
  parseResultText,
  recordingLogger,
  serveTools,
  type TestClient,
} from '@toolgate/core/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { MAX_TRACKED_CALLERS } from '../src/callers.js';
import { createCircuitBreaker } from '../src/index.js';
import { closeAll, serveCallers, waitFor } from './harness.js';

afterEach(closeAll);

/** Every query the dependency received, in order. */
let received: string[] = [];
/** False: the dependency is down for everyone. */
let dependencyUp = true;

beforeEach(() => {
  received = [];
  dependencyUp = true;
});

// A search over a dependency: `everything` is too broad to finish before the deadline, `broken` makes
// the dependency fail (a query it cannot run); anything else is answered, while the dependency is up.
const search = defineTool({
  name: 'search',
  description: 'Searches orders by a query.',
  input: { q: z.string().max(20) },
  handler: async ({ q }, ctx) => {
    received.push(q);
    if (q === 'everything') {
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      throw ctx.signal.reason;
    }
    if (!dependencyUp || q === 'broken') return fail('unavailable', 'The index did not answer.');
    return ok({ q });
  },
}) as unknown as ToolDefinition;

const tagOf = (subject: string): string =>
  callerTag({ caller: { id: `sub:https://idp.test|${subject}`, kind: 'subject' }, bindings: {} });

const openAnswer = {
  ok: false,
  error: 'unavailable',
  message: 'search is temporarily unavailable: a service it depends on is failing.',
  hint: 'Do not retry now. Tell the user that search is unavailable at the moment; it can be tried once more after retryAfterMs.',
  retryable: true,
  retryAfterMs: expect.any(Number),
};

const searchOk = async (client: TestClient, q: string): Promise<void> => {
  expect(parseResultText(await client.callTool('search', { q }))).toEqual({ ok: true, q });
};

/**
 * Bob succeeds twice, then Alice's three failures refuse her alone (the breaker stays closed), Bob goes
 * on, and Alice's next call is refused: her reset period (100 ms) has begun.
 */
async function refuseAliceAlone() {
  const h = await serveCallers([search], ['alice', 'bob'], { resetTimeout: 100 });
  const alice = h.as('alice');
  const bob = h.as('bob');
  await searchOk(bob, 'order 1');
  await searchOk(bob, 'order 2');
  // Three of five calls failed: over 50%, which opened the breaker for everyone before.
  for (let i = 0; i < 3; i += 1) {
    expect(expectFailure(await alice.callTool('search', { q: 'broken' })).error).toBe('unavailable');
  }
  expect(h.breakers.state('search')).toBe('closed');
  await searchOk(bob, 'order 3');
  expect(expectFailure(await alice.callTool('search', { q: 'broken' }))).toEqual(openAnswer);
  return { h, alice, bob };
}

describe('one caller whose own calls fail', () => {
  it('is refused alone when its queries time out while another caller succeeds; the other still gets answers', async () => {
    const h = await serveCallers([search], ['alice', 'bob'], { timeout: 50, resetTimeout: 10_000 });
    const alice = h.as('alice');
    const bob = h.as('bob');
    await searchOk(bob, 'order 1');
    await searchOk(bob, 'order 2');
    // Alice asks for more than the dependency can answer within the deadline, five times at once.
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => alice.callTool('search', { q: 'everything' })),
    );
    expect(answers.map((answer) => expectFailure(answer).error)).toEqual(Array(5).fill('timeout'));

    // The dependency works: the breaker stays closed, and Bob gets his answers.
    expect(h.breakers.state('search')).toBe('closed');
    await searchOk(bob, 'order 3');
    // Alice is refused without reaching the dependency, with her own retryAfterMs.
    const before = received.length;
    const refused = expectFailure(await alice.callTool('search', { q: 'narrow' }));
    expect(refused).toEqual(openAnswer);
    expect(refused.retryAfterMs).toBeGreaterThan(9_000);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(10_000);
    expect(received.length).toBe(before);
    await searchOk(bob, 'order 4');

    const alicesTag = tagOf('alice');
    expect(h.decisions.flat().filter((decision) => decision.action === 'open-caller')).toEqual([
      {
        by: 'circuit-breaker',
        action: 'open-caller',
        reason: "the failures that would open the breaker are one caller's, while other callers succeed",
        detail: { breaker: 'search', caller: alicesTag, retryAfterMs: 10_000 },
      },
    ]);
    expect(h.decisions.at(-2)).toEqual([
      {
        by: 'circuit-breaker',
        action: 'short-circuit',
        reason: "this caller is refused on its own: its calls failed, other callers' did not",
        detail: {
          breaker: 'search',
          state: 'open-caller',
          caller: alicesTag,
          retryAfterMs: refused.retryAfterMs,
        },
      },
    ]);
    expect(h.breakers.stats().search).toMatchObject({
      state: 'closed',
      callers: { tracked: 1, refused: 1 },
      // Alice's failures left the window: they say nothing about the dependency.
      window: { calls: 4, successes: 4, failures: 0 },
      totals: { successes: 4, failures: 5, timeouts: 5, opened: 0, callerOpens: 1, callerShortCircuits: 1 },
    });
    const lines = h.logs.filter((entry) => entry.message?.startsWith('circuit breaker'));
    expect(lines).toEqual([
      {
        level: 'warn',
        message: "circuit breaker refused one caller: its calls fail, other callers' do not",
        fields: {
          breaker: 'search',
          tools: ['search'],
          caller: alicesTag,
          reason: "the failures that would open the breaker are one caller's, while other callers succeed",
          resetTimeoutMs: 10_000,
        },
      },
    ]);
    // Only the tag: never the identity itself.
    expect(JSON.stringify(h.logs)).not.toContain('alice');
  });

  it('after its reset period its calls run again, and its next failure refuses it again at once', async () => {
    const { h, alice, bob } = await refuseAliceAlone();
    expect(received).toEqual(['order 1', 'order 2', 'broken', 'broken', 'broken', 'order 3']);

    await waitFor(() => h.breakers.stats().search!.callers.refused === 0);
    // Let through again, Alice sends the same query: it fails, and she alone is refused at once.
    expect(expectFailure(await alice.callTool('search', { q: 'broken' })).message).toBe(
      'The index did not answer.',
    );
    expect(h.decisions.at(-1)).toEqual([
      {
        by: 'circuit-breaker',
        action: 'open-caller',
        reason: "the caller's calls failed again after its reset period",
        detail: { breaker: 'search', caller: tagOf('alice'), retryAfterMs: 100 },
      },
    ]);
    expect(expectFailure(await alice.callTool('search', { q: 'narrow' }))).toEqual(openAnswer);
    await searchOk(bob, 'order 4');
    expect(received.filter((q) => q === 'broken')).toHaveLength(4);
    expect(h.breakers.stats().search).toMatchObject({
      state: 'closed',
      totals: { opened: 0, callerOpens: 2, callerShortCircuits: 2 },
    });
  });

  it('a success after its reset period ends its probation: its next failure counts like anyone else’s', async () => {
    const { h, alice } = await refuseAliceAlone();
    await waitFor(() => h.breakers.stats().search!.callers.refused === 0);
    // Let through again, her query works: the dependency serves her, as a successful probe shows.
    await searchOk(alice, 'narrow');
    // One failure later is counted, not refused at once; her next call runs.
    expect(expectFailure(await alice.callTool('search', { q: 'broken' })).message).toBe(
      'The index did not answer.',
    );
    expect(h.decisions.at(-1)).toEqual([]);
    await searchOk(alice, 'narrower');
    expect(h.breakers.stats().search).toMatchObject({
      state: 'closed',
      totals: { opened: 0, callerOpens: 1, callerShortCircuits: 1 },
    });
  });
});

describe('the breaker still opens for everyone', () => {
  it('in a real outage: two callers fail, so it opens for both (and for a third)', async () => {
    const h = await serveCallers([search], ['alice', 'bob', 'carol'], { resetTimeout: 10_000 });
    const [alice, bob, carol] = [h.as('alice'), h.as('bob'), h.as('carol')];
    await searchOk(bob, 'order 1');
    await searchOk(bob, 'order 2');
    dependencyUp = false;
    expect(expectFailure(await alice.callTool('search', { q: 'order 3' })).error).toBe('unavailable');
    expect(expectFailure(await bob.callTool('search', { q: 'order 4' })).error).toBe('unavailable');
    expect(h.breakers.state('search')).toBe('closed');
    // The third failure of five calls: two callers fail, so the dependency is what fails.
    expect(expectFailure(await alice.callTool('search', { q: 'order 5' })).error).toBe('unavailable');
    expect(h.breakers.state('search')).toBe('open');
    expect(h.decisions.at(-1)).toEqual([
      {
        by: 'circuit-breaker',
        action: 'open',
        reason: '3 of 5 calls failed in the window',
        detail: { breaker: 'search' },
      },
    ]);
    for (const client of [alice, bob, carol]) {
      expect(expectFailure(await client.callTool('search', { q: 'order 6' }))).toEqual(openAnswer);
    }
    expect(received).toHaveLength(5);
    expect(h.breakers.stats().search!.totals).toMatchObject({ opened: 1, callerOpens: 0, shortCircuits: 3 });
  });

  it('for the local caller alone (stdio, in-process), as before', async () => {
    const breakers = createCircuitBreaker({ resetTimeout: 10_000 });
    const client = await serveTools([search], { middleware: [breakers] });
    try {
      await searchOk(client, 'order 1');
      await searchOk(client, 'order 2');
      for (let i = 0; i < 3; i += 1) await client.callTool('search', { q: 'broken' });
      expect(breakers.state('search')).toBe('open');
      expect(expectFailure(await client.callTool('search', { q: 'order 3' }))).toEqual(openAnswer);
      expect(breakers.stats().search!.totals).toMatchObject({ opened: 1, callerOpens: 0 });
    } finally {
      breakers.close();
      await client.close();
    }
  });

  // Changed (red team W): one identity failing while nobody else is about opened the breaker for
  // everyone, so the next caller to come found it open, at every visit. Now it is refused alone.
  it('not for a caller that is not local failing alone (nobody else called): that caller alone is refused', async () => {
    const h = await serveCallers([search], ['alice', 'bob'], { resetTimeout: 10_000 });
    const alice = h.as('alice');
    await searchOk(alice, 'order 1');
    await searchOk(alice, 'order 2');
    for (let i = 0; i < 3; i += 1) await alice.callTool('search', { q: 'broken' });
    expect(h.breakers.state('search')).toBe('closed');
    expect(h.decisions.at(-1)).toEqual([
      {
        by: 'circuit-breaker',
        action: 'open-caller',
        reason:
          "the failures that would open the breaker are one caller's; no other caller failed within the window",
        detail: { breaker: 'search', caller: tagOf('alice'), retryAfterMs: 10_000 },
      },
    ]);
    expect(expectFailure(await alice.callTool('search', { q: 'order 3' }))).toEqual(openAnswer);
    // Bob comes later: served.
    await searchOk(h.as('bob'), 'order 4');
    expect(h.breakers.stats().search!.totals).toMatchObject({ opened: 0, callerOpens: 1 });
  });

  it('with isolateCallers: false, on one caller’s failures while others succeed', async () => {
    const h = await serveCallers([search], ['alice', 'bob'], { resetTimeout: 10_000, isolateCallers: false });
    await searchOk(h.as('bob'), 'order 1');
    await searchOk(h.as('bob'), 'order 2');
    for (let i = 0; i < 3; i += 1) await h.as('alice').callTool('search', { q: 'broken' });
    expect(h.breakers.state('search')).toBe('open');
    expect(expectFailure(await h.as('bob').callTool('search', { q: 'order 3' }))).toEqual(openAnswer);
    expect(h.breakers.stats().search!.callers).toEqual({ tracked: 0, refused: 0 });
  });
});

describe('memory', () => {
  it('stays bounded under 10,000 distinct failing callers, and the refused caller stays refused', async () => {
    const logs: LogEntry[] = [];
    const breakers = createCircuitBreaker({
      consecutiveFailures: false,
      resetTimeout: 60_000,
      capacity: Number.POSITIVE_INFINITY,
    });
    // Each call names its caller in `_meta` (a custom identity rule): 10,000 identities, one client.
    const client = await serveTools([search], {
      middleware: [breakers],
      logger: recordingLogger(logs),
      identify: (request) => ({
        id: `sub:https://idp.test|${String(request.meta?.caller)}`,
        kind: 'subject',
      }),
    });
    const as = (caller: string, q: string) => client.callTool('search', { q }, { meta: { caller } });
    try {
      await as('bob', 'order 1');
      await as('bob', 'order 2');
      for (let i = 0; i < 3; i += 1) await as('alice', 'broken');
      expect(expectFailure(await as('alice', 'narrow'))).toEqual(openAnswer);

      // Batches of 100: Bob's successes, then 100 new callers whose one call each fails. The window
      // stays at or under 50% failures, so nothing opens for everyone; every caller is tracked.
      for (let batch = 0; batch < 100; batch += 1) {
        await Promise.all(Array.from({ length: 100 }, (_, i) => as('bob', `order ${i}`)));
        await Promise.all(Array.from({ length: 100 }, (_, i) => as(`flood-${batch}-${i}`, 'broken')));
      }
      const stats = breakers.stats().search!;
      expect(stats.state).toBe('closed');
      expect(stats.totals.failures).toBe(10_003);
      expect(stats.callers).toEqual({ tracked: MAX_TRACKED_CALLERS, refused: 1 });
      // Alice was not pushed out by the flood; Bob still gets answers.
      const before = received.length;
      expect(expectFailure(await as('alice', 'narrow'))).toEqual(openAnswer);
      expect(received.length).toBe(before);
      expect(parseResultText(await as('bob', 'order x'))).toEqual({ ok: true, q: 'order x' });
    } finally {
      breakers.close();
      await client.close();
    }
  }, 120_000);
});

// The ledger keeps nothing per call for a caller that only succeeds: a steady caller is two comparisons.
describe('the success path', () => {
  it('tracks no caller while nothing fails', async () => {
    const h = await serveCallers([search], ['alice', 'bob']);
    for (let i = 0; i < 20; i += 1) await searchOk(h.as(i % 2 === 0 ? 'alice' : 'bob'), `order ${i}`);
    expect(h.breakers.stats().search!.callers).toEqual({ tracked: 0, refused: 0 });
  });
});

// Red team W: failures that land together were each weighed before the others were noted, so the first
// was taken for one caller's alone (refused, the streak reset) and a real outage never opened it.
describe('failures that land together', () => {
  it('of five callers at once open the breaker for everyone', async () => {
    const names = ['a', 'b', 'c', 'd', 'e', 'f'];
    const h = await serveCallers([search], names, { resetTimeout: 10_000 });
    for (const name of names) await searchOk(h.as(name), 'order 1');
    dependencyUp = false;
    const answers = await Promise.all(
      names.slice(0, 5).map((name) => h.as(name).callTool('search', { q: 'order 2' })),
    );
    expect(answers.map((answer) => expectFailure(answer).error)).toEqual(Array(5).fill('unavailable'));
    expect(h.breakers.stats().search).toMatchObject({
      state: 'open',
      totals: { failures: 5, opened: 1, callerOpens: 0 },
    });
    expect(expectFailure(await h.as('f').callTool('search', { q: 'order 3' }))).toEqual(openAnswer);
  });
});
