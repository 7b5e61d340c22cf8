import {
  defineTool,
  ERROR_CODE_DEFAULTS,
  ERROR_META_KEY,
  fail,
  ok,
  type PolicyDecision,
  type ToolDefinition,
} from '@toolgate/core';
import { expectFailure, type LogEntry, parseResultText, recordingLogger } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import {
  createMemoryRepeatStore,
  createRepeatGuard,
  type RepeatGuardOptions,
  repeatGuard,
} from '../src/index.js';
import {
  closeAll,
  createFixture,
  createGate,
  decisionRecorder,
  type Fixture,
  serve,
  sleep,
} from './fixtures.js';

const REPEAT_NOTE =
  'Repeated call: this is the unchanged result of the identical call made moments ago. Calling again with the same arguments will not change it; change the arguments or answer the user.';

afterEach(closeAll);

interface Setup {
  fixture: Fixture;
  decisions: PolicyDecision[][];
  logs: LogEntry[];
  call: (
    name: string,
    args: Record<string, unknown>,
  ) => ReturnType<Awaited<ReturnType<typeof serve>>['callTool']>;
}

async function setup(options: RepeatGuardOptions = {}): Promise<Setup> {
  const fixture = createFixture();
  const decisions: PolicyDecision[][] = [];
  const logs: LogEntry[] = [];
  const client = await serve(fixture.tools, [decisionRecorder(decisions), createRepeatGuard(options)], {
    logger: recordingLogger(logs),
  });
  return { fixture, decisions, logs, call: (name, args) => client.callTool(name, args) };
}

describe('createRepeatGuard: the second identical call', () => {
  it('does not reach the handler and gets the earlier result with a note, in structuredContent and its text', async () => {
    const { fixture, decisions, call } = await setup();
    const first = await call('search_orders', { status: 'open' });
    const second = await call('search_orders', { status: 'open' });
    const third = await call('search_orders', { status: 'open' });

    expect(fixture.invocations.search_orders).toBe(1);
    expect(first).toEqual({
      content: [{ type: 'text', text: '{"ok":true,"items":[{"id":"open-30"}],"total":1}' }],
      structuredContent: { ok: true, items: [{ id: 'open-30' }], total: 1 },
    });
    const annotated = { ok: true, items: [{ id: 'open-30' }], total: 1, note: REPEAT_NOTE };
    expect(second).toEqual({
      content: [{ type: 'text', text: JSON.stringify(annotated) }],
      structuredContent: annotated,
    });
    expect(third).toEqual(second);
    expect(decisions[0]).toEqual([]);
    expect(decisions[1]).toEqual([
      {
        by: 'repeat-guard',
        action: 'short-circuit',
        reason: 'repeated_call',
        detail: { answer: 'cached', ageMs: expect.any(Number), executions: 1, inFlight: false },
      },
    ]);
  });

  it('keeps the note the result already had, and adds its own after it', async () => {
    const { fixture, call } = await setup();
    await call('search_orders', { status: 'cancelled' });
    const second = await call('search_orders', { status: 'cancelled' });
    expect(fixture.invocations.search_orders).toBe(1);
    expect(second.structuredContent).toEqual({
      ok: true,
      items: [],
      total: 0,
      note: `No orders match. ${REPEAT_NOTE}`,
    });
    expect(parseResultText(second)).toEqual(second.structuredContent);
  });

  it('treats the same validated arguments as the same call, whatever their order or spelled-out defaults', async () => {
    const { fixture, call } = await setup();
    await call('search_orders', { status: 'open', filters: { a: '1', b: '2' } });
    await call('search_orders', { filters: { b: '2', a: '1' }, days: 30, status: 'open' });
    expect(fixture.invocations.search_orders).toBe(1);
  });

  it('logs the short-circuit with the hashed key and no arguments', async () => {
    const { logs, call } = await setup();
    await call('get_order_status', { id: 'secret-order-4242' });
    await call('get_order_status', { id: 'secret-order-4242' });
    const entry = logs.find(
      (log) => log.message === 'repeat-guard: repeated call answered without running it',
    );
    expect(entry?.level).toBe('info');
    expect(entry?.fields).toMatchObject({ tool: 'get_order_status', answer: 'cached', inFlight: false });
    expect(entry?.fields.key).toMatch(/^c:[A-Za-z0-9_-]{43}$/);
    expect(JSON.stringify(logs)).not.toContain('secret-order-4242');
  });
});

