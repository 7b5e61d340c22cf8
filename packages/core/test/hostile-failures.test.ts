import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import * as z from 'zod';
import {
  type CallerIdentity,
  createStderrLogger,
  defineTool,
  ERROR_META_KEY,
  fail,
  type Logger,
  type NextFn,
  ok,
  type ToolContext,
  ToolError,
  type ToolMiddleware,
  type ToolRequest,
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

const INTERNAL = {
  ok: false,
  error: 'internal',
  message: 'Internal error.',
  hint: 'An unexpected error occurred. Do not retry; tell the user and quote the incident id.',
  retryable: false,
  incidentId: expect.stringMatching(/^inc_/),
};

/** core's own stderr logger, writing into `lines` (each parsed back from its JSON line). */
function stderrLines(): { lines: Record<string, unknown>[]; logger: Logger } {
  const lines: Record<string, unknown>[] = [];
  const stream = { write: (chunk: string) => lines.push(JSON.parse(chunk) as Record<string, unknown>) };
  return { lines, logger: createStderrLogger({ stream }) };
}

/** A tool whose handler throws what `make()` returns. */
function throwing(make: () => unknown): ReturnType<typeof defineTool> {
  return defineTool({
    name: 'throws',
    description: 'Throws.',
    input: {},
    handler: () => {
      throw make();
    },
  });
}

describe('the default logger keeps every incident, whatever was thrown', () => {
  it('logs an error whose cause chain loops under the incident id the model sees', async () => {
    const { lines, logger } = stderrLines();
    const tool = throwing(() => {
      const outer = new Error('query failed at /srv/app/db.js:10');
      const inner = new Error('pool broke', { cause: outer });
      (outer as { cause?: unknown }).cause = inner;
      return outer;
    });
    client = await serveTools([tool], { logger });
    const envelope = expectFailure(await client.callTool('throws', {}));
    expect(envelope).toEqual(INTERNAL);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'error',
      incidentId: envelope.incidentId,
      err: {
        name: 'Error',
        message: 'query failed at /srv/app/db.js:10',
        cause: { name: 'Error', message: 'pool broke', cause: '[Circular]' },
      },
    });
  });

  it('logs a ToolError whose cause loops, under the incident id the model sees', async () => {
    const { lines, logger } = stderrLines();
    const tool = throwing(() => {
      const cause = new Error('connect ECONNREFUSED 10.0.0.5:5432');
      (cause as { cause?: unknown }).cause = cause;
      return new ToolError('unavailable', 'Orders are unavailable.', { cause });
    });
    client = await serveTools([tool], { logger });
    const envelope = expectFailure(await client.callTool('throws', {}));
    expect(envelope).toMatchObject({ error: 'unavailable', incidentId: expect.stringMatching(/^inc_/) });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      incidentId: envelope.incidentId,
      err: {
        name: 'ToolError',
        cause: { message: 'connect ECONNREFUSED 10.0.0.5:5432', cause: '[Circular]' },
      },
    });
  });

  it('never shows the model what a value the logger cannot read says; the log keeps the incident', async () => {
    const { lines, logger } = stderrLines();
    const tool = defineTool({
      name: 'throws',
      description: 'Throws odd values.',
      input: { kind: z.enum(['toJSON', 'message', 'proxy']) },
      handler: ({ kind }) => {
        if (kind === 'toJSON') {
          throw {
            toJSON() {
              throw new Error('serialising the row at /srv/app/rows.js:4 failed');
            },
          };
        }
        if (kind === 'message') {
          const error = new Error('placeholder');
          Object.defineProperty(error, 'message', {
            get() {
              throw new Error('lazy message read /etc/app/secrets.env');
            },
          });
          throw error;
        }
        throw new Proxy(new Error('proxied'), {
          getPrototypeOf() {
            throw new Error('proxy trap at /srv/app/proxy.js:1');
          },
        });
      },
    });
    client = await serveTools([tool], { logger });
    for (const kind of ['toJSON', 'message', 'proxy']) {
      lines.length = 0;
      const result = await client.callTool('throws', { kind });
      const envelope = expectFailure(result);
      expect(envelope).toEqual(INTERNAL);
      expect(JSON.stringify(result)).not.toMatch(/\/srv\/app|\/etc\/app/);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({
        level: 'error',
        incidentId: envelope.incidentId,
        msg: 'tool call failed',
      });
      // What could not be read is marked so; its reason stays on the server.
      expect(JSON.stringify(lines[0]!.err)).toContain('[Unreadable: Error: ');
    }
  });

  it('logs every error an AggregateError holds (a refused connection to localhost on Node 20)', async () => {
    const { lines, logger } = stderrLines();
    const tool = throwing(() =>
      Object.assign(
        new AggregateError(
          [
            Object.assign(new Error('connect ECONNREFUSED ::1:5432'), { code: 'ECONNREFUSED' }),
            Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
          ],
          '',
        ),
        { code: 'ECONNREFUSED' },
      ),
    );
    client = await serveTools([tool], { logger });
    const envelope = expectFailure(await client.callTool('throws', {}));
    expect(lines[0]).toMatchObject({
      incidentId: envelope.incidentId,
      err: {
        name: 'AggregateError',
        message: '',
        code: 'ECONNREFUSED',
        errors: [
          { message: 'connect ECONNREFUSED ::1:5432', code: 'ECONNREFUSED' },
          { message: 'connect ECONNREFUSED 127.0.0.1:5432', code: 'ECONNREFUSED' },
        ],
      },
    });
  });

  it('logs a thrown symbol as the symbol it is', async () => {
    const { lines, logger } = stderrLines();
    client = await serveTools([throwing(() => Symbol('lost state'))], { logger });
    const envelope = expectFailure(await client.callTool('throws', {}));
    expect(lines[0]).toMatchObject({ incidentId: envelope.incidentId, err: 'Symbol(lost state)' });
  });
});

