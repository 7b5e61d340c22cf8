import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import {
  defineTool,
  errorOf,
  isPassThrough,
  ok,
  registerTools,
  type ToolContext,
  type ToolMiddleware,
  type ToolResult,
} from '../src/index.js';
import { type LogEntry, recordingLogger, serveTools, type TestClient } from '../src/testing.js';

// tools/call requests whose params the SDK's own schema refuses, sent raw through a real SDK Client and
// the in-memory transport: each passes the global chain (so audit records it) and is answered with a
// designed JSON-RPC -32602, never the SDK's zod issue dump.

let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

const getOrder = defineTool({
  name: 'get_order',
  description: 'Looks up an order.',
  input: { id: z.string() },
  handler: async ({ id }) => ok({ id }),
});

interface Seen {
  toolName: string;
  known: boolean;
  passThrough: boolean;
  validation: ToolContext['validation'];
  rawArgs: unknown;
  args: unknown;
  meta: unknown;
  outcome: ReturnType<typeof errorOf>;
}

/** A global middleware that records what the chain saw of each call (as audit would). */
function recorder(seen: Seen[]): ToolMiddleware {
  return async (ctx, next) => {
    const result = await next();
    seen.push({
      toolName: ctx.toolName,
      known: ctx.tool !== undefined,
      passThrough: isPassThrough(ctx),
      validation: ctx.validation,
      rawArgs: ctx.rawArgs,
      args: ctx.args,
      meta: ctx.request.meta,
      outcome: errorOf(result),
    });
    return result;
  };
}

/** Sends `params` as a tools/call request as is (no client-side shaping), with a loose result schema. */
function rawCall(c: TestClient, params: unknown): Promise<unknown> {
  const request = params === undefined ? { method: 'tools/call' } : { method: 'tools/call', params };
  return c.client.request(request as never, z.any(), { timeout: 10_000 });
}