describe('createRepeatGuard: calls that run', () => {
  it('runs calls with different arguments', async () => {
    const { fixture, decisions, call } = await setup();
    await call('search_orders', { status: 'open' });
    await call('search_orders', { status: 'open', days: 7 });
    await call('search_orders', { status: 'shipped' });
    await call('search_orders', { status: 'open', filters: { a: '1' } });
    await call('search_orders', { status: 'open', filters: { a: '1', constructor: 'x' } });
    await call('search_orders', { status: 'open', filters: { a: '1\u0000' } });
    expect(fixture.invocations.search_orders).toBe(6);
    expect(decisions.flat()).toEqual([]);
  });

  it('runs an identical call from another session when scope splits by session, and short-circuits within one', async () => {
    const fixture = createFixture();
    const guard = createRepeatGuard({ scope: (ctx) => ctx.request.sessionId ?? '' });
    const alpha = await serve(fixture.tools, [guard], { sessionId: 'session-a' });
    const beta = await serve(fixture.tools, [guard], { sessionId: 'session-b' });
    await alpha.callTool('get_order_status', { id: '1001' });
    await beta.callTool('get_order_status', { id: '1001' });
    expect(fixture.invocations.get_order_status).toBe(2);
    await beta.callTool('get_order_status', { id: '1001' });
    expect(fixture.invocations.get_order_status).toBe(2);
  });

  it('runs an identical call from another principal, and short-circuits across connections of one principal', async () => {
    const fixture = createFixture();
    const guard = createRepeatGuard();
    const auth = (sub: string) => ({ token: `t-${sub}`, clientId: 'desk-app', scopes: [], extra: { sub } });
    const alice = await serve(fixture.tools, [guard], { authInfo: auth('alice') });
    const bob = await serve(fixture.tools, [guard], { authInfo: auth('bob') });
    const aliceAgain = await serve(fixture.tools, [guard], { authInfo: auth('alice') });
    await alice.callTool('get_order_status', { id: '1001' });
    await bob.callTool('get_order_status', { id: '1001' });
    expect(fixture.invocations.get_order_status).toBe(2);
    const repeated = await aliceAgain.callTool('get_order_status', { id: '1001' });
    expect(fixture.invocations.get_order_status).toBe(2);
    expect(repeated.structuredContent).toEqual({
      ok: true,
      id: '1001',
      status: 'shipped',
      note: REPEAT_NOTE,
    });
  });

  it('adds the scope function to the caller identity: a constant scope never merges two callers', async () => {
    const fixture = createFixture();
    const guard = createRepeatGuard({ scope: () => 'everyone' });
    const auth = (sub: string) => ({ token: `t-${sub}`, clientId: 'desk-app', scopes: [], extra: { sub } });
    const alice = await serve(fixture.tools, [guard], { authInfo: auth('alice') });
    const bob = await serve(fixture.tools, [guard], { authInfo: auth('bob') });
    await alice.callTool('get_order_status', { id: '1001' });
    await bob.callTool('get_order_status', { id: '1001' });
    expect(fixture.invocations.get_order_status).toBe(2);
    await bob.callTool('get_order_status', { id: '1001' });
    expect(fixture.invocations.get_order_status).toBe(2);
  });

  it('runs every call of an opted-out tool', async () => {
    const { fixture, decisions, call } = await setup({ tools: { job_status: false } });
    for (let i = 0; i < 3; i += 1) {
      expect((await call('job_status', { jobId: 'j-1' })).structuredContent).toEqual({
        ok: true,
        jobId: 'j-1',
        state: 'running',
      });
    }
    expect(fixture.invocations.job_status).toBe(3);
    await call('get_order_status', { id: '1' });
    await call('get_order_status', { id: '1' });
    expect(fixture.invocations.get_order_status).toBe(1);
    expect(decisions.flat().map((decision) => decision.action)).toEqual(['short-circuit']);
  });

  it('runs the identical call again once the window has passed', async () => {
    const { fixture, call } = await setup({ windowMs: 60 });
    await call('get_order_status', { id: '1001' });
    await call('get_order_status', { id: '1001' });
    expect(fixture.invocations.get_order_status).toBe(1);
    await sleep(90);
    const after = await call('get_order_status', { id: '1001' });
    expect(fixture.invocations.get_order_status).toBe(2);
    expect(after.structuredContent).toEqual({ ok: true, id: '1001', status: 'shipped' });
  });

  it('follows a per-tool threshold: the third identical call is the first answered from cache', async () => {
    const { fixture, call } = await setup({ tools: { search_orders: { threshold: 3 } } });
    await call('search_orders', { status: 'open' });
    await call('search_orders', { status: 'open' });
    expect(fixture.invocations.search_orders).toBe(2);
    expect((await call('search_orders', { status: 'open' })).structuredContent).toMatchObject({
      note: REPEAT_NOTE,
    });
    expect(fixture.invocations.search_orders).toBe(2);
    await call('get_order_status', { id: '1' });
    await call('get_order_status', { id: '1' });
    expect(fixture.invocations.get_order_status).toBe(1);
  });

  it('passes calls with refused arguments and unknown tools through untouched', async () => {
    const { fixture, decisions, call } = await setup();
    for (let i = 0; i < 2; i += 1) {
      const refused = expectFailure(await call('search_orders', { status: 'lost' }));
      expect(refused.error).toBe('invalid_argument');
      await expect(call('drop_tables', { all: true })).rejects.toThrow('Unknown tool: drop_tables');
    }
    expect(fixture.invocations.search_orders).toBeUndefined();
    expect(decisions).toEqual([[], [], [], []]);
  });
});

