// A failure's variable parts (`fields`, the `_meta` other than the envelope) are bounded at the
// model-facing boundary before core's secret patterns, `mapStrings` or any scrub hook walk them: a tool
// that echoes what the model sent into its failure (a million strings, fifty thousand fields) must not
// hold the event loop for seconds, and nothing past the bound reaches the client unwalked. What was
// withheld goes to the log under the incident id the model sees.
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import {
  defineTool,
  ERROR_META_KEY,
  FAILURE_WITHHELD,
  fail,
  MAX_FAILURE_CHARS,
  MAX_FAILURE_VALUES,
  type ToolMiddleware,
  type ToolResult,
} from '../src/index.js';
import {
  expectFailure,
  type LogEntry,
  recordingLogger,
  serveTools,
  type TestClient,
} from '../src/testing.js';

let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

// Examples of core's own SECRET_PATTERNS (an AWS access key id, a JWT).
const AWS_KEY = 'AKIAIOSFODNN7EXAMPLE';
const JWT =
  'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c';

/** A tool whose failure carries whatever `build()` makes, as a tool echoing the model's input would. */
function failingWith(build: () => ToolResult): ReturnType<typeof defineTool> {
  return defineTool({
    name: 'lookup',
    description: 'Looks something up.',
    input: { q: z.string().optional() },
    handler: async () => build(),
  });
}

/** `fail('not_found', …)` with `extra` in its `_meta` beside the envelope. */
function notFoundWith(extra: Record<string, unknown>): ToolResult {
  const result = fail('not_found', 'Nothing matches.', { hint: 'Try other criteria.' });
  result._meta = { ...result._meta, ...extra };
  return result;
}

/** A global middleware whose scrub hook counts the strings it is given. */
function countingHook(seen: { strings: number }): ToolMiddleware {
  const middleware: ToolMiddleware = (_ctx, next) => next();
  middleware.scrubText = (text) => {
    seen.strings += 1;
    return text;
  };
  return middleware;
}

/** Every string anywhere in `value`, keys included. */
function stringsIn(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const item of value) stringsIn(item, out);
  else if (typeof value === 'object' && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      out.push(key);
      stringsIn(item, out);
    }
  }
  return out;
}

/** The one `warn` line of a failure past the bound. */
function withheldLines(entries: LogEntry[]): LogEntry[] {
  return entries.filter(
    (entry) => entry.level === 'warn' && /past the model-facing bound/.test(entry.message ?? ''),
  );
}

