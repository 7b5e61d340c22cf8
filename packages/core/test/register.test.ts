import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import * as z from 'zod';
import {
  defineTool,
  fail,
  type Logger,
  ok,
  registerTools,
  synchronousRefinements,
  type ToolContext,
  ToolError,
  type ToolMiddleware,
} from '../src/index.js';
import {
  connectTestClient,
  expectFailure,
  type LogEntry,
  parseResultText,
  recordingLogger,
  type TestClient,
} from '../src/testing.js';

const searchOrders = defineTool({
  name: 'search_orders',
  description: 'Search orders by status. Use for lists; not for one order by id.',
  input: {
    status: z.enum(['open', 'shipped', 'cancelled']).describe('Order status'),
    days: z.number().int().min(1).max(90).default(30),
  },
  output: { items: z.array(z.object({ id: z.string() })) },
  handler: async ({ status, days }) => {
    if (status === 'cancelled') return ok({ items: [] }, { total: 0, note: 'No orders match.' });
    return ok({ items: [{ id: `${status}-${days}` }] }, { total: 1 });
  },
});

const failing = defineTool({
  name: 'get_order_status',
  description: 'One order by id.',
  input: { id: z.string() },
  handler: async ({ id }) => {
    if (id === 'missing') return fail('not_found', `No order ${id}.`, { hint: 'Check the id.' });
    if (id === 'thrown') throw new ToolError('permission_denied', 'Not yours.');
    if (id === '-rf') {
      throw new ToolError('invalid_argument', 'The id cannot start with a dash.', {
        fields: [{ path: 'id', expected: 'an id that does not start with "-"' }],
      });
    }
    if (id === 'crash') throw new Error('connect ECONNREFUSED 10.0.0.5:5432 at /srv/app/db.js:10');
    if (id === 'not-a-result') return { id } as never;
    return ok({ id });
  },
});

let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

async function serve(
  tools: Parameters<typeof registerTools>[1],
  middleware: ToolMiddleware[] = [],
  extra: {
    logger?: Logger;
    sessionId?: string;
    authInfo?: Parameters<typeof connectTestClient>[1] extends infer O
      ? O extends { authInfo?: infer A }
        ? A
        : never
      : never;
  } = {},
): Promise<TestClient> {
  const server = new McpServer({ name: 'test', version: '1.0.0' });
  registerTools(server, tools, { middleware, logger: extra.logger ?? recordingLogger([]) });
  client = await connectTestClient(server, {
    ...(extra.sessionId !== undefined && { sessionId: extra.sessionId }),
    ...(extra.authInfo !== undefined && { authInfo: extra.authInfo }),
  });
  return client;
}

describe('registerTools: tools/list', () => {
  it('publishes a strict input schema and the output schema extended with ok, total and note', async () => {
    const c = await serve([searchOrders, failing]);
    const { tools } = await c.client.listTools();
    const search = tools.find((tool) => tool.name === 'search_orders')!;
    expect(search.description).toBe('Search orders by status. Use for lists; not for one order by id.');
    expect(search.inputSchema).toMatchObject({
      type: 'object',
      additionalProperties: false,
      required: ['status'],
      properties: { status: { type: 'string', enum: ['open', 'shipped', 'cancelled'] } },
    });
    expect(search.outputSchema).toMatchObject({
      type: 'object',
      properties: {
        ok: { const: true },
        total: { type: 'integer' },
        note: { type: 'string' },
        items: { type: 'array' },
      },
    });
    expect(search.outputSchema?.required).toEqual(expect.arrayContaining(['ok', 'items']));
    expect(tools.find((tool) => tool.name === 'get_order_status')!.outputSchema).toBeUndefined();
  });
});

