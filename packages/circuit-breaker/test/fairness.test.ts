// One caller must never deny a tool (or the dependency behind it) to the other callers: not by holding
// every capacity slot, not by holding or failing every half-open probe, not by one failure right after
// the breaker closed, and not by counting as two callers through tools that bind different values.
import { callerTag, defineTool, fail, ok, type ToolDefinition } from '@toolgate/core';
import { expectFailure, parseResultText, serveTools, type TestClient } from '@toolgate/core/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createCircuitBreaker } from '../src/index.js';
import { actions, closeAll, serveCallers, sleep, waitFor } from './harness.js';

afterEach(closeAll);

/** Every query the dependency received, in order. */
let received: string[] = [];
/** False: the dependency is down for everyone. */
let dependencyUp = true;

beforeEach(() => {
  received = [];
  dependencyUp = true;
});

// `everything` runs until its signal aborts (a query too broad); `broken` fails for this input only.
const handler = async ({ q }: { q: string }, ctx: { signal: AbortSignal }) => {
  received.push(q);
  if (!dependencyUp) return fail('unavailable', 'The index did not answer.');
  if (q === 'everything') {
    await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
    throw ctx.signal.reason;
  }
  if (q === 'broken') return fail('unavailable', 'The index did not answer.');
  return ok({ q });
};

const search = defineTool({
  name: 'search',
  description: 'Searches orders by a query.',
  input: { q: z.string().max(20) },
  handler,
}) as unknown as ToolDefinition;

const tagOf = (subject: string): string =>
  callerTag({ caller: { id: `sub:https://idp.test|${subject}`, kind: 'subject' }, bindings: {} });

const searchOk = async (client: TestClient, q: string): Promise<void> => {
  expect(parseResultText(await client.callTool('search', { q }))).toEqual({ ok: true, q });
};

/** Starts a slow call that runs until `abort()`; `done` settles once the client has its answer or gave up. */
function slowCall(client: TestClient, tool = 'search') {
  const controller = new AbortController();
  const done = client
    .callTool(tool, { q: 'everything' }, { signal: controller.signal })
    .then(parseResultText, () => 'cancelled');
  return { abort: () => controller.abort(), done };
}

/**
 * A real outage: five failures of two callers in turn open the breaker (two failing callers,
 * minFailingCallers); then the dependency heals. One identity's failures alone refuse it alone.
 */
async function outage(
  h: Awaited<ReturnType<typeof serveCallers>>,
  [first, second]: TestClient[],
): Promise<void> {
  dependencyUp = false;
  for (let i = 0; i < 5; i += 1) await (i % 2 === 0 ? first : second)!.callTool('search', { q: 'x' });
  expect(h.breakers.state('search')).toBe('open');
  dependencyUp = true;
}