describe('a failure is bounded at the model-facing boundary', () => {
  it('a _meta of 1,000,000 one-character strings comes back bounded, marked, under an incident id, logged once', async () => {
    const entries: LogEntry[] = [];
    const seen = { strings: 0 };
    const items = new Array<string>(1_000_000).fill('x');
    client = await serveTools([failingWith(() => notFoundWith({ items }))], {
      middleware: [countingHook(seen)],
      logger: recordingLogger(entries),
    });
    const result = await client.callTool('lookup', {});
    const failure = expectFailure(result);
    expect(failure.error).toBe('not_found');
    expect(failure.message).toBe('Nothing matches.');
    expect(failure.incidentId).toMatch(/^inc_/);
    const shown = (result._meta as { items: string[] }).items;
    // The `_meta` object and the array are two values of the bound; the strings fill the rest.
    expect(shown).toHaveLength(MAX_FAILURE_VALUES - 2 + 1);
    expect(shown.slice(0, -1).every((item) => item === 'x')).toBe(true);
    expect(shown.at(-1)).toBe(FAILURE_WITHHELD);
    expect((result._meta as Record<string, { incidentId?: string }>)[ERROR_META_KEY]?.incidentId).toBe(
      failure.incidentId,
    );
    // The hooks saw the bounded failure only (two boundary passes: after the handler, at the exit).
    expect(seen.strings).toBeLessThanOrEqual(2 * (MAX_FAILURE_VALUES + 16));
    const lines = withheldLines(entries);
    expect(lines).toHaveLength(1);
    expect(lines[0]!.fields).toMatchObject({
      incidentId: failure.incidentId,
      tool: 'lookup',
      error: 'not_found',
    });
    expect(lines[0]!.fields.withheld).toBeGreaterThan(0);
    expect(lines[0]!.fields.originalCut).toBe(true);
    const logged = (lines[0]!.fields.original as { meta: { items: string[] } }).meta.items;
    expect(logged.length).toBeLessThanOrEqual(4 * MAX_FAILURE_VALUES);
    expect(logged.at(-1)).toBe(FAILURE_WITHHELD);
  });

  it('a fields list of 50,000 entries is cut, ending in one withheld field', async () => {
    const entries: LogEntry[] = [];
    const fields = Array.from({ length: 50_000 }, (_, i) => ({ path: `items.${i}.sku`, expected: 'a SKU' }));
    client = await serveTools([failingWith(() => fail('invalid_argument', 'Bad items.', { fields }))], {
      logger: recordingLogger(entries),
    });
    const failure = expectFailure(await client.callTool('lookup', {}));
    expect(failure.error).toBe('invalid_argument');
    expect(failure.incidentId).toMatch(/^inc_/);
    const shown = failure.fields!;
    // Each field is three values (the item and its two strings).
    expect(shown.length).toBeLessThanOrEqual(Math.floor(MAX_FAILURE_VALUES / 3) + 1);
    expect(shown.length).toBeGreaterThan(1000);
    expect(shown.slice(0, 3)).toEqual(fields.slice(0, 3));
    expect(shown.at(-1)).toEqual({ path: FAILURE_WITHHELD, expected: FAILURE_WITHHELD });
    const lines = withheldLines(entries);
    expect(lines).toHaveLength(1);
    expect(lines[0]!.fields).toMatchObject({ incidentId: failure.incidentId, fieldsTotal: 50_000 });
  });

  it('a deep object wide at every level is bounded; past depth 32 it is [Truncated] as before', async () => {
    // 40 levels of 300 strings each: 12,000 strings.
    const deep: Record<string, unknown> = {};
    let level = deep;
    for (let depth = 0; depth < 40; depth += 1) {
      level.words = Array.from({ length: 300 }, (_, i) => `w${depth}.${i}`);
      level.next = {};
      level = level.next as Record<string, unknown>;
    }
    client = await serveTools([failingWith(() => notFoundWith({ deep }))], { logger: recordingLogger([]) });
    const result = await client.callTool('lookup', {});
    const failure = expectFailure(result);
    expect(failure.incidentId).toMatch(/^inc_/);
    const strings = stringsIn((result._meta as Record<string, unknown>).deep);
    expect(strings.filter((s) => /^w\d+\.\d+$/.test(s)).length).toBeLessThan(MAX_FAILURE_VALUES);
    expect(strings).toContain(FAILURE_WITHHELD);
    // The bound keeps a prefix in walk order: the first levels whole, none of the last.
    expect(strings).toContain('w0.299');
    expect(strings).not.toContain('w39.0');

    // Narrow but deep: within the bound, cut at depth 32 as before.
    let narrow: unknown = 'bottom';
    for (let depth = 0; depth < 100; depth += 1) narrow = { down: narrow };
    await client.close();
    client = await serveTools([failingWith(() => notFoundWith({ narrow }))], { logger: recordingLogger([]) });
    const narrowResult = await client.callTool('lookup', {});
    expect(expectFailure(narrowResult).incidentId).toBeUndefined();
    expect(JSON.stringify(narrowResult._meta)).toContain('"[Truncated]"');
    expect(JSON.stringify(narrowResult._meta)).not.toContain(FAILURE_WITHHELD);
  });

  it('object keys count too: past the bound an object ends in one withheld key', async () => {
    const lookup: Record<string, number> = {};
    for (let i = 0; i < 100_000; i += 1) lookup[`customer-reference-${String(i).padStart(20, '0')}`] = i;
    client = await serveTools([failingWith(() => notFoundWith({ lookup }))], { logger: recordingLogger([]) });
    const result = await client.callTool('lookup', {});
    expect(expectFailure(result).incidentId).toMatch(/^inc_/);
    const shown = (result._meta as { lookup: Record<string, unknown> }).lookup;
    const keys = Object.keys(shown);
    // 39-character keys: the characters run out first.
    expect(keys.length).toBeLessThanOrEqual(Math.ceil(MAX_FAILURE_CHARS / 39) + 1);
    expect(keys.length).toBeGreaterThan(1000);
    expect(keys.at(-1)).toBe(FAILURE_WITHHELD);
    expect(shown[FAILURE_WITHHELD]).toBe(FAILURE_WITHHELD);
    expect(shown['customer-reference-00000000000000000000']).toBe(0);
  });

  it('a secret past the bound never reaches the client; the log has it redacted under the incident id', async () => {
    const entries: LogEntry[] = [];
    const items: string[] = [...new Array<string>(5000).fill('row'), `key ${AWS_KEY}`, `token ${JWT}`];
    client = await serveTools([failingWith(() => notFoundWith({ items }))], {
      logger: recordingLogger(entries),
    });
    const result = await client.callTool('lookup', {});
    const failure = expectFailure(result);
    const text = JSON.stringify(result);
    expect(text).not.toContain(AWS_KEY);
    expect(text).not.toContain(JWT.split('.')[1]);
    const shown = (result._meta as { items: string[] }).items;
    expect(shown.at(-1)).toBe(FAILURE_WITHHELD);
    expect(shown).not.toContain('[REDACTED]');
    const [line] = withheldLines(entries);
    expect(line!.fields.incidentId).toBe(failure.incidentId);
    const logged = JSON.stringify(line!.fields);
    expect(logged).not.toContain(AWS_KEY);
    expect(logged).not.toContain(JWT.split('.')[1]);
    // Within the log's own bound (four budgets): the two secrets are there, redacted.
    expect((line!.fields.original as { meta: { items: string[] } }).meta.items.slice(5000)).toEqual([
      'key [REDACTED]',
      'token [REDACTED]',
    ]);
  });

  it('a confirmation request keeps its message, hint and confirmation entry whole; other _meta is bounded', async () => {
    // Longer than any failure string may be (4096): a confirmation is never cut.
    const prompt = `Refund order A-1: ${'line of the order, '.repeat(1000)}`;
    const build = (): ToolResult => {
      const result = fail('confirmation_required', `Confirmation required. Show the user: ${prompt}`, {
        hint: 'Show the user exactly this request and ask whether to proceed.',
      });
      result._meta = {
        ...result._meta,
        'toolgate/confirm': {
          status: 'confirmation_required',
          confirmation: 'tok_1',
          expiresAt: '2030-01-01T00:00:00.000Z',
          prompt,
        },
        items: new Array<string>(1_000_000).fill('x'),
      };
      return result;
    };
    client = await serveTools([failingWith(build)], { logger: recordingLogger([]) });
    const result = await client.callTool('lookup', {});
    const failure = expectFailure(result);
    expect(failure.message).toBe(`Confirmation required. Show the user: ${prompt}`);
    expect((result._meta as Record<string, { prompt?: string }>)['toolgate/confirm']).toEqual({
      status: 'confirmation_required',
      confirmation: 'tok_1',
      expiresAt: '2030-01-01T00:00:00.000Z',
      prompt,
    });
    const shown = (result._meta as { items: string[] }).items;
    // The confirmation entry is charged first: its 19 KB leave the rest of the bound to the others.
    expect(shown.length).toBeLessThan(MAX_FAILURE_VALUES);
    expect(shown.length).toBeGreaterThan(1000);
    expect(shown.at(-1)).toBe(FAILURE_WITHHELD);
    expect(failure.incidentId).toMatch(/^inc_/);
  });

  it('a normal small failure is unchanged, byte for byte, with no incident id and no log line', async () => {
    const entries: LogEntry[] = [];
    const build = (): ToolResult => {
      const result = fail('invalid_argument', 'Bad quantity.', {
        hint: 'Send a quantity from 1 to 99.',
        fields: [{ path: 'quantity', expected: 'an integer from 1 to 99' }],
      });
      result._meta = { ...result._meta, trace: { id: 'abc', tags: ['a', 'b'], n: 3, none: null } };
      return result;
    };
    client = await serveTools([failingWith(build)], { logger: recordingLogger(entries) });
    const result = await client.callTool('lookup', {});
    const envelope = {
      ok: false,
      error: 'invalid_argument',
      message: 'Bad quantity.',
      hint: 'Send a quantity from 1 to 99.',
      retryable: false,
      fields: [{ path: 'quantity', expected: 'an integer from 1 to 99' }],
    };
    expect(JSON.stringify(result)).toBe(
      JSON.stringify({
        _meta: { trace: { id: 'abc', tags: ['a', 'b'], n: 3, none: null }, [ERROR_META_KEY]: envelope },
        content: [{ type: 'text', text: JSON.stringify(envelope) }],
        isError: true,
      }),
    );
    expect(withheldLines(entries)).toEqual([]);
  });
});