describe('registerTools: the result contract through a real client', () => {
  it('a success puts { ok: true, ...data } in structuredContent and mirrors it as JSON text', async () => {
    const c = await serve([searchOrders]);
    const result = await c.callTool('search_orders', { status: 'open', days: 7 });
    expect(result).toEqual({
      content: [{ type: 'text', text: '{"ok":true,"items":[{"id":"open-7"}],"total":1}' }],
      structuredContent: { ok: true, items: [{ id: 'open-7' }], total: 1 },
    });
  });

  it('applies schema defaults before the handler runs', async () => {
    const c = await serve([searchOrders]);
    const result = await c.callTool('search_orders', { status: 'shipped' });
    expect(result.structuredContent).toEqual({ ok: true, items: [{ id: 'shipped-30' }], total: 1 });
  });

  it('an empty search is a success with an empty list and a note, not an error', async () => {
    const c = await serve([searchOrders]);
    const result = await c.callTool('search_orders', { status: 'cancelled' });
    expect(result.isError).toBeUndefined();
    expect(result.structuredContent).toEqual({ ok: true, items: [], total: 0, note: 'No orders match.' });
  });

  it('a success without a declared output schema still carries structuredContent', async () => {
    const c = await serve([failing]);
    const result = await c.callTool('get_order_status', { id: '42' });
    expect(result).toEqual({
      content: [{ type: 'text', text: '{"ok":true,"id":"42"}' }],
      structuredContent: { ok: true, id: '42' },
    });
  });

  it('fail() is isError with the envelope as JSON text and in _meta, and no structuredContent', async () => {
    const c = await serve([failing]);
    const result = await c.callTool('get_order_status', { id: 'missing' });
    const envelope = {
      ok: false,
      error: 'not_found',
      message: 'No order missing.',
      hint: 'Check the id.',
      retryable: false,
    };
    expect(result).toEqual({
      isError: true,
      content: [{ type: 'text', text: JSON.stringify(envelope) }],
      _meta: { 'toolgate/error': envelope },
    });
  });

  it('a failure of a tool with an output schema passes the client without structuredContent', async () => {
    const tool = defineTool({
      name: 'with_output',
      description: 'Fails on purpose.',
      input: {},
      output: { value: z.number() },
      handler: () => fail('unavailable', 'Down.', { retryAfterMs: 5000 }),
    });
    const c = await serve([tool]);
    const result = await c.callTool('with_output');
    expect(result.structuredContent).toBeUndefined();
    expect(parseResultText(result)).toEqual({
      ok: false,
      error: 'unavailable',
      message: 'Down.',
      hint: 'A service this tool depends on is unavailable. Do not retry now; tell the user and try once later.',
      retryable: true,
      retryAfterMs: 5000,
    });
  });

  it('a thrown ToolError becomes its fail() result with the default hint of its code', async () => {
    const c = await serve([failing]);
    const result = await c.callTool('get_order_status', { id: 'thrown' });
    expect(parseResultText(result)).toEqual({
      ok: false,
      error: 'permission_denied',
      message: 'Not yours.',
      hint: 'This call is not allowed for this user. Do not retry; tell the user it cannot be done here.',
      retryable: false,
    });
  });

  it('a ToolError with a cause shows an incident id; the log keeps the cause under it', async () => {
    const entries: LogEntry[] = [];
    const tool = defineTool({
      name: 'caused',
      description: 'Fails with a cause.',
      input: {},
      handler: () => {
        throw new ToolError('unavailable', 'Orders are unavailable.', {
          cause: new Error('connect ECONNREFUSED'),
        });
      },
    });
    const c = await serve([tool], [], { logger: recordingLogger(entries) });
    const envelope = expectFailure(await c.callTool('caused'));
    expect(envelope).toMatchObject({ error: 'unavailable', incidentId: expect.stringMatching(/^inc_/) });
    expect(entries).toHaveLength(1);
    expect(entries[0]!.fields.incidentId).toBe(envelope.incidentId);
    expect(((entries[0]!.fields.err as Error).cause as Error).message).toBe('connect ECONNREFUSED');
  });

  it('a thrown ToolError carries its fields', async () => {
    const c = await serve([failing]);
    expect(expectFailure(await c.callTool('get_order_status', { id: '-rf' })).fields).toEqual([
      { path: 'id', expected: 'an id that does not start with "-"' },
    ]);
  });

  it('anything else thrown becomes internal with an incident id; the log gets the full error', async () => {
    const entries: LogEntry[] = [];
    const c = await serve([failing], [], { logger: recordingLogger(entries) });
    const result = await c.callTool('get_order_status', { id: 'crash' });
    const envelope = expectFailure(result);
    expect(envelope).toEqual({
      ok: false,
      error: 'internal',
      message: 'Internal error.',
      hint: 'An unexpected error occurred. Do not retry; tell the user and quote the incident id.',
      retryable: false,
      incidentId: expect.stringMatching(/^inc_[A-Za-z0-9_-]{12}$/),
    });
    expect(JSON.stringify(result)).not.toContain('ECONNREFUSED');
    expect(entries).toHaveLength(1);
    expect(entries[0]!.fields.incidentId).toBe(envelope.incidentId);
    expect((entries[0]!.fields.err as Error).message).toContain('ECONNREFUSED 10.0.0.5');
  });

  it('a handler that returns something other than a result is an internal error', async () => {
    const entries: LogEntry[] = [];
    const c = await serve([failing], [], { logger: recordingLogger(entries) });
    expect(expectFailure(await c.callTool('get_order_status', { id: 'not-a-result' })).error).toBe(
      'internal',
    );
    expect((entries[0]!.fields.err as Error).message).toContain('must return ok() or fail()');
  });

  it('data that does not match the declared output schema is an internal error, not a client crash', async () => {
    const tool = defineTool({
      name: 'bad_output',
      description: 'Returns the wrong shape.',
      input: {},
      output: { value: z.number() },
      handler: () => ok({ value: 'not a number' }),
    });
    const entries: LogEntry[] = [];
    const c = await serve([tool], [], { logger: recordingLogger(entries) });
    expect(expectFailure(await c.callTool('bad_output')).error).toBe('internal');
    expect((entries[0]!.fields.err as Error).message).toContain('does not match its output schema');
  });
});