describe('createRepeatGuard: onRepeat fail', () => {
  it('answers the repeat with repeated_call and core default hint, without running it', async () => {
    const { fixture, decisions, call } = await setup({ onRepeat: 'fail' });
    await call('get_order_status', { id: '1001' });
    const second = await call('get_order_status', { id: '1001' });
    expect(fixture.invocations.get_order_status).toBe(1);
    expect(second.isError).toBe(true);
    expect(second.structuredContent).toBeUndefined();
    expect(expectFailure(second)).toEqual({
      ok: false,
      error: 'repeated_call',
      message: 'This exact call to get_order_status was already answered moments ago.',
      hint: ERROR_CODE_DEFAULTS.repeated_call.hint,
      retryable: false,
    });
    expect(parseResultText(second)).toEqual(second._meta?.[ERROR_META_KEY]);
    expect(decisions[1]?.[0]?.detail).toMatchObject({ answer: 'repeated_call' });
  });
});

describe('createRepeatGuard: failures', () => {
  it('refuses the repeat of a failed call with the earlier error and a hint not to retry unchanged', async () => {
    const { fixture, decisions, call } = await setup();
    const first = expectFailure(await call('get_order_status', { id: 'missing' }));
    const second = expectFailure(await call('get_order_status', { id: 'missing' }));
    expect(fixture.invocations.get_order_status).toBe(1);
    expect(first).toEqual({
      ok: false,
      error: 'not_found',
      message: 'No order missing.',
      hint: 'Check the id.',
      retryable: false,
    });
    expect(second).toEqual({
      ...first,
      hint: 'This exact call already failed moments ago with this error and would fail the same way; do not retry it unchanged. Check the id.',
    });
    expect(decisions[1]?.[0]).toMatchObject({ action: 'short-circuit', detail: { answer: 'earlier_error' } });
  });

  it('refuses a retryable failure until its retryAfterMs has passed, then runs it', async () => {
    const { fixture, call } = await setup();
    await call('get_order_status', { id: 'busy' });
    const early = expectFailure(await call('get_order_status', { id: 'busy' }));
    expect(fixture.invocations.get_order_status).toBe(1);
    expect(early.error).toBe('unavailable');
    expect(early.retryable).toBe(true);
    expect(early.retryAfterMs).toBeGreaterThan(0);
    expect(early.retryAfterMs).toBeLessThanOrEqual(150);
    expect(early.hint).toBe(
      `This exact call failed moments ago; wait retryAfterMs before retrying it unchanged. ${ERROR_CODE_DEFAULTS.unavailable.hint}`,
    );
    await sleep(170);
    await call('get_order_status', { id: 'busy' });
    expect(fixture.invocations.get_order_status).toBe(2);
  });

  it('runs the repeat of a retryable failure without retryAfterMs', async () => {
    const { fixture, call } = await setup();
    await call('get_order_status', { id: 'slow-db' });
    await call('get_order_status', { id: 'slow-db' });
    expect(fixture.invocations.get_order_status).toBe(2);
  });

  it('never caches a failure as a success: after the retry succeeds, that success is what repeats', async () => {
    const { fixture, call } = await setup();
    expect(expectFailure(await call('get_order_status', { id: 'flaky' })).error).toBe('unavailable');
    await sleep(50);
    const retried = await call('get_order_status', { id: 'flaky' });
    expect(retried.structuredContent).toEqual({ ok: true, id: 'flaky', status: 'shipped' });
    const repeated = await call('get_order_status', { id: 'flaky' });
    expect(repeated.structuredContent).toEqual({
      ok: true,
      id: 'flaky',
      status: 'shipped',
      note: REPEAT_NOTE,
    });
    expect(fixture.invocations.get_order_status).toBe(2);
  });

  it('runs the repeat of a timeout even when it was marked not retryable (a user who did not answer in time)', async () => {
    // Core's elicitation timeout is `timeout` with retryable: false ("ask the user before calling
    // again"); the user agreeing must not be answered with the old timeout for the rest of the window.
    let calls = 0;
    const askUser = defineTool({
      name: 'cancel_order',
      description: 'Cancels an order after asking the user.',
      input: { id: z.string() },
      handler: async ({ id }) => {
        calls += 1;
        if (calls === 1) {
          return fail('timeout', 'No answer from the client within 50 ms.', {
            hint: 'The user did not answer in time. Ask them whether to try again before calling again.',
            retryable: false,
          });
        }
        return ok({ id, cancelled: true });
      },
    }) as ToolDefinition;
    const client = await serve([askUser], [createRepeatGuard()]);
    expect(expectFailure(await client.callTool('cancel_order', { id: 'o-1' }))).toMatchObject({
      error: 'timeout',
      retryable: false,
    });
    const again = await client.callTool('cancel_order', { id: 'o-1' });
    expect(again.structuredContent).toEqual({ ok: true, id: 'o-1', cancelled: true });
    expect(calls).toBe(2);
  });

  it('lets a waiter on an identical call that timed out run itself rather than get that timeout', async () => {
    let calls = 0;
    const gate = createGate();
    const slow = defineTool({
      name: 'ask_user',
      description: 'Asks the user.',
      input: { q: z.string() },
      handler: async ({ q }) => {
        calls += 1;
        if (calls === 1) {
          gate.enter();
          await gate.opened;
          return fail('timeout', 'No answer from the client within 50 ms.', { retryable: false });
        }
        return ok({ q, answer: 'yes' });
      },
    }) as ToolDefinition;
    const client = await serve([slow], [createRepeatGuard()]);
    const first = client.callTool('ask_user', { q: 'proceed?' });
    await gate.entered;
    const second = client.callTool('ask_user', { q: 'proceed?' });
    await sleep(20);
    gate.open();
    expect(expectFailure(await first).error).toBe('timeout');
    expect((await second).structuredContent).toEqual({ ok: true, q: 'proceed?', answer: 'yes' });
    expect(calls).toBe(2);
  });

  it('runs every repeat of a failed call with onFailedRepeat run, and forgets an earlier success', async () => {
    const { fixture, call } = await setup({ onFailedRepeat: 'run' });
    await call('get_order_status', { id: 'missing' });
    await call('get_order_status', { id: 'missing' });
    expect(fixture.invocations.get_order_status).toBe(2);
  });

  it('does not remember a call whose handler threw: the next identical call runs', async () => {
    const { fixture, call } = await setup();
    expect(expectFailure(await call('get_order_status', { id: 'crash' })).error).toBe('internal');
    expect(expectFailure(await call('get_order_status', { id: 'crash' })).error).toBe('internal');
    expect(fixture.invocations.get_order_status).toBe(2);
  });

  it('does not remember a call the client cancelled', async () => {
    const fixture = createFixture();
    const client = await serve(fixture.tools, [createRepeatGuard()]);
    const controller = new AbortController();
    const cancelled = client.callTool('get_order_status', { id: 'cancel-me' }, { signal: controller.signal });
    await sleep(20);
    controller.abort();
    await expect(cancelled).rejects.toThrow();
    await sleep(20);
    const again = client.callTool('get_order_status', { id: 'cancel-me' }, { timeoutMs: 200 });
    await expect(again).rejects.toThrow('Request timed out');
    expect(fixture.invocations.get_order_status).toBe(2);
  });
});

