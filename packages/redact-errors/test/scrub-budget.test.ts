import {
  defineTool,
  ERROR_META_KEY,
  FAILURE_WITHHELD,
  fail,
  MAX_FAILURE_VALUES,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { createRedactErrors } from '../src/index.js';
import { closeAll, INCIDENT_ID, seenEnvelope, serve } from './helpers.js';

// The marker a string past `maxScrubChars` becomes (documented in the README).
const WITHHELD = '[withheld: too much text]';
const WITHHELD_LINE = 'redact-errors: withheld failure text past maxScrubChars';
// Core's line for a failure past its model-facing bound (core's README).
const CORE_BOUND_LINE = /^tool failure past the model-facing bound/;
// A connection string with its password, URL-encoded: the scrub decodes it and removes it.
const encodedSecret = (i: number): string => `redis%3A%2F%2F%3Apw${i}q%4010.0.${i >> 8}.${i & 255}%3A6379`;

afterEach(closeAll);

/** Every item is what the tool wrote (or its scrubbed form) until the first withheld one, withheld after. */
function expectWithheldTail<T>(items: readonly T[], withheld: (item: T) => boolean): number {
  const first = items.findIndex(withheld);
  expect(first).toBeGreaterThan(0);
  expect(items.slice(first).every(withheld)).toBe(true);
  return first;
}

describe('maxScrubChars: a failure full of model-chosen text costs a bounded scrub, and fails closed', () => {
  it('a validation error listing 50,000 field names, made below it: its own pass shows the first, withholds the rest, a secret past the budget never reaches the client', async () => {
    const names = Array.from({ length: 50_000 }, (_, i) => `field_${i}`);
    names[45_000] = encodedSecret(45_000);
    const tool = defineTool({
      name: 'validate_fields',
      description: 'Answered by the stand-in validator below redact-errors.',
      input: {},
      handler: () => fail('internal', 'never runs'),
    });
    // A middleware below redact-errors: core's boundary has not seen this failure yet.
    const validator: ToolMiddleware = async () =>
      fail('invalid_argument', 'Unknown fields.', {
        hint: 'Use only the fields listed by describe_fields.',
        fields: names.map((path) => ({ path, expected: 'a known field name' })),
      });
    const entries: LogEntry[] = [];
    const c = await serve([tool], [createRedactErrors(), validator], recordingLogger(entries));
    const result = await c.callTool('validate_fields', {});
    const envelope = seenEnvelope(result);
    expect(envelope).toMatchObject({
      ok: false,
      error: 'invalid_argument',
      message: 'Unknown fields.',
      hint: 'Use only the fields listed by describe_fields.',
      retryable: false,
    });
    expect(envelope.incidentId).toMatch(INCIDENT_ID);
    const fields = envelope.fields ?? [];
    expect(fields.length).toBeLessThan(names.length);
    const shown = expectWithheldTail(
      fields,
      (field) => field.path === WITHHELD || field.expected === WITHHELD,
    );
    expect(fields.slice(0, shown)).toEqual(
      names.slice(0, shown).map((path) => ({ path, expected: 'a known field name' })),
    );
    expect(fields.at(-1)).toEqual({ path: WITHHELD, expected: WITHHELD });
    const seen = JSON.stringify(result);
    expect(seen).not.toContain('pw45000q');
    expect(seen).not.toContain('field_49999');

    // The log has the failure as it came under the id the model sees (four budgets of it).
    const lines = entries.filter((entry) => entry.message === WITHHELD_LINE);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'warn',
      fields: {
        tool: 'validate_fields',
        incidentId: envelope.incidentId,
        origin: 'returned',
        maxScrubChars: 65_536,
        removed: { withheld: expect.any(Number) },
      },
    });
    const original = lines[0]?.fields.original as { _meta: Record<string, { fields: { path: string }[] }> };
    const logged = original._meta[ERROR_META_KEY]!.fields;
    expect(logged.slice(0, shown).map((field) => field.path)).toEqual(names.slice(0, shown));
    expect(logged.length).toBeGreaterThan(shown);
    // Core's exit pass found the failure within its own bound: nothing more withheld, no line of its own.
    expect(entries.filter((entry) => CORE_BOUND_LINE.test(entry.message ?? ''))).toEqual([]);
  });

  it('_meta with 30,000 short URL-encoded secrets, made below it: each is scrubbed or withheld, none passes, the rest is counted', async () => {
    const secrets = Array.from({ length: 30_000 }, (_, i) => encodedSecret(i));
    const tool = defineTool({
      name: 'lookup_caches',
      description: 'Answered by the stand-in cache client below redact-errors.',
      input: {},
      handler: () => fail('internal', 'never runs'),
    });
    const caches: ToolMiddleware = async () => {
      const failure = fail('unavailable', 'Some caches did not answer.');
      return { ...failure, _meta: { ...failure._meta, unreachable: secrets } };
    };
    const entries: LogEntry[] = [];
    let decisions: unknown[] = [];
    const recorder: ToolMiddleware = async (ctx, next) => {
      const answer = await next();
      decisions = ctx.decisions;
      return answer;
    };
    const c = await serve([tool], [recorder, createRedactErrors(), caches], recordingLogger(entries));
    const result = await c.callTool('lookup_caches', {});
    const envelope = seenEnvelope(result);
    expect(envelope).toMatchObject({ error: 'unavailable', message: 'Some caches did not answer.' });
    expect(envelope.incidentId).toMatch(INCIDENT_ID);
    expect(Object.keys(result._meta ?? {}).sort()).toEqual([ERROR_META_KEY, 'unreachable']);
    const shown = result._meta?.unreachable as string[];
    expect(shown.length).toBeLessThan(secrets.length);
    const first = expectWithheldTail(shown, (item) => item === WITHHELD);
    expect(new Set(shown.slice(0, first))).toEqual(new Set(['[connection]']));
    expect(JSON.stringify(result)).not.toMatch(/pw\d+q|%3Apw/);
    const removed = (decisions as { by: string; detail: { removed: Record<string, number> } }[]).find(
      (decision) => decision.by === 'redact-errors',
    )?.detail.removed;
    expect(removed?.withheld).toBeGreaterThan(0);
    const line = entries.find((entry) => entry.message === WITHHELD_LINE);
    expect(line?.fields.incidentId).toBe(envelope.incidentId);
    expect(line?.fields.original).toBeDefined();
  });

  it('200,000 one-character strings from the handler: core bounds them before any hook, the client gets a short list ending in the marker', async () => {
    const chatty = defineTool({
      name: 'chatty_failure',
      description: 'Fails with a huge list.',
      input: {},
      handler: () => {
        const failure = fail('not_found', 'Nothing matches.');
        const items = Array.from({ length: 200_000 }, (_, i) => String.fromCharCode(97 + (i % 26)));
        return { ...failure, _meta: { ...failure._meta, items } };
      },
    });
    const entries: LogEntry[] = [];
    const c = await serve([chatty], [createRedactErrors()], recordingLogger(entries));
    const result = await c.callTool('chatty_failure', {});
    const envelope = seenEnvelope(result);
    expect(envelope).toMatchObject({ error: 'not_found', incidentId: expect.stringMatching(INCIDENT_ID) });
    const items = result._meta?.items as string[];
    expect(items.length).toBeLessThanOrEqual(MAX_FAILURE_VALUES);
    expect(items.at(-1)).toBe(WITHHELD);
    expect(items.slice(0, 26)).toEqual([...'abcdefghijklmnopqrstuvwxyz']);
    const line = entries.find((entry) => CORE_BOUND_LINE.test(entry.message ?? ''));
    expect(line?.fields.incidentId).toBe(envelope.incidentId);
  });

  it('content parts and structuredContent of a failure answered below it (a replayed answer) are bounded too, the original logged', async () => {
    const tool = defineTool({
      name: 'replayed',
      description: 'Answered by the stand-in cache below redact-errors.',
      input: {},
      handler: () => fail('internal', 'never runs'),
    });
    const parts = Array.from({ length: 20_000 }, (_, i) => ({
      type: 'text' as const,
      text: encodedSecret(i),
    }));
    const replay: ToolMiddleware = async () => {
      const failure = fail('not_found', 'No such orders.');
      return {
        ...failure,
        content: [...failure.content, ...parts],
        structuredContent: { rejected: parts.map((part) => part.text) },
      } as ToolResult;
    };
    let seenByAudit: ToolResult | undefined;
    const audit: ToolMiddleware = async (_ctx, next) => {
      seenByAudit = await next();
      return seenByAudit;
    };
    const entries: LogEntry[] = [];
    const c = await serve([tool], [audit, createRedactErrors(), replay], recordingLogger(entries));
    const envelope = seenEnvelope(await c.callTool('replayed', {}));
    expect(envelope).toMatchObject({ error: 'not_found', message: 'No such orders.' });
    expect(envelope.incidentId).toMatch(INCIDENT_ID);
    // What audit records (outside redact-errors) is bounded and scrubbed, the envelope's text intact.
    const content = seenByAudit?.content ?? [];
    expect(JSON.parse((content[0] as { text: string }).text)).toEqual(envelope);
    const texts = content.slice(1).map((part) => (part as { text: string }).text);
    const first = expectWithheldTail(texts, (text) => text === WITHHELD);
    expect(new Set(texts.slice(0, first))).toEqual(new Set(['[connection]']));
    expect(JSON.stringify(seenByAudit)).not.toMatch(/pw\d+q|%3Apw/);
    expect(seenByAudit?._meta?.[ERROR_META_KEY]).toEqual(envelope);
    const line = entries.find((entry) => entry.message === WITHHELD_LINE);
    expect(line?.fields.incidentId).toBe(envelope.incidentId);
    // The log shows four budgets' worth of the failure as it came (secrets redacted by core).
    const original = line?.fields.original as { content: { text: string }[] } | undefined;
    const logged = original?.content ?? [];
    expect(logged.length).toBeGreaterThan(2 * content.length);
    expect(logged[1]?.text).toBe(encodedSecret(0));
    expect(logged.at(-1)).toEqual({ type: 'text', text: WITHHELD });
  });

  it('a failure made outside it (a middleware wrapping it) with 200,000 strings: core bounds it, the hook scrubs what is shown, a secret past the bound never reaches the client', async () => {
    const tool = defineTool({
      name: 'orders',
      description: 'Never reached.',
      input: {},
      handler: () => fail('internal', 'x'),
    });
    const tried = [
      ...Array.from({ length: 1000 }, (_, i) => encodedSecret(i)),
      ...new Array<string>(199_000).fill('x'),
    ];
    tried[150_000] = encodedSecret(150_000);
    tried[150_001] = 'key AKIAIOSFODNN7EXAMPLE';
    const outside: ToolMiddleware = async () => {
      const failure = fail('unavailable', 'The store is down.');
      return { ...failure, _meta: { ...failure._meta, tried } };
    };
    const entries: LogEntry[] = [];
    const c = await serve([tool], [outside, createRedactErrors()], recordingLogger(entries));
    const result = await c.callTool('orders', {});
    const envelope = seenEnvelope(result);
    expect(envelope).toMatchObject({ error: 'unavailable', message: 'The store is down.' });
    expect(envelope.incidentId).toMatch(INCIDENT_ID);
    const shown = result._meta?.tried as string[];
    expect(shown.length).toBeLessThanOrEqual(MAX_FAILURE_VALUES);
    expect(shown.at(-1)).toBe(FAILURE_WITHHELD);
    // What is shown went through redact-errors' hook: each encoded connection string scrubbed.
    expect(new Set(shown.slice(0, 1000))).toEqual(new Set(['[connection]']));
    const seen = JSON.stringify(result);
    expect(seen).not.toMatch(/pw\d+q|%3Apw/);
    expect(seen).not.toContain('AKIAIOSFODNN7EXAMPLE');
    // Core's line, under the id the model sees; redact-errors' own pass never saw this failure.
    const lines = entries.filter((entry) => CORE_BOUND_LINE.test(entry.message ?? ''));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'warn',
      fields: { tool: 'orders', incidentId: envelope.incidentId },
    });
    expect(JSON.stringify(lines[0]?.fields)).not.toContain('AKIAIOSFODNN7EXAMPLE');
    expect(entries.filter((entry) => entry.message === WITHHELD_LINE)).toEqual([]);
  });

  it('a smaller budget per tool applies to that tool; a failure within it is untouched', async () => {
    const make = (name: string) =>
      defineTool({
        name,
        description: 'Fails naming 1,000 fields.',
        input: {},
        handler: () =>
          fail('invalid_argument', 'Unknown fields.', {
            fields: Array.from({ length: 1000 }, (_, i) => ({ path: `f${i}`, expected: 'known' })),
          }),
      });
    const c = await serve(
      [make('strict'), make('roomy')],
      [createRedactErrors({ maxScrubChars: 8192, tools: { roomy: { maxScrubChars: 1_000_000 } } })],
      recordingLogger([]),
    );
    const strict = seenEnvelope(await c.callTool('strict', {})).fields ?? [];
    expect(strict.at(-1)).toEqual({ path: WITHHELD, expected: WITHHELD });
    expect(strict.length).toBeLessThan(1000);
    const roomy = seenEnvelope(await c.callTool('roomy', {}));
    expect(roomy.fields).toEqual(
      Array.from({ length: 1000 }, (_, i) => ({ path: `f${i}`, expected: 'known' })),
    );
    expect(roomy.incidentId).toBeUndefined();
  });

  it.each<[string, unknown]>([
    ['0', 0],
    ['-1', -1],
    ['8191 (below the least)', 8191],
    ['1.5e4 (not an integer)', 15_000.5],
    ['NaN', Number.NaN],
    ['Infinity (no bound)', Number.POSITIVE_INFINITY],
    ['a string', '262144'],
  ])('refuses maxScrubChars %s when created, globally and per tool', (_name, value) => {
    expect(() => createRedactErrors({ maxScrubChars: value as number })).toThrow(
      new RangeError('createRedactErrors: maxScrubChars must be an integer of at least 8192'),
    );
    expect(() => createRedactErrors({ tools: { orders: { maxScrubChars: value as number } } })).toThrow(
      new RangeError('createRedactErrors: tools.orders: maxScrubChars must be an integer of at least 8192'),
    );
  });
});