describe('capacity: one caller holds at most its share while others are about', () => {
  it('leaves the other callers half the slots, even against slow calls it cancels and sends again', async () => {
    const h = await serveCallers([search], ['mallory', 'victim'], { capacity: 4, timeout: 5_000 });
    const mallory = h.as('mallory');
    const victim = h.as('victim');
    await searchOk(victim, 'order 1');
    for (let round = 0; round < 2; round += 1) {
      const calls = Array.from({ length: 4 }, () => slowCall(mallory));
      await waitFor(() => h.breakers.stats().search?.inFlight === 2);
      // Her share is 2 of 4: the other two are refused to her alone, without reaching the dependency.
      const refused = (await Promise.all(calls.slice(2).map((call) => call.done))) as { error: string }[];
      expect(refused.map((answer) => answer.error)).toEqual(['rate_limited', 'rate_limited']);
      expect(refused[0]).toMatchObject({
        message: "You already have 2 search calls running, your share of the server's capacity.",
        retryable: true,
      });
      // The victim is still served while she holds her share.
      await searchOk(victim, `order ${round + 2}`);
      await searchOk(victim, `order ${round + 2}`);
      // Cancelled calls count as nothing, so she can do this again and again: never beyond her share.
      for (const call of calls) call.abort();
      await Promise.all(calls.map((call) => call.done));
      await waitFor(() => h.breakers.stats().search?.inFlight === 0);
    }
    const refusedShare = h.decisions.flatMap((decisions) =>
      decisions.filter((decision) => decision.action === 'reject-capacity'),
    );
    expect(refusedShare).toHaveLength(4);
    expect(refusedShare[0]?.detail).toMatchObject({
      capacity: 4,
      callerCapacity: 2,
      caller: tagOf('mallory'),
    });
    expect(received.filter((q) => q === 'everything')).toHaveLength(4);
    expect(h.breakers.state('search')).toBe('closed');
  });

  it('still lets the local caller (stdio, in-process) use the whole capacity', async () => {
    const breakers = createCircuitBreaker({ capacity: 4, timeout: 5_000 });
    const local = await serveTools([search], { middleware: [breakers] });
    try {
      const calls = Array.from({ length: 4 }, () => slowCall(local));
      await waitFor(() => breakers.stats().search?.inFlight === 4);
      const fifth = expectFailure(await local.callTool('search', { q: 'order 1' }));
      expect(fifth).toMatchObject({
        error: 'rate_limited',
        message: 'The server is at capacity: 4 search calls are already running.',
      });
      for (const call of calls) call.abort();
      await Promise.all(calls.map((call) => call.done));
    } finally {
      breakers.close();
      await local.close();
    }
  });

  // Changed (red team W): the share applied only while another caller had called within the window,
  // so one identity could take every slot while nobody else was about, and hold it (a handler that
  // ignores its deadline) against everyone who came later.
  it('holds a caller that is not local to its share even while nobody else is about', async () => {
    const h = await serveCallers([search], ['mallory', 'victim'], { capacity: 4, timeout: 5_000 });
    const mallory = h.as('mallory');
    const calls = Array.from({ length: 4 }, () => slowCall(mallory));
    await waitFor(() => h.breakers.stats().search?.inFlight === 2);
    const refused = (await Promise.all(calls.slice(2).map((call) => call.done))) as { error: string }[];
    expect(refused.map((answer) => answer.error)).toEqual(['rate_limited', 'rate_limited']);
    // The victim, who had not called at all, is served at once.
    await searchOk(h.as('victim'), 'order 1');
    expect(h.breakers.stats().search?.inFlight).toBe(2);
    for (const call of calls) call.abort();
    await Promise.all(calls.map((call) => call.done));
  });

  it('callerShare: 1 lets one caller take every slot, as before', async () => {
    const h = await serveCallers([search], ['mallory', 'victim'], {
      capacity: 2,
      callerShare: 1,
      timeout: 5_000,
    });
    await searchOk(h.as('victim'), 'order 1');
    const calls = [slowCall(h.as('mallory')), slowCall(h.as('mallory'))];
    await waitFor(() => h.breakers.stats().search?.inFlight === 2);
    expect(expectFailure(await h.as('victim').callTool('search', { q: 'order 2' })).error).toBe(
      'rate_limited',
    );
    for (const call of calls) call.abort();
    await Promise.all(calls.map((call) => call.done));
  });
});