describe('createRepeatGuard: concurrency (single flight)', () => {
  it('makes an identical call that arrives while the first runs wait for its answer instead of running', async () => {
    const { fixture, decisions, call } = await setup();
    const first = call('get_order_status', { id: 'slow' });
    await fixture.gate.entered;
    const second = call('get_order_status', { id: 'slow' });
    const other = call('get_order_status', { id: 'other' });
    await other;
    fixture.gate.open();
    const [a, b] = await Promise.all([first, second]);
    expect(fixture.invocations.get_order_status).toBe(2);
    expect(a.structuredContent).toEqual({ ok: true, id: 'slow', status: 'shipped' });
    expect(b.structuredContent).toEqual({ ok: true, id: 'slow', status: 'shipped', note: REPEAT_NOTE });
    expect(decisions.flat()).toEqual([
      {
        by: 'repeat-guard',
        action: 'short-circuit',
        reason: 'repeated_call',
        detail: { answer: 'cached', ageMs: expect.any(Number), executions: 1, inFlight: true },
      },
    ]);
  });

  it('keeps several flights apart: each identical arrival waits for its own, also after the first of them ended', async () => {
    // The first flight of a moment sits in a slot of its own, later ones in a Map: every waiter must
    // find its own flight in either place, and the slot must free only for its own flight.
    const gates = { a: createGate(), b: createGate(), c: createGate() };
    const runs: string[] = [];
    const gated = defineTool({
      name: 'gated',
      description: 'Waits at a gate per id.',
      input: { id: z.enum(['a', 'b', 'c']) },
      handler: async ({ id }) => {
        runs.push(id);
        gates[id].enter();
        await gates[id].opened;
        return ok({ id });
      },
    }) as ToolDefinition;
    const client = await serve([gated], [createRepeatGuard()]);
    const call = (id: string) => client.callTool('gated', { id });
    const a1 = call('a');
    await gates.a.entered;
    const b1 = call('b');
    await gates.b.entered;
    const a2 = call('a');
    const b2 = call('b');
    // a's flight (the slot) ends while b's (the Map) still runs; then c takes the freed slot.
    gates.a.open();
    expect((await a1).structuredContent).toEqual({ ok: true, id: 'a' });
    expect((await a2).structuredContent).toMatchObject({ id: 'a', note: REPEAT_NOTE });
    const c1 = call('c');
    await gates.c.entered;
    const b3 = call('b');
    const c2 = call('c');
    gates.b.open();
    gates.c.open();
    const [rb1, rb2, rb3, rc1, rc2] = await Promise.all([b1, b2, b3, c1, c2]);
    expect(rb1.structuredContent).toEqual({ ok: true, id: 'b' });
    for (const repeat of [rb2, rb3])
      expect(repeat.structuredContent).toMatchObject({ id: 'b', note: REPEAT_NOTE });
    expect(rc1.structuredContent).toEqual({ ok: true, id: 'c' });
    expect(rc2.structuredContent).toMatchObject({ id: 'c', note: REPEAT_NOTE });
    // Each id ran once: every repeat waited for the flight of its own key.
    expect(runs).toEqual(['a', 'b', 'c']);
  });
});