async function rpcError(pending: Promise<unknown>): Promise<McpError> {
  const error = await pending.then(
    (result) => {
      throw new Error(`expected a JSON-RPC error, got ${JSON.stringify(result)}`);
    },
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(McpError);
  return error as McpError;
}

const NAME = 'Invalid tools/call request: `name` must be a string.';
const ARGUMENTS = 'Invalid tools/call request: `arguments` must be an object.';
const TASK = 'Invalid tools/call request: `task` must be an object with an optional number `ttl`.';

describe('a malformed tools/call request', () => {
  it.each([
    [
      'arguments an array',
      { name: 'get_order', arguments: ['A-1'] },
      ARGUMENTS,
      'get_order',
      { arguments: ['A-1'] },
    ],
    [
      'arguments a string',
      { name: 'get_order', arguments: 'A-1' },
      ARGUMENTS,
      'get_order',
      { arguments: 'A-1' },
    ],
    ['arguments null', { name: 'get_order', arguments: null }, ARGUMENTS, 'get_order', { arguments: null }],
    ['arguments a number', { name: 'get_order', arguments: 7 }, ARGUMENTS, 'get_order', { arguments: 7 }],
    [
      'arguments a boolean',
      { name: 'get_order', arguments: true },
      ARGUMENTS,
      'get_order',
      { arguments: true },
    ],
    ['name a number', { name: 42, arguments: { id: 'A-1' } }, NAME, '42', { id: 'A-1' }],
    ['name null', { name: null, arguments: { id: 'A-1' } }, NAME, 'null', { id: 'A-1' }],
    ['name an object', { name: { tool: 'get_order' } }, NAME, '{"tool":"get_order"}', {}],
    ['name an array', { name: ['get_order'], arguments: {} }, NAME, '["get_order"]', {}],
    ['name missing', { arguments: { id: 'A-1' } }, NAME, '', { id: 'A-1' }],
    ['no params at all', undefined, NAME, '', {}],
    [
      'task not an object',
      { name: 'get_order', arguments: { id: 'A-1' }, task: 5 },
      TASK,
      'get_order',
      { id: 'A-1' },
    ],
  ])(
    '%s: passes the global chain, then JSON-RPC -32602 with a designed message',
    async (_case, params, message, toolName, rawArgs) => {
      const seen: Seen[] = [];
      client = await serveTools([getOrder], { middleware: [recorder(seen)] });
      const error = await rpcError(rawCall(client, params));
      expect(error.code).toBe(-32602);
      expect(error.message).toBe(`MCP error -32602: ${message}`);
      expect(error.data).toBeUndefined();
      expect(seen).toHaveLength(1);
      const [call] = seen;
      // Run as an unknown tool is (ctx.tool undefined, a pass-through call), the name as sent.
      expect(call).toMatchObject({ toolName, known: false, passThrough: true, rawArgs, args: rawArgs });
      const field = /`([^`]+)`/.exec(message)![1];
      expect(call!.validation).toEqual({
        ok: false,
        issues: [{ path: `(${field})`, expected: expect.any(String) }],
      });
      // One verdict shared by every such call: nothing a middleware does to it reaches the next call.
      expect(Object.isFrozen(call!.validation)).toBe(true);
      expect(call!.validation.ok === false && Object.isFrozen(call!.validation.issues)).toBe(true);
      expect(call!.outcome).toMatchObject({ error: 'invalid_argument', message });
    },
  );

  it('keeps its _meta for the chain when only the arguments are malformed', async () => {
    const seen: Seen[] = [];
    client = await serveTools([getOrder], { middleware: [recorder(seen)] });
    const meta = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' };
    const error = await rpcError(rawCall(client, { name: 'get_order', arguments: 'A-1', _meta: meta }));
    expect(error.message).toBe(`MCP error -32602: ${ARGUMENTS}`);
    expect(seen.map((call) => call.meta)).toEqual([meta]);
  });

  it('answers the same for a hidden tool as for a tool that does not exist', async () => {
    const seen: Seen[] = [];
    const hideAll: ToolMiddleware = Object.assign(
      (_ctx: ToolContext, next: () => Promise<ToolResult>) => next(),
      { canSee: () => false },
    );
    client = await serveTools([getOrder], { middleware: [hideAll, recorder(seen)] });
    const hidden = await rpcError(rawCall(client, { name: 'get_order', arguments: ['A-1'] }));
    const absent = await rpcError(rawCall(client, { name: 'no_such_tool', arguments: ['A-1'] }));
    expect(hidden.message).toBe(`MCP error -32602: ${ARGUMENTS}`);
    expect(absent.message).toBe(hidden.message);
    expect(seen.map((call) => [call.toolName, call.known])).toEqual([
      ['get_order', false],
      ['no_such_tool', false],
    ]);
  });

  it('gets the designed error even when a middleware answers for it, and the connection serves calls after it', async () => {
    const seen: Seen[] = [];
    const answerAll: ToolMiddleware = async (ctx, next) =>
      ctx.tool === undefined ? ok({ answeredBy: 'middleware' }) : next();
    client = await serveTools([getOrder], { middleware: [recorder(seen), answerAll] });
    const error = await rpcError(rawCall(client, { name: 'get_order', arguments: 'A-1' }));
    expect(error.message).toBe(`MCP error -32602: ${ARGUMENTS}`);
    // Well-formed calls on the same connection go the normal way: a result, a refusal, an unknown tool.
    expect(await client.callToolJson('get_order', { id: 'A-1' })).toEqual({ ok: true, id: 'A-1' });
    expect(errorOf((await rawCall(client, { name: 'get_order' })) as ToolResult)).toMatchObject({
      error: 'invalid_argument',
      message: 'Invalid arguments for get_order: id.',
    });
    await expect(rawCall(client, { name: 'drop_tables', arguments: {} })).rejects.toMatchObject({
      code: -32602,
      message: 'MCP error -32602: Unknown tool: drop_tables',
    });
    expect(seen.map((call) => [call.toolName, call.known, call.outcome?.error ?? 'ok'])).toEqual([
      ['get_order', false, 'ok'],
      ['get_order', true, 'ok'],
      ['get_order', true, 'invalid_argument'],
      ['drop_tables', false, 'ok'],
    ]);
  });

  it('whose caller cannot be identified gets the same designed error; no middleware sees it', async () => {
    const seen: Seen[] = [];
    const logs: LogEntry[] = [];
    client = await serveTools([getOrder], {
      middleware: [recorder(seen)],
      logger: recordingLogger(logs),
      identify: () => {
        throw new Error('identity store down');
      },
    });
    const error = await rpcError(rawCall(client, { name: 42, arguments: 'A-1' }));
    expect(error.code).toBe(-32602);
    expect(error.message).toBe(`MCP error -32602: ${NAME}`);
    expect(seen).toEqual([]);
    expect(logs.some((entry) => entry.fields.during === 'identify')).toBe(true);
  });

  it('does not echo a 200 KB value in its error, while the chain sees it whole', async () => {
    const seen: Seen[] = [];
    client = await serveTools([getOrder], { middleware: [recorder(seen)] });
    const big = `sk_live_${'A1b2'.repeat(50_000)}`;
    const nested = { a: [big, { b: big }] };
    const byArguments = await rpcError(rawCall(client, { name: 'get_order', arguments: big }));
    const byName = await rpcError(rawCall(client, { name: nested, arguments: { id: big } }));
    expect(byArguments.message).toBe(`MCP error -32602: ${ARGUMENTS}`);
    expect(byName.message).toBe(`MCP error -32602: ${NAME}`);
    expect(seen).toHaveLength(2);
    expect(seen[0]!.rawArgs).toEqual({ arguments: big });
    expect(seen[1]!.toolName).toBe(JSON.stringify(nested));
    expect(seen[1]!.rawArgs).toEqual({ id: big });
  });

  it('with a _meta that is not an object is refused by core’s entry too (the SDK drops such a message first)', async () => {
    // No transport delivers it: the SDK's JSON-RPC message schema refuses a non-object `_meta` before any
    // request handler (stdio drops the line, Streamable HTTP answers 400). Core's entry checks it anyway,
    // called here as the SDK's Protocol calls it.
    const seen: Seen[] = [];
    const server = new McpServer({ name: 'test', version: '1.0.0' });
    registerTools(server, [getOrder], { middleware: [recorder(seen)], logger: recordingLogger([]) });
    const entry = (
      server.server as unknown as {
        _requestHandlers: Map<string, (r: unknown, e: unknown) => Promise<unknown>>;
      }
    )._requestHandlers.get('tools/call')!;
    const extra = {
      signal: new AbortController().signal,
      requestId: 1,
      sendNotification: async () => {},
      sendRequest: async () => ({}),
    };
    for (const meta of ['x', null, ['progressToken']]) {
      let answer: unknown;
      try {
        answer = await entry(
          { method: 'tools/call', params: { name: 'get_order', arguments: {}, _meta: meta } },
          extra,
        );
      } catch (error) {
        answer = error;
      }
      expect(answer).toMatchObject({
        code: -32602,
        message: 'Invalid tools/call request: `_meta` must be an object.',
      });
    }
    expect(seen.map((call) => [call.toolName, call.meta, call.outcome?.error])).toEqual([
      ['get_order', undefined, 'invalid_argument'],
      ['get_order', undefined, 'invalid_argument'],
      ['get_order', undefined, 'invalid_argument'],
    ]);
  });
});