describe('half-open: the probe is nobody\u2019s to keep', () => {
  it('does not give the next probe to a caller who cancelled its own while another caller asks', async () => {
    const h = await serveCallers([search], ['mallory', 'bob'], { resetTimeout: 100, timeout: 5_000 });
    const mallory = h.as('mallory');
    const bob = h.as('bob');
    await outage(h, [bob, mallory]);
    await waitFor(() => h.breakers.state('search') === 'half-open');
    const probe = slowCall(mallory);
    await waitFor(() => received.includes('everything'));
    // Bob asks meanwhile: the probe is in flight.
    expect(expectFailure(await bob.callTool('search', { q: 'order 1' })).error).toBe('unavailable');
    probe.abort();
    await probe.done;
    await waitFor(() => h.breakers.stats().search?.inFlight === 0);
    // Mallory at once asks again: she is answered unavailable, and her slow query never runs again.
    const again = slowCall(mallory);
    const answer = (await Promise.race([again.done, sleep(1_000).then(() => 'still running')])) as {
      error?: string;
      retryAfterMs?: number;
    };
    again.abort();
    expect(answer).toMatchObject({ error: 'unavailable' });
    expect(answer.retryAfterMs).toBeLessThanOrEqual(100);
    expect(received.filter((q) => q === 'everything')).toHaveLength(1);
    // Bob's next call is the probe, and the dependency is healthy: closed for everyone.
    await searchOk(bob, 'order 2');
    expect(h.breakers.state('search')).toBe('closed');
    expect(actions(h.decisions.at(-1))).toEqual(['half-open', 'close']);
  });

  it('lets the local caller probe again at once after cancelling its probe', async () => {
    const breakers = createCircuitBreaker({ resetTimeout: 100, timeout: 5_000 });
    const local = await serveTools([search], { middleware: [breakers] });
    try {
      dependencyUp = false;
      for (let i = 0; i < 5; i += 1) await local.callTool('search', { q: 'x' });
      expect(breakers.state('search')).toBe('open');
      dependencyUp = true;
      await waitFor(() => breakers.state('search') === 'half-open');
      const probe = slowCall(local);
      await waitFor(() => received.includes('everything'));
      probe.abort();
      await probe.done;
      await waitFor(() => breakers.stats().search?.inFlight === 0);
      await searchOk(local, 'order 1');
      expect(breakers.state('search')).toBe('closed');
    } finally {
      breakers.close();
      await local.close();
    }
  });

  it('in an outage that goes on, refuses a failed probe\u2019s caller alone until a second caller\u2019s probe fails, then reopens; that caller does not get the next probe', async () => {
    const h = await serveCallers([search], ['alice', 'bob', 'carol'], { resetTimeout: 100 });
    const [alice, bob, carol] = ['alice', 'bob', 'carol'].map((s) => h.as(s)) as TestClient[];
    await outage(h, [bob!, alice!]);
    dependencyUp = false;
    await waitFor(() => h.breakers.state('search') === 'half-open');
    // Alice's probe fails: the only failing caller of this half-open period, refused alone.
    expect(expectFailure(await alice!.callTool('search', { q: 'x' })).error).toBe('unavailable');
    expect(actions(h.decisions.at(-1))).toEqual(['half-open', 'open-caller']);
    expect(h.breakers.state('search')).toBe('half-open');
    // Bob's probe fails too: two failing callers, so it reopens for everyone.
    expect(expectFailure(await bob!.callTool('search', { q: 'x' })).error).toBe('unavailable');
    expect(actions(h.decisions.at(-1))).toEqual(['half-open', 'open']);
    expect(h.breakers.state('search')).toBe('open');
    expect(expectFailure(await carol!.callTool('search', { q: 'order 1' })).error).toBe('unavailable');
    dependencyUp = true;
    await waitFor(() => h.breakers.state('search') === 'half-open');
    // First again, Bob is refused the probe (the dependency never sees his query); Carol's call is the probe.
    const before = received.length;
    expect(expectFailure(await bob!.callTool('search', { q: 'order 2' })).error).toBe('unavailable');
    expect(received.length).toBe(before);
    expect(h.breakers.state('search')).toBe('half-open');
    await searchOk(carol!, 'order 3');
    expect(h.breakers.state('search')).toBe('closed');
  });

  it('refuses the probe\u2019s caller alone when its probe fails while another caller succeeded within the window', async () => {
    const h = await serveCallers([search], ['alice', 'bob', 'carol', 'dave'], { resetTimeout: 100 });
    const [alice, bob, carol, dave] = ['alice', 'bob', 'carol', 'dave'].map((s) => h.as(s)) as TestClient[];
    await searchOk(bob!, 'order 1');
    // A real outage: two callers fail, so it opens for everyone (minFailingCallers 2).
    dependencyUp = false;
    for (const client of [carol, dave, carol, dave, carol]) await client!.callTool('search', { q: 'x' });
    expect(h.breakers.state('search')).toBe('open');
    dependencyUp = true;
    await waitFor(() => h.breakers.state('search') === 'half-open');
    expect(expectFailure(await alice!.callTool('search', { q: 'broken' })).error).toBe('unavailable');
    expect(actions(h.decisions.at(-1))).toEqual(['half-open', 'open-caller']);
    expect(h.decisions.at(-1)?.at(-1)?.detail).toMatchObject({ caller: tagOf('alice') });
    // Not reopened: the next caller's call is the probe.
    expect(h.breakers.state('search')).toBe('half-open');
    await searchOk(bob!, 'order 2');
    expect(h.breakers.state('search')).toBe('closed');
    // Alice stays refused on her own for her reset period.
    expect(expectFailure(await alice!.callTool('search', { q: 'order 3' })).error).toBe('unavailable');
  });
});