describe('createRepeatGuard: no progress', () => {
  it('is off by default', async () => {
    const { fixture, decisions, call } = await setup();
    for (const sku of ['a', 'b', 'c', 'd']) await call('lookup_sku', { sku });
    expect(fixture.invocations.lookup_sku).toBe(4);
    expect(decisions.flat()).toEqual([]);
  });

  it('adds a note when the same tool returns an identical result N times in a row with different arguments', async () => {
    const { fixture, decisions, call } = await setup({ noProgress: 3 });
    const a = await call('lookup_sku', { sku: 'a' });
    await call('lookup_sku', { sku: 'a' }); // a repeat neither extends nor breaks the streak
    const b = await call('lookup_sku', { sku: 'b' });
    const c = await call('lookup_sku', { sku: 'c' });
    expect(fixture.invocations.lookup_sku).toBe(3);
    expect(a.structuredContent).toEqual({ ok: true, found: false });
    expect(b.structuredContent).toEqual({ ok: true, found: false });
    const note =
      'No progress: the last 3 calls to lookup_sku returned this same result with different arguments. Varying the arguments is not changing the answer; answer the user with what you have.';
    expect(c).toEqual({
      content: [{ type: 'text', text: JSON.stringify({ ok: true, found: false, note }) }],
      structuredContent: { ok: true, found: false, note },
    });
    expect(decisions[3]).toEqual([
      {
        by: 'repeat-guard',
        action: 'no-progress',
        reason: 'identical result with different arguments',
        detail: { streak: 3, answer: 'note' },
      },
    ]);
  });

  it('answers repeated_call with onNoProgress fail, and a different result breaks the streak', async () => {
    const { call } = await setup({ noProgress: 2, onNoProgress: 'fail' });
    await call('get_order_status', { id: '1' });
    await call('get_order_status', { id: 'missing' });
    await call('lookup_sku', { sku: 'a' });
    const second = expectFailure(await call('lookup_sku', { sku: 'b' }));
    expect(second).toEqual({
      ok: false,
      error: 'repeated_call',
      message: 'The last 2 calls to lookup_sku returned the same result with different arguments.',
      hint: 'Varying the arguments is not changing the result. Stop calling this tool with variations and answer the user with what you have.',
      retryable: false,
    });
  });
});

