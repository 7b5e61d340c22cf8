import { createHash, randomUUID } from 'node:crypto';
import {
  canonicalJson,
  defineTool,
  ok,
  type ToolDefinition,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createMemoryRepeatStore, createRedisRepeatStore, createRepeatGuard } from '../src/index.js';
import { closeAll, serve } from './fixtures.js';

// Red team, round 27: values the guard did not write or could not key. Arguments the model nests past
// the stack, results whose size hides in fields a text-only count skips, a failure whose text core
// withholds, and values in Redis that are huge or nested so deep that answering from them throws. In
// every case the call runs (as it would without the guard), nothing withheld reaches the model, and
// the store stays within its limits.

afterEach(closeAll);

/** Arrays nested `depth` deep around 1: JSON any client can send, deeper than a recursive walk goes. */
function nested(depth: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < depth; i += 1) value = [value];
  return value;
}

function textOf(result: { content?: unknown }): string {
  return ((result.content ?? []) as { type: string; text?: string }[])
    .map((part) => part.text ?? '')
    .join('\n');
}

describe('repeat-guard: calls it cannot key run, never fail', () => {
  it('runs a call whose arguments are nested past the stack or transformed into a Set, as without the guard, with one throttled warning', async () => {
    const runs = { count: 0 };
    const tools = [
      defineTool({
        name: 'save_document',
        description: 'Saves a JSON document.',
        input: { doc: z.unknown() },
        handler: async () => {
          runs.count += 1;
          return ok({ saved: true });
        },
      }) as ToolDefinition,
      defineTool({
        name: 'tag_order',
        description: 'Tags an order.',
        input: { tags: z.array(z.string()).transform((tags) => new Set(tags)) },
        handler: async ({ tags }) => {
          runs.count += 1;
          return ok({ tags: [...tags] });
        },
      }) as ToolDefinition,
    ];
    const logs: LogEntry[] = [];
    for (const store of [undefined, createMemoryRepeatStore()]) {
      logs.length = 0;
      runs.count = 0;
      const client = await serve(tools, [createRepeatGuard(store === undefined ? {} : { store })], {
        logger: recordingLogger(logs),
      });
      const deep = { doc: nested(5000) };
      for (let i = 0; i < 3; i += 1) {
        const saved = await client.callTool('save_document', deep);
        expect(saved.isError, textOf(saved)).not.toBe(true);
        expect(saved.structuredContent).toEqual({ ok: true, saved: true });
        const tagged = await client.callTool('tag_order', { tags: ['a', 'b'] });
        expect(tagged.isError, textOf(tagged)).not.toBe(true);
        expect(tagged.structuredContent).toEqual({ ok: true, tags: ['a', 'b'] });
      }
      // Every call ran: none was answered from another's entry, none failed.
      expect(runs.count).toBe(6);
      const warnings = logs.filter((entry) => entry.level === 'warn');
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.message).toMatch(/could not be keyed.*runs unguarded/);
      expect(logs.filter((entry) => entry.level === 'error')).toEqual([]);
      // A plain call of the same tool is still guarded.
      await client.callTool('save_document', { doc: { a: 1 } });
      const repeat = await client.callTool('save_document', { doc: { a: 1 } });
      expect(repeat.structuredContent).toMatchObject({ note: expect.stringMatching(/^Repeated call/) });
      expect(runs.count).toBe(7);
      await closeAll();
    }
  });
});