describe('closing keeps the success that closed it', () => {
  it('refuses one caller alone when its failures follow the probe success of another', async () => {
    const h = await serveCallers([search], ['alice', 'bob'], { resetTimeout: 100 });
    const alice = h.as('alice');
    const bob = h.as('bob');
    await outage(h, [bob, alice]);
    await waitFor(() => h.breakers.state('search') === 'half-open');
    await searchOk(bob, 'order 1');
    expect(h.breakers.state('search')).toBe('closed');
    for (let i = 0; i < 5; i += 1) await alice.callTool('search', { q: 'broken' });
    expect(h.breakers.state('search')).toBe('closed');
    expect(h.breakers.stats().search?.totals.callerOpens).toBe(1);
    await searchOk(bob, 'order 2');
  });
});

describe('a caller is its identity, whatever its tools bind', () => {
  const orders = defineTool({
    name: 'search_orders',
    description: 'Orders of the caller\u2019s customer.',
    input: { q: z.string().max(20) },
    bind: (request) => ({ issuer: request.authInfo?.extra?.iss }),
    handler,
  }) as unknown as ToolDefinition;
  const products = defineTool({
    name: 'search_products',
    description: 'The public catalogue.',
    input: { q: z.string().max(20) },
    handler,
  }) as unknown as ToolDefinition;
  const options = {
    resetTimeout: 5_000,
    tools: { search_orders: { dependency: 'db' }, search_products: { dependency: 'db' } },
  };

  it('counts one identity failing through two tools of one dependency as one caller, refused on both', async () => {
    const h = await serveCallers([orders, products], ['mallory', 'victim'], options);
    const mallory = h.as('mallory');
    const victim = h.as('victim');
    for (let i = 0; i < 3; i += 1) await victim.callTool('search_orders', { q: `order ${i}` });
    for (let i = 0; i < 3; i += 1) {
      await mallory.callTool('search_orders', { q: 'broken' });
      await mallory.callTool('search_products', { q: 'broken' });
    }
    expect(h.breakers.state('db')).toBe('closed');
    const stats = h.breakers.stats().db;
    expect(stats?.totals.callerOpens).toBe(1);
    expect(stats?.callers).toEqual({ tracked: 1, refused: 1 });
    expect(parseResultText(await victim.callTool('search_orders', { q: 'order 9' }))).toEqual({
      ok: true,
      q: 'order 9',
    });
    // Switching tools does not dodge her own refusal.
    const before = received.length;
    for (const tool of ['search_orders', 'search_products']) {
      expect(expectFailure(await mallory.callTool(tool, { q: 'order 1' })).error).toBe('unavailable');
      expect(h.decisions.at(-1)?.at(-1)?.detail).toMatchObject({
        state: 'open-caller',
        caller: tagOf('mallory'),
      });
    }
    expect(received.length).toBe(before);
  });
});