describe('createRepeatGuard: hostile input and a failing store', () => {
  it('keeps keys a fixed size whatever the arguments, and never stores the arguments themselves', async () => {
    const keys: string[] = [];
    const values: string[] = [];
    const inner = createMemoryRepeatStore();
    const { fixture, call } = await setup({
      store: {
        get: (key) => inner.get(key),
        set: (key, value, ttl) => {
          keys.push(key);
          values.push(value);
          inner.set(key, value, ttl);
        },
        delete: (key) => inner.delete(key),
      },
    });
    const huge = 'x'.repeat(200_000);
    await call('get_order_status', { id: huge });
    await call('get_order_status', { id: '__proto__' });
    await call('get_order_status', { id: '"]' });
    expect(fixture.invocations.get_order_status).toBe(3);
    expect(keys.map((key) => key.length)).toEqual([45, 45, 45]);
    expect(new Set(keys).size).toBe(3);
  });

  it('does not remember a result larger than maxResultSize', async () => {
    const { fixture, call } = await setup({ maxResultSize: 100 });
    const long = 'y'.repeat(200);
    await call('get_order_status', { id: long });
    await call('get_order_status', { id: long });
    expect(fixture.invocations.get_order_status).toBe(2);
  });

  it('runs calls when the store holds foreign or corrupt values', async () => {
    const corrupt = ['not json', '{"v":1,"n":5,"f":0,"t":0,"r":{"content":"x"}}', '{"v":2}', 'null'];
    let reads = 0;
    const { fixture, call } = await setup({
      store: {
        get: () => corrupt[reads++ % corrupt.length],
        set: () => undefined,
        delete: () => undefined,
      },
    });
    for (let i = 0; i < 4; i += 1) await call('get_order_status', { id: '1' });
    expect(fixture.invocations.get_order_status).toBe(4);
  });

  it('runs calls when a stored entry is damaged so that answering from it would throw or replay garbage', async () => {
    // Well-formed JSON of the guard's own format, damaged inside the result: a null part, mirrored
    // text that is not an object, structured content or _meta that is not one, an envelope whose
    // message is not text. Each must read as absent, as a foreign value does.
    const at = Date.now();
    const entry = (result: string, mirrored = false): string =>
      `{"v":1,"n":5,"f":${at},"t":${at},"r":${result}${mirrored ? ',"s":1' : ''}}`;
    const damaged = [
      entry('{"content":[null]}'),
      entry('{"content":[{"type":"text","text":"null"}]}', true),
      entry('{"content":[{"type":"text","text":"[1,2]"}]}', true),
      entry('{"content":[{"type":"text","text":5}]}'),
      entry('{"content":[],"structuredContent":null}'),
      entry('{"content":[],"structuredContent":"x"}'),
      entry('{"content":[],"isError":true,"_meta":null}'),
      entry('{"content":[],"isError":true,"_meta":{"toolgate/error":null}}'),
      entry(
        '{"content":[],"isError":true,"_meta":{"toolgate/error":{"ok":false,"error":"not_found","message":5}}}',
      ),
    ];
    let reads = 0;
    const { fixture, call } = await setup({
      store: {
        get: () => damaged[reads++ % damaged.length],
        set: () => undefined,
        delete: () => undefined,
      },
    });
    for (let i = 0; i < damaged.length; i += 1) {
      const result = await call('get_order_status', { id: '1' });
      expect(result.structuredContent).toEqual({ ok: true, id: '1', status: 'shipped' });
    }
    expect(fixture.invocations.get_order_status).toBe(damaged.length);
  });

  it('fails open when the store throws: the call runs and the log gets a warning', async () => {
    const { fixture, logs, call } = await setup({
      store: {
        get: async () => {
          throw new Error('ECONNREFUSED 127.0.0.1:6390');
        },
        set: () => {
          throw new Error('READONLY');
        },
        delete: () => undefined,
      },
    });
    const first = await call('get_order_status', { id: '1' });
    await call('get_order_status', { id: '1' });
    expect(fixture.invocations.get_order_status).toBe(2);
    expect(first.structuredContent).toEqual({ ok: true, id: '1', status: 'shipped' });
    // One incident, one line: not one per call or per operation.
    expect(logs.filter((log) => log.level === 'warn').map((log) => log.message)).toEqual([
      'repeat-guard: the store failed; calls run unguarded until it answers',
    ]);
  });
});