describe('repeat-guard: arguments a transform turned into values JSON writes as {}', () => {
  it('never answers one pattern with another pattern’s result: a RegExp argument is not keyed, the call runs', async () => {
    const runs: string[] = [];
    const tools = [
      defineTool({
        name: 'find_lines',
        description: 'Lines matching a pattern.',
        input: { pattern: z.string().transform((source) => new RegExp(source)) },
        handler: async ({ pattern }) => {
          runs.push(pattern.source);
          return ok({ matched: ['alpha', 'beta'].filter((line) => pattern.test(line)) });
        },
      }) as ToolDefinition,
    ];
    const client = await serve(tools, [createRepeatGuard()], { logger: recordingLogger([]) });
    const first = await client.callTool('find_lines', { pattern: '^a' });
    expect(first.structuredContent).toEqual({ ok: true, matched: ['alpha'] });
    // Core's canonicalJson wrote both RegExps as {}: this call was answered with the first one's lines.
    const second = await client.callTool('find_lines', { pattern: '^b' });
    expect(second.isError, textOf(second)).not.toBe(true);
    expect(second.structuredContent).toEqual({ ok: true, matched: ['beta'] });
    expect(runs).toEqual(['^a', '^b']);
  });
});

describe('repeat-guard: a failure core withheld stays withheld on the repeat', () => {
  it('never shows the raw text of a failure without an envelope (a middleware below returned it): the repeat runs and is answered internal again', async () => {
    let runs = 0;
    // A middleware below the guard that answers with a raw isError result: core's boundary turns it
    // into `internal` and keeps its text for the log.
    const raw: ToolMiddleware = async () => {
      runs += 1;
      return {
        isError: true,
        content: [{ type: 'text', text: 'ledger lookup for customer 42 failed: WITHHELD-DETAIL' }],
      };
    };
    const tool = defineTool({
      name: 'ledger',
      description: 'Reads the ledger.',
      input: { account: z.string() },
      handler: async () => ok({}),
    }) as ToolDefinition;
    const client = await serve([tool], [createRepeatGuard(), raw]);
    const first = await client.callTool('ledger', { account: 'a1' });
    const second = await client.callTool('ledger', { account: 'a1' });
    for (const answer of [first, second]) {
      expect(answer.isError).toBe(true);
      expect(textOf(answer)).not.toContain('WITHHELD-DETAIL');
      expect(JSON.stringify(answer._meta)).not.toContain('WITHHELD-DETAIL');
      expect(answer._meta?.['toolgate/error']).toMatchObject({
        error: 'internal',
        message: 'Internal error.',
        incidentId: expect.stringMatching(/^inc_/),
      });
    }
    // Not remembered: the repeat ran and got its own incident id.
    expect(runs).toBe(2);
  });
});