// Red team W: what still let one caller deny the tool to others who were not about when it acted.
describe('a caller that is not local, while nobody else is about', () => {
  it('does not get the next probe after cancelling its own, even while nobody else asks; a caller who comes later does', async () => {
    // A window shorter than resetTimeout: when the breaker goes half-open, Bob is no longer about.
    const h = await serveCallers([search], ['mallory', 'bob', 'victim'], {
      resetTimeout: 100,
      rollingCountTimeout: 60,
      timeout: 5_000,
    });
    const mallory = h.as('mallory');
    await outage(h, [h.as('bob'), mallory]);
    await waitFor(() => h.breakers.state('search') === 'half-open');
    const probe = slowCall(mallory);
    await waitFor(() => received.includes('everything'));
    probe.abort();
    await probe.done;
    await waitFor(() => h.breakers.stats().search?.inFlight === 0);
    // Nobody else has called since: still, her next call is not the probe.
    const answer = expectFailure(await mallory.callTool('search', { q: 'everything' }));
    expect(answer.error).toBe('unavailable');
    expect(answer.retryAfterMs).toBeLessThanOrEqual(100);
    expect(received.filter((q) => q === 'everything')).toHaveLength(1);
    await searchOk(h.as('victim'), 'order 1');
    expect(h.breakers.state('search')).toBe('closed');
  });

  it('a probe without a deadline (timeout: false) holds half-open for resetTimeout at most: then another caller probes, and the overrun one counts for nothing', async () => {
    const h = await serveCallers([search], ['mallory', 'bob', 'victim'], {
      resetTimeout: 100,
      timeout: false,
    });
    const mallory = h.as('mallory');
    await outage(h, [h.as('bob'), mallory]);
    await waitFor(() => h.breakers.state('search') === 'half-open');
    const probe = slowCall(mallory);
    await waitFor(() => received.includes('everything'));
    // Within resetTimeout of its start the probe holds: the victim is told how long, at most.
    const early = expectFailure(await h.as('victim').callTool('search', { q: 'order 1' }));
    expect(early.error).toBe('unavailable');
    expect(early.retryAfterMs).toBeLessThanOrEqual(100);
    await sleep(early.retryAfterMs as number);
    // Past it, the victim's call is the probe, and the dependency is healthy: closed for everyone.
    await searchOk(h.as('victim'), 'order 2');
    expect(actions(h.decisions.at(-1))).toEqual(['half-open', 'close']);
    expect(h.breakers.state('search')).toBe('closed');
    // The overrun probe ends later: stale, it neither closes nor reopens anything.
    probe.abort();
    await probe.done;
    await waitFor(() => h.breakers.stats().search?.inFlight === 0);
    expect(h.breakers.state('search')).toBe('closed');
    expect(h.breakers.stats().search?.totals).toMatchObject({ opened: 1, closed: 1, ignored: 1 });
  });

  it('an overrun probe\u2019s caller is barred from the next probe as if its probe had failed', async () => {
    const h = await serveCallers([search], ['mallory', 'bob', 'victim'], {
      resetTimeout: 100,
      timeout: false,
    });
    const mallory = h.as('mallory');
    await outage(h, [h.as('bob'), mallory]);
    await waitFor(() => h.breakers.state('search') === 'half-open');
    const probe = slowCall(mallory);
    await waitFor(() => received.includes('everything'));
    await sleep(110);
    // The victim takes over the probe: it fails for her input alone, and she alone is refused.
    expect(expectFailure(await h.as('victim').callTool('search', { q: 'broken' })).error).toBe('unavailable');
    expect(actions(h.decisions.at(-1))).toEqual(['half-open', 'open-caller']);
    // Mallory may not take the next probe either; her first probe still runs and counts for nothing.
    const before = received.length;
    expect(expectFailure(await mallory.callTool('search', { q: 'order 2' })).error).toBe('unavailable');
    expect(received.length).toBe(before);
    probe.abort();
    await probe.done;
    expect(h.breakers.state('search')).toBe('half-open');
  });
});
