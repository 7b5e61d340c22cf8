import type { CallToolResult, ContentBlock } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import {
  defineTool,
  ERROR_CODE_DEFAULTS,
  ERROR_META_KEY,
  errorOf,
  fail,
  isWellFormedResult,
  ok,
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

/** Asserts the exact wire answer `internal` is, and returns its incident id. */
function expectInternal(result: CallToolResult): string {
  const incidentId = expectFailure(result).incidentId;
  expect(incidentId).toMatch(/^inc_[A-Za-z0-9_-]+$/);
  const envelope = {
    ok: false,
    error: 'internal',
    message: 'Internal error.',
    hint: ERROR_CODE_DEFAULTS.internal.hint,
    retryable: false,
    incidentId,
  };
  expect(result).toEqual({
    isError: true,
    content: [{ type: 'text', text: JSON.stringify(envelope) }],
    _meta: { [ERROR_META_KEY]: envelope },
  });
  return incidentId!;
}

// Each case: what a handler or a middleware answers, and what the log says was wrong with it.
const MALFORMED: { name: string; result: unknown; logged: Record<string, unknown> }[] = [
  {
    name: 'a content part of an unknown type',
    result: { content: [{ type: 'video', url: 'https://cdn.orders.internal/v.mp4' }] },
    logged: { problem: 'content[0] is not a content block of a known type', type: 'video' },
  },
  {
    name: 'a text part whose text is not a string',
    result: { content: [{ type: 'text', text: { host: 'db.orders.internal' } }] },
    logged: { problem: 'content[0].text is not a string' },
  },
  {
    name: 'a null content part after a good one',
    result: { content: [{ type: 'text', text: 'ok' }, null] },
    logged: { problem: 'content[1] is not a content block of a known type', type: 'undefined' },
  },
  {
    name: 'structuredContent that is an array',
    result: { content: [{ type: 'text', text: '[1]' }], structuredContent: ['db.orders.internal'] },
    logged: { problem: 'structuredContent is not an object' },
  },
  {
    name: 'isError that is not a boolean',
    result: { content: [{ type: 'text', text: 'no' }], isError: 'db.orders.internal refused' },
    logged: { problem: 'isError is not a boolean' },
  },
  {
    name: '_meta that is not an object',
    result: { content: [], _meta: 'db.orders.internal' },
    logged: { problem: '_meta is not an object' },
  },
  {
    name: 'an image whose data is not base64 (decided by the SDK’s own schema)',
    result: { content: [{ type: 'image', data: '/srv/orders/chart.png', mimeType: 'image/png' }] },
    logged: { problem: 'not a valid MCP tool result', issues: expect.any(Array) },
  },
  {
    name: 'a _meta progress token that is not a string or number',
    result: { content: [], _meta: { progressToken: { host: 'db.orders.internal' } } },
    logged: { problem: 'not a valid MCP tool result', issues: expect.any(Array) },
  },
];

// What the SDK would have put in its JSON-RPC error, or what the result carried.
const RAW = /Invalid|\bexpected|video|orders\.internal|srv\/orders|progressToken/;

describe('a malformed result is internal under an incident id, never the SDK’s -32602', () => {
  for (const { name, result, logged } of MALFORMED) {
    it(`from a handler: ${name}`, async () => {
      const entries: LogEntry[] = [];
      const tool = defineTool({
        name: 'report',
        description: 'Report.',
        input: {},
        handler: () => result as ToolResult,
      });
      client = await serveTools([tool], { logger: recordingLogger(entries) });
      const answer = await client.callTool('report', {});
      const incidentId = expectInternal(answer);
      expect(JSON.stringify(answer)).not.toMatch(RAW);
      expect(entries).toEqual([
        {
          level: 'error',
          message: 'tool call answered with a malformed result',
          fields: { incidentId, tool: 'report', requestId: expect.anything(), ...logged },
        },
      ]);
    });

    it(`from a middleware: ${name}`, async () => {
      const entries: LogEntry[] = [];
      const rewrite: ToolMiddleware = async (_ctx, next) => {
        await next();
        return result as ToolResult;
      };
      const tool = defineTool({ name: 'report', description: 'Report.', input: {}, handler: () => ok() });
      client = await serveTools([tool], { middleware: [rewrite], logger: recordingLogger(entries) });
      const answer = await client.callTool('report', {});
      const incidentId = expectInternal(answer);
      expect(JSON.stringify(answer)).not.toMatch(RAW);
      expect(entries).toEqual([
        {
          level: 'error',
          message: 'tool call answered with a malformed result',
          fields: { incidentId, tool: 'report', requestId: expect.anything(), ...logged },
        },
      ]);
    });
  }

  it('a middleware answering something that is not a result at all', async () => {
    const entries: LogEntry[] = [];
    const broken: ToolMiddleware = async () => 'db.orders.internal' as unknown as ToolResult;
    const tool = defineTool({ name: 'report', description: 'Report.', input: {}, handler: () => ok() });
    client = await serveTools([tool], { middleware: [broken], logger: recordingLogger(entries) });
    const answer = await client.callTool('report', {});
    const incidentId = expectInternal(answer);
    expect(JSON.stringify(answer)).not.toMatch(RAW);
    expect(entries).toEqual([
      {
        level: 'error',
        message: 'tool call answered with the chain returned something that is not a tool result',
        fields: { incidentId, tool: 'report', requestId: expect.anything(), returned: 'string' },
      },
    ]);
  });

  it('a failure whose other _meta the SDK would refuse', async () => {
    const entries: LogEntry[] = [];
    const tool = defineTool({
      name: 'report',
      description: 'Report.',
      input: {},
      handler: () => {
        const refused = fail('not_found', 'No report.');
        // The SDK types it { taskId: string }.
        refused._meta = { ...refused._meta, 'io.modelcontextprotocol/related-task': { taskId: 42 } as never };
        return refused;
      },
    });
    client = await serveTools([tool], { logger: recordingLogger(entries) });
    const answer = await client.callTool('report', {});
    const incidentId = expectInternal(answer);
    expect(entries).toEqual([
      {
        level: 'error',
        message: 'tool call answered with a malformed failure',
        fields: {
          incidentId,
          tool: 'report',
          requestId: expect.anything(),
          problem: 'not a valid MCP tool result',
          issues: expect.any(Array),
        },
      },
    ]);
  });

  it('is what every middleware outside the handler sees, so audit records what the model saw', async () => {
    const seen: { error: string | undefined; incidentId: string | undefined }[] = [];
    const recorder: ToolMiddleware = async (ctx, next) => {
      const result = await next();
      seen.push({ error: errorOf(result)?.error, incidentId: ctx.incidentId });
      return result;
    };
    const tool = defineTool({
      name: 'report',
      description: 'Report.',
      input: {},
      handler: () => ({ content: [{ type: 'video' }] }) as unknown as ToolResult,
    });
    client = await serveTools([tool], { middleware: [recorder], logger: recordingLogger([]) });
    const incidentId = expectInternal(await client.callTool('report', {}));
    expect(seen).toEqual([{ error: 'internal', incidentId }]);
  });
});

describe('a success a middleware answers for a tool with an output schema', () => {
  const price = defineTool({
    name: 'price',
    description: 'Price of a product.',
    input: {},
    output: { cents: z.number().int() },
    handler: () => ok({ cents: 1299 }),
  });

  it('is internal when its data does not match the schema (a cached answer of an older version)', async () => {
    const entries: LogEntry[] = [];
    const stale: ToolMiddleware = async () => ok({ cents: '12.99 EUR from pricing.orders.internal' });
    client = await serveTools([price], { middleware: [stale], logger: recordingLogger(entries) });
    // Listed first: the SDK client then validates structuredContent itself, and would throw its own error.
    await client.client.listTools();
    const answer = await client.callTool('price', {});
    const incidentId = expectInternal(answer);
    expect(JSON.stringify(answer)).not.toMatch(/pricing|EUR|\bexpected/);
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ level: 'error', message: 'tool call failed', fields: { incidentId } });
    const err = entries[0]!.fields.err as Error;
    expect(err.message).toBe('Tool price was answered with data that does not match its output schema');
    expect((err.cause as z.ZodError).issues.map((issue) => issue.path)).toEqual([['cents']]);
  });

  it('passes when it matches, and the handler’s own checked data is not checked again', async () => {
    const repeat: ToolMiddleware = async (_ctx, next) => {
      const result = await next();
      // A copy that keeps the data object: what most middleware that add _meta do.
      return { ...result, _meta: { 'example/replayed': false } };
    };
    client = await serveTools([price], { middleware: [repeat], logger: recordingLogger([]) });
    await client.client.listTools();
    expect(await client.callTool('price', {})).toEqual({
      content: [{ type: 'text', text: '{"ok":true,"cents":1299}' }],
      structuredContent: { ok: true, cents: 1299 },
      _meta: { 'example/replayed': false },
    });
  });
});