describe('createRepeatGuard: options', () => {
  it('refuses rules that cannot work, naming the option', () => {
    expect(() => createRepeatGuard({ threshold: 1 })).toThrow(
      'createRepeatGuard: threshold must be an integer of at least 2',
    );
    expect(() => createRepeatGuard({ windowMs: Number.NaN })).toThrow(
      'createRepeatGuard: windowMs must be a finite number',
    );
    expect(() => createRepeatGuard({ onRepeat: 'ignore' as never })).toThrow(
      "onRepeat must be 'cached' or 'fail'",
    );
    expect(() => createRepeatGuard({ noProgress: 1 })).toThrow(
      'noProgress must be false or an integer of at least 2',
    );
    expect(() => createRepeatGuard({ tools: { job_status: { threshold: 0 } } })).toThrow(
      'createRepeatGuard: tools.job_status: threshold must be an integer of at least 2',
    );
    expect(() => createRepeatGuard({ tools: { job_status: true as never } })).toThrow(
      'createRepeatGuard: tools.job_status must be an object of options or false',
    );
    expect(() => createMemoryRepeatStore({ maxEntries: 0 })).toThrow('maxEntries must be a positive integer');
  });

  it('refuses an unknown per-tool option and names the tool, and merges a tool override over the globals', async () => {
    expect(() => createRepeatGuard({ tools: { job_status: { treshold: 3 } as never } })).toThrow(
      'createRepeatGuard: tools.job_status has unknown option(s) treshold; a tool may set threshold, windowMs, onRepeat, onFailedRepeat, noProgress, onNoProgress, maxResultSize',
    );
    expect(() =>
      createRepeatGuard({ tools: { job_status: { onRepeat: 'fail' } }, onFailedRepeat: 'x' as never }),
    ).toThrow("createRepeatGuard: onFailedRepeat must be 'refuse' or 'run'");
    // Global onRepeat 'fail', search_orders overrides threshold only: it keeps the global onRepeat.
    const { fixture, call } = await setup({ onRepeat: 'fail', tools: { search_orders: { threshold: 3 } } });
    await call('search_orders', { status: 'open' });
    await call('search_orders', { status: 'open' });
    expect(fixture.invocations.search_orders).toBe(2);
    expect(expectFailure(await call('search_orders', { status: 'open' })).error).toBe('repeated_call');
    expect(fixture.invocations.search_orders).toBe(2);
  });

  it('keeps repeatGuard as a deprecated alias of createRepeatGuard', () => {
    expect(repeatGuard).toBe(createRepeatGuard);
  });
});