describe('repeat-guard: the memory store counts every field it holds', () => {
  it('counts a content part’s _meta against maxResultSize and maxSize: a big one is not remembered, and what is held is counted whole', async () => {
    let runs = 0;
    const blob = 'y'.repeat(200_000);
    const tool = defineTool({
      name: 'report',
      description: 'A report.',
      input: { id: z.string() },
      handler: async ({ id }) => {
        runs += 1;
        return { content: [{ type: 'text', text: `report ${id}`, _meta: { blob } }] };
      },
    }) as ToolDefinition;
    // A result of 200,000 characters over a limit of 1,000: never remembered, the repeat runs.
    const small = createMemoryRepeatStore({ maxEntries: 100, maxSize: 1_000_000 });
    const client = await serve([tool], [createRepeatGuard({ store: small, maxResultSize: 1000 })]);
    for (let i = 0; i < 20; i += 1) await client.callTool('report', { id: `r${i % 10}` });
    expect(runs).toBe(20);
    expect(small.size).toBe(0);
    expect(small.totalSize).toBe(0);
    // Under a limit it fits: remembered, and counted by all it holds, so maxSize bounds it.
    runs = 0;
    const roomy = createMemoryRepeatStore({ maxEntries: 100, maxSize: 1_000_000 });
    const roomyClient = await serve([tool], [createRepeatGuard({ store: roomy, maxResultSize: 500_000 })]);
    for (let i = 0; i < 20; i += 1) await roomyClient.callTool('report', { id: `r${i}` });
    expect(roomy.totalSize).toBeLessThanOrEqual(1_000_000);
    // Each entry counts at least its 200,000 characters: at most five fit in 1,000,000.
    expect(roomy.size).toBeLessThanOrEqual(5);
    expect(roomy.totalSize).toBeGreaterThanOrEqual(roomy.size * 200_000);
    const repeat = await roomyClient.callTool('report', { id: 'r19' });
    expect(runs).toBe(20);
    expect(repeat.content[0]).toMatchObject({ text: 'report r19', _meta: { blob } });
  });

  it('replays an ok() result whose text part carries annotations with them, as the client first received it', async () => {
    let runs = 0;
    const tool = defineTool({
      name: 'summary',
      description: 'A summary for the user.',
      input: { id: z.string() },
      handler: async ({ id }) => {
        runs += 1;
        return ok({ id });
      },
    }) as ToolDefinition;
    // A middleware below the guard marks the text for the user (the copy keeps ok()'s own marks).
    const annotate: ToolMiddleware = async (_ctx, next) => {
      const result = await next();
      const [first, ...rest] = result.content;
      return { ...result, content: [{ ...first!, annotations: { audience: ['user'] } }, ...rest] };
    };
    const client = await serve([tool], [createRepeatGuard(), annotate]);
    const first = await client.callTool('summary', { id: 's1' });
    const second = await client.callTool('summary', { id: 's1' });
    expect(runs).toBe(1);
    expect(first.content[0]).toMatchObject({ annotations: { audience: ['user'] } });
    expect(second.structuredContent).toMatchObject({ id: 's1', note: expect.stringMatching(/^Repeated/) });
    expect(second.content[0]).toMatchObject({ annotations: { audience: ['user'] } });
  });
});

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `toolgate:repeat-guard-hostile:${randomUUID()}:`;

