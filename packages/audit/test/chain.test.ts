import {
  canonicalJson,
  createSilentLogger,
  DEFAULT_SECRET_KEYS,
  ok,
  SECRET_PATTERNS,
  type ToolContext,
} from '@toolgate/core';
import { describe, expect, it } from 'vitest';
import { createShapeJson } from '../src/args-shape.js';
import { durationText, isoTime, sealRecord } from '../src/chain.js';
import { GENESIS_HASH } from '../src/index.js';
import { type CapturedRecord, captureCall } from '../src/record.js';
import { createRedactedJson } from '../src/redacted-json.js';

const aborted = AbortSignal.abort();

/** A context with every optional fact present: aborted, traced, an unknown tool, an incident, decisions. */
function fullContext(args: unknown): ToolContext {
  return {
    toolName: 'ünïcode "tool"',
    tool: undefined,
    args: args as Record<string, unknown>,
    rawArgs: args,
    validation: { ok: true },
    request: {
      id: 'req-1',
      sessionId: 's',
      authInfo: { token: 't', clientId: 'c', scopes: [] },
      meta: undefined,
      headers: undefined,
      signal: aborted,
    },
    caller: { id: 'client:c#digest', kind: 'client', clientId: 'c' },
    bindings: { customerId: 7, sessionToken: 'abc' },
    signal: aborted,
    startedAt: Date.parse('2026-01-02T03:04:05.006Z'),
    startTime: performance.now(),
    incidentId: 'inc_x',
    decisions: [{ by: 'x', action: 'y', detail: { k: 1, a: 2 } }],
    state: { trace: { traceId: 't', spanId: 'sp' } },
    logger: createSilentLogger(),
  } as unknown as ToolContext;
}

const settings = {
  args: 'redacted' as const,
  redactedJson: createRedactedJson(DEFAULT_SECRET_KEYS, SECRET_PATTERNS),
  shapeJson: createShapeJson(SECRET_PATTERNS),
  plainIds: true,
};