describe('what leaves dispatch is always a designed answer', () => {
  it('answers internal, not the logger’s own error, when the logger throws', async () => {
    const logger: Logger = {
      debug: () => {},
      info: () => {},
      warn: () => {},
      error: () => {
        throw new Error("EBADF: bad file descriptor, write '/var/log/orders/toolgate.log'");
      },
    };
    const tool = throwing(() => new Error('connect ECONNREFUSED 10.0.0.5:5432'));
    client = await serveTools([tool], { logger });
    const result = await client.callTool('throws', {});
    expect(expectFailure(result)).toEqual(INTERNAL);
    expect(JSON.stringify(result)).not.toContain('/var/log');
  });

  it('answers internal, not the hook’s own error, when a scrubText hook throws; the log keeps it', async () => {
    const entries: LogEntry[] = [];
    const brittle: ToolMiddleware = Object.assign((_ctx: ToolContext, next: NextFn) => next(), {
      scrubText: () => {
        throw new Error("ENOENT: no such file or directory, open '/etc/orders/patterns.json'");
      },
    }) as ToolMiddleware;
    const tool = defineTool({
      name: 'missing',
      description: 'Not found.',
      input: {},
      handler: () => fail('not_found', 'No order 42.'),
    });
    client = await serveTools([tool], { middleware: [brittle], logger: recordingLogger(entries) });
    const result = await client.callTool('missing', {});
    const envelope = expectFailure(result);
    expect(envelope).toEqual(INTERNAL);
    expect(JSON.stringify(result)).not.toContain('/etc/orders');
    const logged = entries.filter((entry) => entry.fields.incidentId === envelope.incidentId);
    expect(logged.length).toBeGreaterThan(0);
    expect((logged[0]!.fields.err as Error).message).toContain('/etc/orders/patterns.json');
  });

  it('hides a tool whose canSee throws (fail closed), in tools/call and tools/list; the log keeps why', async () => {
    const entries: LogEntry[] = [];
    const policy: ToolMiddleware = Object.assign((_ctx: ToolContext, next: NextFn) => next(), {
      canSee: (tool: { name: string }) => {
        if (tool.name === 'refund') throw new Error('policy store at 10.9.9.9:6379 unreachable');
        return true;
      },
    }) as ToolMiddleware;
    const refund = defineTool({ name: 'refund', description: 'Refund.', input: {}, handler: () => ok() });
    const ping = defineTool({ name: 'ping', description: 'Ping.', input: {}, handler: () => ok() });
    client = await serveTools([refund, ping], { middleware: [policy], logger: recordingLogger(entries) });
    await expect(client.callTool('refund', {})).rejects.toThrow(/^MCP error -32602: Unknown tool: refund$/);
    const listed = await client.client.listTools();
    expect(listed.tools.map((tool) => tool.name)).toEqual(['ping']);
    expect(entries.length).toBeGreaterThan(0);
    for (const entry of entries) {
      expect(entry).toMatchObject({ level: 'error', fields: { tool: 'refund' } });
      expect((entry.fields.err as Error).message).toBe('policy store at 10.9.9.9:6379 unreachable');
    }
  });
});