describe('repeat-guard: hostile values in Redis (real Redis)', () => {
  let redis: Redis | undefined;
  let unreachable: string | undefined;

  beforeAll(async () => {
    const client = new Redis(REDIS_URL, {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 2000,
      socketTimeout: 2000,
      retryStrategy: () => null,
    });
    try {
      await client.connect();
      await client.ping();
      redis = client;
    } catch (error) {
      client.disconnect();
      unreachable = `Redis unreachable at ${REDIS_URL}: ${(error as Error).message}`;
      // In CI a missing Redis is a broken pipeline, never a silent pass.
      if (process.env.CI === 'true') throw new Error(`${unreachable} (CI=true requires it)`);
      process.stderr.write(`repeat-guard: ${unreachable}; the Redis tests are skipped\n`);
    }
  });

  afterAll(async () => {
    await closeAll();
    if (!redis) return;
    const keys = await redis.keys(`${PREFIX}*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  });

  // Outside CI an absent Redis skips these tests with the reason shown in the report.
  function connected(skip: (note: string) => void): Redis {
    if (!redis) skip(unreachable ?? 'Redis unreachable');
    return redis!;
  }

  function lookupTool(runs: { count: number }): ToolDefinition {
    return defineTool({
      name: 'lookup',
      description: 'Looks a record up.',
      input: { id: z.string() },
      handler: async ({ id }) => {
        runs.count += 1;
        return ok({ id, found: true });
      },
    }) as ToolDefinition;
  }

  it('runs the call, never failing it or answering from it, when the value under its key is huge, nested past the stack, or a failure without an envelope', async ({
    skip,
  }) => {
    const client = connected(skip);
    const runs = { count: 0 };
    const prefix = `${PREFIX}forged:`;
    const replica = await serve(
      [lookupTool(runs)],
      [createRepeatGuard({ store: createRedisRepeatStore(client, { prefix }), maxResultSize: 10_000 })],
    );
    await replica.callTool('lookup', { id: 'x1' });
    const [key] = await client.keys(`${prefix}c:*`);
    const now = Date.now();
    const entry = (r: unknown) => JSON.stringify({ v: 1, n: 1, f: now, t: now, r });
    const forged: [string, string][] = [
      // Well formed, and five times the tool's maxResultSize: a replica never writes one that long.
      [
        'huge',
        entry({
          content: [{ type: 'text', text: 'FORGED' }],
          structuredContent: { ok: true, id: 'x1', found: false, pad: 'z'.repeat(50_000) },
        }),
      ],
      // Small, but nested so deep that building the answer (its note) exhausts the stack.
      [
        'deep',
        entry({
          content: [{ type: 'text', text: 'FORGED' }],
          structuredContent: { ok: true, deep: 0 },
        }).replace('"deep":0', `"deep":${'['.repeat(5000)}1${']'.repeat(5000)}`),
      ],
      // A failure whose text a replay would show as the message.
      ['raw failure', entry({ isError: true, content: [{ type: 'text', text: 'FORGED raw detail' }] })],
    ];
    for (const [name, value] of forged) {
      await client.set(key!, value, 'PX', 60_000);
      const answer = await replica.callTool('lookup', { id: 'x1' });
      expect(answer.isError, `${name}: ${textOf(answer)}`).not.toBe(true);
      expect(answer.structuredContent, name).toEqual({ ok: true, id: 'x1', found: true });
      expect(textOf(answer), name).not.toContain('FORGED');
    }
    expect(runs.count).toBe(1 + forged.length);
    // The run replaced the forged value with its own entry: the repeat is answered from it.
    const repeat = await replica.callTool('lookup', { id: 'x1' });
    expect(repeat.structuredContent).toMatchObject({ found: true, note: expect.stringMatching(/^Repeated/) });
    expect(runs.count).toBe(1 + forged.length);
  });

  it('ignores a no-progress streak value longer than any the guard writes', async ({ skip }) => {
    const client = connected(skip);
    const runs = { count: 0 };
    const prefix = `${PREFIX}streak:`;
    const replica = await serve(
      [lookupTool(runs)],
      [createRepeatGuard({ store: createRedisRepeatStore(client, { prefix }), noProgress: 3 })],
    );
    const first = await replica.callTool('lookup', { id: 'p1' });
    expect(first.structuredContent).not.toHaveProperty('note');
    const [key] = await client.keys(`${prefix}p:*`);
    // The next call's result (`p2`) with a streak of 9 behind it, padded far past what the guard writes.
    const next = ok({ id: 'p2', found: true }) as ToolResult;
    const r = createHash('sha256')
      .update(canonicalJson([false, next.content, next.structuredContent]))
      .digest('base64url');
    await client.set(
      key!,
      JSON.stringify({ v: 1, a: 'c:other', r, s: 9, pad: 'q'.repeat(5_000) }),
      'PX',
      60_000,
    );
    const second = await replica.callTool('lookup', { id: 'p2' });
    expect(second.structuredContent).toEqual({ ok: true, id: 'p2', found: true });
    expect(runs.count).toBe(2);
  });
});

describe('repeat-guard: no-progress on a result canonical JSON cannot hash', () => {
  it('answers with the result the handler produced instead of failing the call that already ran', async () => {
    let runs = 0;
    const tool = defineTool({
      name: 'inventory',
      description: 'Inventory of a site.',
      input: { site: z.string() },
      handler: async () => {
        runs += 1;
        // A Map in the data: JSON writes it as {}, canonical JSON refuses it.
        return ok({ counts: new Map([['a', 1]]) as unknown as Record<string, number> });
      },
    }) as ToolDefinition;
    const client = await serve([tool], [createRepeatGuard({ noProgress: 2 })]);
    const answer = await client.callTool('inventory', { site: 's1' });
    expect(answer.isError, textOf(answer)).not.toBe(true);
    expect(answer.structuredContent).toMatchObject({ ok: true });
    expect(answer.structuredContent).toHaveProperty('counts');
    expect(runs).toBe(1);
  });
});