describe('captureCall + sealRecord', () => {
  it("marks a call aborted when its own signal or the caller's aborted, and only then", () => {
    const live = new AbortController().signal;
    const abortedOf = (signal: AbortSignal, callerSignal: AbortSignal): boolean => {
      const ctx = fullContext({});
      const withSignals = {
        ...ctx,
        signal,
        request: { ...ctx.request, signal: callerSignal },
      } as ToolContext;
      return captureCall(withSignals, ok({}), settings, 'chain-1', 65_536).aborted;
    };
    // The caller's own signal, as most calls have it.
    expect(abortedOf(live, live)).toBe(false);
    expect(abortedOf(aborted, aborted)).toBe(true);
    // A signal a middleware derived (a breaker's deadline) that fired, the caller's still live.
    expect(abortedOf(aborted, live)).toBe(true);
    // The caller cancelled while the call held a derived signal that had not fired.
    expect(abortedOf(live, aborted)).toBe(true);
  });

  it('the line is exactly core canonicalJson of the record without its hash, plus the hash', () => {
    const captured = captureCall(
      fullContext({ z: [1, { b: 2, a: null }], a: 'x\u2028y', n: 1e21 }),
      ok({ x: 1 }),
      settings,
      'chain-1',
      65_536,
    );
    const { line, row } = sealRecord(captured, { seq: 41, hash: 'f'.repeat(64) }, 'chain-1');
    const parsed = JSON.parse(line) as Record<string, unknown>;
    const { hash, ...rest } = parsed;
    expect(rest).toEqual({
      aborted: true,
      args: { z: [1, { b: 2, a: null }], a: 'x\u2028y', n: 1e21 },
      bindings: { customerId: 7, sessionToken: '[REDACTED]' },
      caller: 'client:c#digest',
      chainId: 'chain-1',
      clientId: 'c',
      decisions: [{ by: 'x', action: 'y', detail: { k: 1, a: 2 } }],
      durationMs: expect.any(Number),
      incidentId: 'inc_x',
      outcome: 'ok',
      prevHash: 'f'.repeat(64),
      principal: 'c',
      requestId: 'req-1',
      resultBytes: 0,
      seq: 42,
      sessionId: 's',
      spanId: 'sp',
      time: '2026-01-02T03:04:05.006Z',
      tool: 'ünïcode "tool"',
      traceId: 't',
      unknownTool: true,
    });
    expect(line).toBe(`${canonicalJson(rest).slice(0, -1)},"hash":"${hash}"}`);
    expect(row).toEqual({
      chainId: 'chain-1',
      seq: 42,
      time: '2026-01-02T03:04:05.006Z',
      tool: 'ünïcode "tool"',
      outcome: 'ok',
      principal: 'c',
      caller: 'client:c#digest',
      incidentId: 'inc_x',
      hash,
    });
  });

  it('consecutive records that change any field, on two chains, each match canonicalJson exactly (the repeated runs are reused only while equal)', () => {
    // Record after record, every optional field and every value of a repeated run changes in
    // turn (and back), so a run kept from the record before is reused only where it still holds.
    const variants = {
      caller: ['client:a#1', 'sub:https://issuer|u "2"'],
      clientId: [undefined, 'c1'],
      decisions: ['[]', '[{"action":"allow","by":"authz"}]'],
      outcome: ['ok', 'not_found'],
      principal: [undefined, 'p-1'],
      sessionId: [undefined, 'sess-1'],
      tool: ['echo', 'get_örder'],
      traceId: [undefined, 'trace-1'],
      spanId: [undefined, 'span-1'],
      unknownTool: [false, true],
      chainId: ['chain-a', 'chain-b'],
    } as const;
    const keys = Object.keys(variants) as (keyof typeof variants)[];
    let state = 0x9e3779b9;
    for (let index = 0; index < 600; index += 1) {
      state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
      const pick = <K extends keyof typeof variants>(key: K): (typeof variants)[K][number] =>
        variants[key][(state >>> (16 + keys.indexOf(key))) & 1] as (typeof variants)[K][number];
      const chainId = pick('chainId');
      const captured: CapturedRecord = {
        args: `{"i":${index}}`,
        argsPreview: index % 4 === 0 ? '{"i":"x…[+5 characters]"}' : undefined,
        bindings: index % 7 === 0 ? '{"customerId":7}' : undefined,
        decisions: pick('decisions'),
        aborted: index % 11 === 0,
        caller: pick('caller'),
        clientId: pick('clientId'),
        durationMs: index / 7,
        incidentId: index % 5 === 0 ? `inc_${index}` : undefined,
        outcome: pick('outcome'),
        principal: pick('principal'),
        requestId: index % 3 === 0 ? `r-${index}` : index,
        resultBytes: index * 3,
        sessionId: pick('sessionId'),
        spanId: pick('spanId'),
        traceId: pick('traceId'),
        startedAt: Date.parse('2026-01-02T03:04:05.006Z') + index,
        tool: pick('tool'),
        unknownTool: pick('unknownTool'),
        bytes: 1000,
        ack: undefined,
      };
      const { line } = sealRecord(captured, { seq: index, hash: 'a'.repeat(64) }, chainId);
      const { hash, ...rest } = JSON.parse(line) as Record<string, unknown>;
      expect(line).toBe(`${canonicalJson(rest).slice(0, -1)},"hash":"${hash}"}`);
      expect(rest).toEqual({
        ...(captured.aborted ? { aborted: true } : {}),
        args: { i: index },
        ...(captured.argsPreview ? { argsPreview: { i: 'x…[+5 characters]' } } : {}),
        ...(captured.bindings ? { bindings: { customerId: 7 } } : {}),
        caller: captured.caller,
        chainId,
        ...(captured.clientId ? { clientId: captured.clientId } : {}),
        decisions: JSON.parse(captured.decisions) as unknown,
        durationMs: Math.round((index / 7) * 1000) / 1000,
        ...(captured.incidentId ? { incidentId: captured.incidentId } : {}),
        outcome: captured.outcome,
        prevHash: 'a'.repeat(64),
        ...(captured.principal ? { principal: captured.principal } : {}),
        requestId: captured.requestId,
        resultBytes: index * 3,
        seq: index + 1,
        ...(captured.sessionId ? { sessionId: captured.sessionId } : {}),
        ...(captured.spanId ? { spanId: captured.spanId } : {}),
        time: new Date(captured.startedAt).toISOString(),
        tool: captured.tool,
        ...(captured.traceId ? { traceId: captured.traceId } : {}),
        ...(captured.unknownTool ? { unknownTool: true } : {}),
      });
    }
  });

  it('a shared frozen decision is written once and reused, redacted like any other', () => {
    const shared = Object.freeze({ by: 'authz', action: 'allow', reason: 'token=hunter2secretvalue' });
    const own = { by: 'rate-limit', action: 'limit', reason: 'rate_limited', detail: { limit: 5 } };
    for (const decisions of [[shared], [shared, own], [own, shared, shared]]) {
      const ctx = { ...fullContext({}), decisions } as unknown as ToolContext;
      const line = sealRecord(captureCall(ctx, ok({}), settings, 'c', 65_536), undefined, 'c').line;
      const recorded = (JSON.parse(line) as { decisions: unknown[] }).decisions;
      expect(JSON.stringify(recorded)).toBe(settings.redactedJson(decisions));
      expect(JSON.stringify(recorded)).not.toContain('hunter2');
    }
  });

  it('a string request id: short plain and lower-case hex ids are kept as sent; any other id, and every id under added patterns, go through the redactor', () => {
    const withId = (id: string): ToolContext => {
      const ctx = fullContext({});
      return { ...ctx, request: { ...ctx.request, id } } as ToolContext;
    };
    const recorded = (id: string, using: typeof settings): string | number =>
      captureCall(withId(id), ok({}), using, 'c', 65_536).requestId;
    const uuid = '3f2a9c1d-1234-4abc-9def-0123456789ab';
    expect(recorded(uuid, settings)).toBe(uuid);
    expect(recorded('42', settings)).toBe('42');
    expect(recorded('req-42', settings)).toBe('req-42');
    expect(recorded('Bearer', settings)).toBe('Bearer');
    // 13 characters: a JWT's shortest shape, redacted.
    expect(recorded('eyJabcd.efgh.', settings)).toBe('[REDACTED]');
    // Past 64 characters, or with a letter beyond f, the id takes the redactor's path; plain, it is unchanged.
    expect(recorded('a'.repeat(65), settings)).toBe('a'.repeat(65));
    expect(recorded('ACCA0123456789ABCDEF', settings)).toBe('[REDACTED]');
    expect(recorded('xoxb-0123456789-abcdef', settings)).toBe('[REDACTED]');
    // An application's own pattern may match hex (its internal tokens): then every string id is redacted.
    const hexToken = { name: 'internal-token', pattern: /\b[0-9a-f]{32}\b/g, replace: '[REDACTED]' };
    const custom = {
      args: 'redacted' as const,
      redactedJson: createRedactedJson(DEFAULT_SECRET_KEYS, [...SECRET_PATTERNS, hexToken]),
      shapeJson: createShapeJson([...SECRET_PATTERNS, hexToken]),
      plainIds: false,
    };
    expect(recorded('0123456789abcdef0123456789abcdef', custom)).toBe('[REDACTED]');
    expect(recorded(uuid, custom)).toBe(uuid);
    const shortToken = { name: 'short', pattern: /\btk-\w{4}\b/g, replace: '[REDACTED]' };
    const short = { ...custom, redactedJson: createRedactedJson(DEFAULT_SECRET_KEYS, [shortToken]) };
    expect(recorded('tk-abcd', short)).toBe('[REDACTED]');
  });

  it('starts a chain at seq 1 after the genesis hash, and cuts oversized args', () => {
    const captured = captureCall(fullContext({ big: 'x'.repeat(100) }), ok({}), settings, 'c', 50);
    expect(JSON.parse(sealRecord(captured, undefined, 'c').line)).toMatchObject({
      seq: 1,
      prevHash: GENESIS_HASH,
      args: '[Truncated: 110 characters]',
    });
  });

  it('is serialised at capture: mutating the args or the result afterwards changes nothing', () => {
    const args = { list: ['a'] };
    const result = ok({ items: ['one'] });
    const captured = captureCall(fullContext(args), result, settings, 'c', 65_536);
    const before = sealRecord(captured, undefined, 'c').line;
    args.list.push('b');
    (result.structuredContent as { items: string[] }).items.push('two');
    expect(sealRecord(captured, undefined, 'c').line).toBe(before);
    expect(JSON.parse(before).args).toEqual({ list: ['a'] });
    expect(captured.bytes).toBeGreaterThan(before.length - 200);
  });
});