describe('a ToolError with a cause, wherever it is thrown', () => {
  it('from a bind: the model sees an incident id, the log keeps the cause under it', async () => {
    const entries: LogEntry[] = [];
    const tool = defineTool({
      name: 'mine',
      description: 'Bound to the caller.',
      input: {},
      bind: () => {
        throw new ToolError('permission_denied', 'This token is not tied to a customer.', {
          cause: new Error('claims lookup at https://idp.internal/userinfo failed'),
        });
      },
      handler: () => ok(),
    });
    client = await serveTools([tool], { logger: recordingLogger(entries) });
    const envelope = expectFailure(await client.callTool('mine', {}));
    expect(envelope).toMatchObject({
      error: 'permission_denied',
      message: 'This token is not tied to a customer.',
      incidentId: expect.stringMatching(/^inc_/),
    });
    expect(entries).toHaveLength(1);
    expect(entries[0]!.fields.incidentId).toBe(envelope.incidentId);
    expect(((entries[0]!.fields.err as Error).cause as Error).message).toContain('idp.internal');
  });

  it('from a middleware, escaping the chain: the model sees an incident id, the log keeps the cause', async () => {
    const entries: LogEntry[] = [];
    const limiter: ToolMiddleware = async () => {
      throw new ToolError('unavailable', 'Rate limits cannot be checked now.', {
        cause: new Error('connect ECONNREFUSED 10.0.0.2:6379'),
      });
    };
    const ping = defineTool({ name: 'ping', description: 'Ping.', input: {}, handler: () => ok() });
    client = await serveTools([ping], { middleware: [limiter], logger: recordingLogger(entries) });
    const envelope = expectFailure(await client.callTool('ping', {}));
    expect(envelope).toMatchObject({ error: 'unavailable', incidentId: expect.stringMatching(/^inc_/) });
    expect(entries).toHaveLength(1);
    expect(entries[0]!.fields.incidentId).toBe(envelope.incidentId);
    expect(((entries[0]!.fields.err as Error).cause as Error).message).toContain('10.0.0.2:6379');
  });
});

/** The exact wire answer `internal` is, under `incidentId`. */
function internalAnswer(incidentId: string | undefined): Record<string, unknown> {
  const envelope = { ...INTERNAL, incidentId };
  return {
    isError: true,
    content: [{ type: 'text', text: JSON.stringify(envelope) }],
    _meta: { [ERROR_META_KEY]: envelope },
  };
}