describe('registerTools: the chain', () => {
  it('runs global middleware outside the tool’s own, first listed outermost', async () => {
    const order: string[] = [];
    const mark =
      (name: string): ToolMiddleware =>
      async (_ctx, next) => {
        order.push(`${name} in`);
        const result = await next();
        order.push(`${name} out`);
        return result;
      };
    const tool = defineTool({
      name: 'ping',
      description: 'Answers pong.',
      input: {},
      middleware: [mark('tool-1'), mark('tool-2')],
      handler: () => {
        order.push('handler');
        return ok({ pong: true });
      },
    });
    const c = await serve([tool], [mark('global-1'), mark('global-2')]);
    await c.callTool('ping');
    expect(order).toEqual([
      'global-1 in',
      'global-2 in',
      'tool-1 in',
      'tool-2 in',
      'handler',
      'tool-2 out',
      'tool-1 out',
      'global-2 out',
      'global-1 out',
    ]);
  });

  it('a middleware may answer without calling next(); the handler does not run', async () => {
    let ran = false;
    const tool = defineTool({
      name: 'guarded',
      description: 'Guarded.',
      input: {},
      handler: () => {
        ran = true;
        return ok();
      },
    });
    const guard: ToolMiddleware = async (ctx) => {
      ctx.decisions.push({ by: 'guard', action: 'short-circuit' });
      return fail('rate_limited', 'Slow down.', { retryAfterMs: 1000 });
    };
    const c = await serve([tool], [guard]);
    const envelope = expectFailure(await c.callTool('guarded'));
    expect(envelope.error).toBe('rate_limited');
    expect(envelope.retryAfterMs).toBe(1000);
    expect(ran).toBe(false);
  });

  it('a middleware calling next() twice makes the call an internal error', async () => {
    const entries: LogEntry[] = [];
    const twice: ToolMiddleware = async (_ctx, next) => {
      await next();
      return next();
    };
    const c = await serve([failing], [twice], { logger: recordingLogger(entries) });
    expect(expectFailure(await c.callTool('get_order_status', { id: '1' })).error).toBe('internal');
    expect((entries[0]!.fields.err as Error).message).toBe('next() called multiple times');
  });

  it('a downstream throw is caught by an upstream middleware', async () => {
    const catcher: ToolMiddleware = async (_ctx, next) => {
      try {
        return await next();
      } catch (error) {
        return fail('unavailable', `caught: ${(error as Error).message.split(' ')[0]}`);
      }
    };
    const c = await serve([failing], [catcher]);
    const envelope = expectFailure(await c.callTool('get_order_status', { id: 'crash' }));
    expect(envelope).toMatchObject({ error: 'unavailable', message: 'caught: connect' });
  });

  it('bad arguments pass the global chain and are answered invalid_argument naming each field', async () => {
    const seen: Array<Pick<ToolContext, 'toolName' | 'validation' | 'args'>> = [];
    const recorder: ToolMiddleware = async (ctx, next) => {
      seen.push({ toolName: ctx.toolName, validation: ctx.validation, args: ctx.args });
      return next();
    };
    let ran = false;
    const tool = defineTool({
      name: 'search_orders',
      description: 'Search.',
      input: searchOrders.inputSchema,
      handler: () => {
        ran = true;
        return ok();
      },
    });
    const c = await serve([tool], [recorder]);
    const result = await c.callTool('search_orders', { status: 'lost', days: 365, extra: 1 });
    expect(ran).toBe(false);
    const fields = [
      { path: 'status', expected: 'one of "open", "shipped", "cancelled"' },
      { path: 'days', expected: 'a number at most 90' },
      { path: 'extra', expected: 'not an accepted argument; remove it (accepted: status, days)' },
    ];
    expect(parseResultText(result)).toEqual({
      ok: false,
      error: 'invalid_argument',
      message: 'Invalid arguments for search_orders: status, days, extra.',
      hint: `Fix and call again: ${fields.map((f) => `${f.path}: ${f.expected}`).join('; ')}.`,
      retryable: false,
      fields,
    });
    expect(seen).toEqual([
      {
        toolName: 'search_orders',
        validation: { ok: false, issues: fields },
        args: { status: 'lost', days: 365, extra: 1 },
      },
    ]);
  });

  it('a refusal lists at most 32 issues and cuts long keys, however many unknown arguments the model sends', async () => {
    const seen: ToolContext['validation'][] = [];
    const recorder: ToolMiddleware = async (ctx, next) => {
      seen.push(ctx.validation);
      return next();
    };
    const c = await serve([searchOrders], [recorder]);
    // 50,000 unknown arguments, each named by a 1000-character key: zod reports them as one issue.
    const args: Record<string, unknown> = { status: 'open' };
    for (let i = 0; i < 50_000; i += 1) args[`k${String(i).padStart(5, '0')}${'x'.repeat(994)}`] = i;
    const result = await c.callTool('search_orders', args);
    const body = parseResultText(result) as {
      message: string;
      hint: string;
      fields: { path: string; expected: string }[];
    };
    expect(body.fields).toHaveLength(33);
    expect(body.fields[0]).toEqual({
      path: `k00000${'x'.repeat(122)}…`,
      expected: 'not an accepted argument; remove it (accepted: status, days)',
    });
    expect(body.fields[32]).toEqual({
      path: '(49968 more)',
      expected: 'not listed; fix the ones above and call again',
    });
    for (const field of body.fields) expect(field.path.length).toBeLessThanOrEqual(129);
    expect(body.message.endsWith(', (49968 more).')).toBe(true);
    // The whole answer stays a few KB (the arguments were 50 MB).
    expect(JSON.stringify(result).length).toBeLessThan(40_000);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.ok === false && seen[0]!.issues).toEqual(body.fields);
  });

  it('a schema with an async refinement is validated on every call, the first one included', async () => {
    let checks = 0;
    const tool = defineTool({
      name: 'reserve',
      description: 'Reserve a name.',
      input: {
        name: z.string().refine(async (value) => {
          checks += 1;
          await new Promise((resolve) => setImmediate(resolve));
          return value !== 'taken';
        }, 'already taken'),
      },
      handler: ({ name }) => ok({ name }),
    });
    const c = await serve([tool]);
    for (let round = 0; round < 3; round += 1) {
      expect(parseResultText(await c.callTool('reserve', { name: `free-${round}` }))).toEqual({
        ok: true,
        name: `free-${round}`,
      });
      expect(expectFailure(await c.callTool('reserve', { name: 'taken' })).fields).toEqual([
        { path: 'name', expected: 'already taken' },
      ]);
    }
    // One check per call: the refinement never runs twice (no synchronous attempt first).
    expect(checks).toBe(6);
  });

  it("parses schemas that run none of the author's code synchronously (zod's fast path), input and output alike", async () => {
    const tool = defineTool({
      name: 'lookup',
      description: 'Look up rows.',
      input: {
        q: z.string().max(20),
        days: z.number().int().min(1).default(30),
        tags: z.array(z.enum(['a', 'b'])).optional(),
        filters: z.record(z.string(), z.string()).nullable().optional(),
      },
      output: { rows: z.array(z.object({ id: z.string(), at: z.iso.datetime().nullable() })) },
      handler: ({ q }) => ok({ rows: [{ id: q, at: null }] }),
    });
    const asyncInput = vi.spyOn(tool.inputSchema, 'safeParseAsync');
    const asyncOutput = vi.spyOn(tool.outputSchema!, 'safeParseAsync');
    const c = await serve([tool]);
    expect(parseResultText(await c.callTool('lookup', { q: 'x', tags: ['a'] }))).toEqual({
      ok: true,
      rows: [{ id: 'x', at: null }],
    });
    expect(expectFailure(await c.callTool('lookup', { q: 'x', days: 0 })).fields).toEqual([
      { path: 'days', expected: expect.any(String) },
    ]);
    expect(asyncInput).not.toHaveBeenCalled();
    expect(asyncOutput).not.toHaveBeenCalled();
  });

  it('parses a schema whose refinements are declared synchronous (synchronousRefinements) synchronously; a refinement added later is not covered', async () => {
    let checks = 0;
    const noNul = synchronousRefinements(
      z.string().refine((value) => {
        checks += 1;
        return !value.includes('\u0000');
      }, 'text without NUL characters'),
    );
    const declared = defineTool({
      name: 'find',
      description: 'Find.',
      // The declaration travels through the clones .max(), .describe() and .optional() make.
      input: { q: noNul.max(20).describe('Text.'), near: noNul.optional() },
      handler: ({ q }) => ok({ q }),
    });
    const undeclared = defineTool({
      name: 'find_more',
      description: 'Find more.',
      input: { q: noNul.refine((value) => value !== 'x', 'not x') },
      handler: ({ q }) => ok({ q }),
    });
    const asyncDeclared = vi.spyOn(declared.inputSchema, 'safeParseAsync');
    const asyncUndeclared = vi.spyOn(undeclared.inputSchema, 'safeParseAsync');
    const c = await serve([declared, undeclared]);
    expect(parseResultText(await c.callTool('find', { q: 'a' }))).toEqual({ ok: true, q: 'a' });
    expect(expectFailure(await c.callTool('find', { q: 'a\u0000b' })).fields).toEqual([
      { path: 'q', expected: 'text without NUL characters' },
    ]);
    expect(checks).toBe(2);
    expect(asyncDeclared).not.toHaveBeenCalled();
    expect(expectFailure(await c.callTool('find_more', { q: 'x' })).fields).toEqual([
      { path: 'q', expected: 'not x' },
    ]);
    expect(asyncUndeclared).toHaveBeenCalledTimes(1);
  });

  it('parses a schema with a transform, a custom or a lazy part async, on every call', async () => {
    const tool = defineTool({
      name: 'shout',
      description: 'Upper-cases.',
      input: {
        text: z.string().transform((value) => value.toUpperCase()),
        extra: z.lazy(() => z.number()).optional(),
      },
      handler: ({ text }) => ok({ text }),
    });
    const syncParse = vi.spyOn(tool.inputSchema, 'safeParse');
    const c = await serve([tool]);
    for (const text of ['a', 'b']) {
      expect(parseResultText(await c.callTool('shout', { text }))).toEqual({
        ok: true,
        text: text.toUpperCase(),
      });
    }
    expect(syncParse).not.toHaveBeenCalled();
  });

  it('falls back to the async parse, for good, when zod meets a promise in a schema taken as synchronous', async () => {
    const tool = defineTool({
      name: 'echo_text',
      description: 'Echo.',
      input: { text: z.string() },
      handler: ({ text }) => ok({ text }),
    });
    // As zod does when a synchronous parse meets a promise: it throws before giving any result.
    const syncParse = vi.spyOn(tool.inputSchema, 'safeParse').mockImplementation(() => {
      throw new z.core.$ZodAsyncError();
    });
    const asyncParse = vi.spyOn(tool.inputSchema, 'safeParseAsync');
    const c = await serve([tool]);
    for (const text of ['a', 'b', 'c']) {
      expect(parseResultText(await c.callTool('echo_text', { text }))).toEqual({ ok: true, text });
    }
    expect(syncParse).toHaveBeenCalledTimes(1);
    expect(asyncParse).toHaveBeenCalledTimes(3);
  });

  it('a server built per request (stateless HTTP) registers the same tools again and again, each working', async () => {
    const seen: string[] = [];
    const tag: ToolMiddleware = (ctx, next) => {
      seen.push(ctx.toolName);
      return next();
    };
    const middleware = [tag];
    const tool = defineTool({
      name: 'echo',
      description: 'Echo.',
      input: { q: z.string() },
      output: { q: z.string() },
      handler: ({ q }) => ok({ q }),
    });
    for (let request = 0; request < 3; request += 1) {
      const server = new McpServer({ name: 'per-request', version: '1.0.0' });
      registerTools(server, [tool], { middleware, logger: recordingLogger([]) });
      const c = await connectTestClient(server);
      const listed = await c.client.listTools();
      expect(listed.tools[0]?.inputSchema).toMatchObject({
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        properties: { q: { type: 'string' } },
      });
      expect(parseResultText(await c.callTool('echo', { q: `r${request}` }))).toEqual({
        ok: true,
        q: `r${request}`,
      });
      await c.close();
    }
    expect(seen).toEqual(['echo', 'echo', 'echo']);
    // The same list changed in place is read again: the new middleware runs.
    middleware.push((ctx, next) => {
      seen.push(`second:${ctx.toolName}`);
      return next();
    });
    const server = new McpServer({ name: 'per-request', version: '1.0.0' });
    registerTools(server, [tool], { middleware, logger: recordingLogger([]) });
    const c = await connectTestClient(server);
    await c.callTool('echo', { q: 'again' });
    await c.close();
    expect(seen.slice(3)).toEqual(['echo', 'second:echo']);
  });

  it('a missing required argument and a wrong type are named', async () => {
    const c = await serve([failing]);
    expect(expectFailure(await c.callTool('get_order_status', {})).fields).toEqual([
      { path: 'id', expected: 'required, a string' },
    ]);
    expect(expectFailure(await c.callTool('get_order_status', { id: 5 })).fields).toEqual([
      { path: 'id', expected: 'a string, not a number' },
    ]);
  });

  it('an unknown tool passes the global chain, then is answered with JSON-RPC error -32602', async () => {
    const seen: Array<{ toolName: string; known: boolean; outcome: unknown }> = [];
    const recorder: ToolMiddleware = async (ctx, next) => {
      const result = await next();
      seen.push({ toolName: ctx.toolName, known: ctx.tool !== undefined, outcome: parseResultText(result) });
      return result;
    };
    const c = await serve([failing], [recorder]);
    const call = c.callTool('drop_tables', { really: true });
    await expect(call).rejects.toBeInstanceOf(McpError);
    await expect(call).rejects.toMatchObject({
      code: -32602,
      message: expect.stringContaining('Unknown tool: drop_tables'),
    });
    expect(seen).toEqual([
      {
        toolName: 'drop_tables',
        known: false,
        outcome: {
          ok: false,
          error: 'not_found',
          message: 'Unknown tool: drop_tables.',
          hint: 'Call tools/list to see the tools this server offers.',
          retryable: false,
        },
      },
    ]);
  });

  it('a disabled tool is unknown', async () => {
    const server = new McpServer({ name: 'test', version: '1.0.0' });
    const handles = registerTools(server, [failing], { logger: recordingLogger([]) });
    handles.get_order_status!.disable();
    client = await connectTestClient(server);
    await expect(client.callTool('get_order_status', { id: '1' })).rejects.toMatchObject({ code: -32602 });
  });

  it('the context carries request id, session, auth info, _meta and per-call state', async () => {
    let captured: ToolContext | undefined;
    const tool = defineTool({
      name: 'whoami',
      description: 'Echo.',
      input: {},
      handler: (_args, ctx) => {
        captured = ctx as ToolContext;
        return ok();
      },
    });
    const authInfo = { token: 't', clientId: 'desk-app', scopes: ['orders:read'], extra: { sub: 'cust-7' } };
    const c = await serve([tool], [], { sessionId: 'session-1', authInfo });
    await c.callTool(
      'whoami',
      {},
      { meta: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' } },
    );
    expect(captured).toMatchObject({
      toolName: 'whoami',
      args: {},
      rawArgs: {},
      validation: { ok: true },
      incidentId: undefined,
      decisions: [],
      state: {},
      request: {
        id: expect.any(Number),
        sessionId: 'session-1',
        authInfo,
        meta: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
      },
    });
    expect(captured!.signal).toBe(captured!.request.signal);
    expect(captured!.startedAt).toBeLessThanOrEqual(Date.now());
  });

  it('the abort signal reaches the handler when the client cancels', async () => {
    let sawAbort: (value: string) => void = () => {};
    const aborted = new Promise<string>((resolve) => {
      sawAbort = resolve;
    });
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const tool = defineTool({
      name: 'slow',
      description: 'Waits until cancelled.',
      input: {},
      handler: (_args, ctx) =>
        new Promise((resolve) => {
          started();
          ctx.signal.addEventListener('abort', () => {
            sawAbort(String(ctx.signal.reason));
            resolve(ok());
          });
        }),
    });
    const c = await serve([tool]);
    const controller = new AbortController();
    const call = c.callTool('slow', {}, { signal: controller.signal });
    await running;
    controller.abort('user gave up');
    await expect(call).rejects.toThrow();
    expect(await aborted).toContain('user gave up');
  });
});

describe('defineTool', () => {
  it('refuses bad definitions with a clear error', () => {
    const handler = () => ok();
    expect(() => defineTool({ name: 'has space', description: 'x', input: {}, handler })).toThrow(
      'invalid tool name',
    );
    expect(() => defineTool({ name: 'x', description: ' ', input: {}, handler })).toThrow(
      'a description is required',
    );
    expect(() => defineTool({ name: 'x', description: 'x', input: { a: 'str' as never }, handler })).toThrow(
      'input.a is not a zod schema',
    );
  });

  it('registerTools refuses an empty list and a duplicate name', () => {
    const server = new McpServer({ name: 'test', version: '1.0.0' });
    expect(() => registerTools(server, [])).toThrow('at least one tool');
    registerTools(server, [failing], { logger: recordingLogger([]) });
    expect(() => registerTools(server, [failing])).toThrow('already registered');
  });
});