describe('isoTime', () => {
  it('formats like Date#toISOString across seconds, milliseconds and fractions', () => {
    const starts = [0, 1, 9, 10, 99, 100, 999, 1000, 1_764_537_522_123, 1_764_537_522_999, 1_764_537_523_000];
    for (const base of starts) {
      for (const ms of [base, base + 0.7]) {
        expect(isoTime(ms)).toBe(new Date(Math.floor(ms)).toISOString());
      }
    }
    // Back in time after a later second was cached
    expect(isoTime(1_764_537_522_005)).toBe('2025-11-30T21:18:42.005Z');
  });
});

describe('durationText', () => {
  const reference = (ms: number): string => JSON.stringify(Math.round(ms * 1000) / 1000);

  it('writes every microsecond of the first 3 s exactly as JSON.stringify of the rounded double', () => {
    for (let micros = 0; micros <= 3_000_000; micros += 1) {
      const ms = micros / 1000;
      if (durationText(ms) !== reference(ms)) expect(durationText(ms)).toBe(reference(ms));
    }
  });

  it('matches for unrounded, large and edge values too', () => {
    const values = [0, -0, 1e-9, 0.0004, 0.0005, 0.0015, 2.5e-4, 999.9995, 86_400_000.123, 999_999_999.999];
    let seed = 7;
    for (let index = 0; index < 200_000; index += 1) {
      seed = (seed * 16807) % 2147483647;
      values.push((seed / 2147483647) * 10 ** (index % 10));
    }
    // Beyond the integer path: the reference formatting itself.
    values.push(1e9, 1e12 + 0.001, -1, Number.NaN, Number.POSITIVE_INFINITY);
    for (const ms of values) {
      if (durationText(ms) !== reference(ms)) expect([ms, durationText(ms)]).toEqual([ms, reference(ms)]);
    }
  });
});