describe('a custom identify that fails', () => {
  const ping = defineTool({ name: 'ping', description: 'Ping.', input: {}, handler: () => ok() });

  it('throwing: the call is internal under an incident id, its message in the log only', async () => {
    const entries: LogEntry[] = [];
    let chainRan = false;
    const spy: ToolMiddleware = async (_ctx, next) => {
      chainRan = true;
      return next();
    };
    const identify = (request: ToolRequest): CallerIdentity => {
      const tenant = (request.authInfo?.extra as { tenant?: { id: string } } | undefined)?.tenant;
      if (tenant === undefined) throw new Error('tenant lookup at https://idp.orders.internal/t failed');
      return { id: `tenant:${tenant.id}`, kind: 'client' };
    };
    client = await serveTools([ping], { middleware: [spy], identify, logger: recordingLogger(entries) });
    const result = await client.callTool('ping', {});
    const incidentId = expectFailure(result).incidentId;
    expect(result).toEqual(internalAnswer(incidentId));
    expect(incidentId).toMatch(/^inc_/);
    expect(JSON.stringify(result)).not.toMatch(/tenant|idp\.orders/);
    // No caller, so no policy can judge the call: it is answered before the chain.
    expect(chainRan).toBe(false);
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      level: 'error',
      message: 'tool error with a cause',
      fields: { incidentId, tool: 'ping', code: 'internal', during: 'identify' },
    });
    const err = entries[0]!.fields.err as ToolError;
    expect(err.message).toBe('The caller could not be identified.');
    expect((err.cause as Error).message).toBe('tenant lookup at https://idp.orders.internal/t failed');
  });

  it('throwing a ToolError: still internal (identify names callers, refusing one is a bind’s or a policy’s job)', async () => {
    const entries: LogEntry[] = [];
    const identify = (): CallerIdentity => {
      throw new ToolError(
        'permission_denied',
        'No tenant claim in the token from https://idp.orders.internal.',
      );
    };
    client = await serveTools([ping], { middleware: [], identify, logger: recordingLogger(entries) });
    const result = await client.callTool('ping', {});
    const incidentId = expectFailure(result).incidentId;
    expect(result).toEqual(internalAnswer(incidentId));
    expect(JSON.stringify(result)).not.toMatch(/tenant|idp\.orders/);
    expect(entries).toHaveLength(1);
    expect(entries[0]!.fields.incidentId).toBe(incidentId);
    expect(((entries[0]!.fields.err as Error).cause as ToolError).message).toContain('No tenant claim');
  });

  it('async (a promise): internal, never one key shared by every caller', async () => {
    const entries: LogEntry[] = [];
    const identify = (async () => ({ id: 'tenant:7', kind: 'client' })) as unknown as (
      request: ToolRequest,
    ) => CallerIdentity;
    client = await serveTools([ping], { middleware: [], identify, logger: recordingLogger(entries) });
    const result = await client.callTool('ping', {});
    const incidentId = expectFailure(result).incidentId;
    expect(result).toEqual(internalAnswer(incidentId));
    expect(entries).toHaveLength(1);
    expect(entries[0]!.fields.incidentId).toBe(incidentId);
    expect(((entries[0]!.fields.err as Error).cause as Error).message).toBe(
      'identify returned a promise, not a caller identity',
    );
  });

  it('in tools/list (a canSee needs the caller): a designed JSON-RPC error with the incident id', async () => {
    const entries: LogEntry[] = [];
    const policy: ToolMiddleware = Object.assign((_ctx: ToolContext, next: NextFn) => next(), {
      canSee: () => true,
    }) as ToolMiddleware;
    const identify = (): CallerIdentity => {
      throw new Error('tenant lookup at https://idp.orders.internal/t failed');
    };
    client = await serveTools([ping], { middleware: [policy], identify, logger: recordingLogger(entries) });
    const error = await client.client.listTools().then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).message).toBe('MCP error -32603: Internal error.');
    expect((error as McpError).code).toBe(-32603);
    const incidentId = ((error as McpError).data as { incidentId: string }).incidentId;
    expect(incidentId).toMatch(/^inc_/);
    expect(entries).toHaveLength(1);
    expect(entries[0]!.fields).toMatchObject({ incidentId, tool: 'tools/list', during: 'identify' });
    expect(((entries[0]!.fields.err as Error).cause as Error).message).toContain('idp.orders.internal');
  });
});

describe('incident ids held by the cause log', () => {
  it('are written when the server closes, not only when the hold ends', async () => {
    // Fake timers: the hold never ends by itself here, so only the close can write the ids.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const entries: LogEntry[] = [];
      const down = defineTool({
        name: 'down',
        description: 'Always down.',
        input: { n: z.number() },
        handler: () => {
          const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
            code: 'ECONNREFUSED',
          });
          throw new ToolError('unavailable', 'The database is unavailable.', { cause });
        },
      });
      const served = await serveTools([down], { middleware: [], logger: recordingLogger(entries) });
      const ids: string[] = [];
      for (let n = 0; n < 5; n++) ids.push(expectFailure(await served.callTool('down', { n })).incidentId!);
      expect(entries.map((entry) => entry.message)).toEqual(['tool error with a cause']);
      await served.close();
      expect(
        entries.map((entry) => [entry.message, entry.fields.incidentId ?? entry.fields.incidentIds]),
      ).toEqual([
        ['tool error with a cause', ids[0]],
        ['tool errors with the same cause (first one logged in full)', ids.slice(1)],
      ]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('are written only when the last server sharing the middleware list closes (one server per request)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const entries: LogEntry[] = [];
      const logger = recordingLogger(entries);
      const middleware: ToolMiddleware[] = [];
      const down = defineTool({
        name: 'down',
        description: 'Always down.',
        input: { n: z.number() },
        handler: () => {
          throw new ToolError('unavailable', 'Down.', {
            cause: Object.assign(new Error('x'), { code: 'EPIPE' }),
          });
        },
      });
      const first = await serveTools([down], { middleware, logger });
      const second = await serveTools([down], { middleware, logger });
      const ids = [
        expectFailure(await first.callTool('down', { n: 1 })).incidentId!,
        expectFailure(await second.callTool('down', { n: 2 })).incidentId!,
        expectFailure(await first.callTool('down', { n: 3 })).incidentId!,
      ];
      await first.close();
      expect(entries).toHaveLength(1);
      await second.close();
      expect(entries.map((entry) => entry.fields.incidentId ?? entry.fields.incidentIds)).toEqual([
        ids[0],
        ids.slice(1),
      ]);
    } finally {
      vi.useRealTimers();
    }
  });
});