describe('well-formed rich results pass unchanged', () => {
  it('image, audio, resource link and embedded resource blocks, annotations and _meta', async () => {
    const png = Buffer.from('\x89PNG fake').toString('base64');
    const blocks: ContentBlock[] = [
      { type: 'image', data: png, mimeType: 'image/png', annotations: { audience: ['user'], priority: 0.5 } },
      { type: 'audio', data: png, mimeType: 'audio/wav' },
      { type: 'resource_link', uri: 'file:///reports/q3.pdf', name: 'q3.pdf' },
      { type: 'resource', resource: { uri: 'file:///reports/q3.txt', text: 'Q3' }, _meta: { page: 1 } },
    ];
    const tool = defineTool({
      name: 'report',
      description: 'Report.',
      input: {},
      handler: () => {
        const result = ok({ pages: 1 }, { content: blocks });
        result._meta = { progressToken: 7, 'example/source': 'cache' };
        return result;
      },
    });
    client = await serveTools([tool], { logger: recordingLogger([]) });
    expect(await client.callTool('report', {})).toEqual({
      content: [{ type: 'text', text: '{"ok":true,"pages":1}' }, ...blocks],
      structuredContent: { ok: true, pages: 1 },
      _meta: { progressToken: 7, 'example/source': 'cache' },
    });
  });
});

describe('isWellFormedResult: the same rule, for a result read back from a store', () => {
  it('passes what the SDK sends as it is and refuses what it would refuse', () => {
    expect(isWellFormedResult(ok({ id: 'A-1' }))).toBe(true);
    expect(isWellFormedResult(fail('not_found', 'No order A-1.'))).toBe(true);
    expect(
      isWellFormedResult({ content: [{ type: 'image', data: 'aGVsbG8=', mimeType: 'image/png' }] }),
    ).toBe(true);
    for (const damaged of [
      undefined,
      'text',
      { content: [null] },
      { content: [{ type: 'text', text: 7 }] },
      { content: [{ type: 'video', text: 'x' }] },
      { content: [], structuredContent: [1] },
      { content: [], _meta: 'x' },
      { content: [], isError: 'yes' },
    ]) {
      expect(isWellFormedResult(damaged), JSON.stringify(damaged)).toBe(false);
    }
  });
});
