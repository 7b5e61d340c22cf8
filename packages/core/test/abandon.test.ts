import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  defineTool,
  ok,
  type RegisterToolsOptions,
  registerTools,
  type ToolDefinition,
  type ToolMiddleware,
  type ToolResult,
} from '../src/index.js';
import {
  connectTestClient,
  type LogEntry,
  parseResultText,
  recordingLogger,
  type TestClient,
} from '../src/testing.js';

let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

/** A middleware that keeps what the chain answered each call (what audit and otel would record). */
function observer(): { middleware: ToolMiddleware; answered: Promise<ToolResult>; seen: () => boolean } {
  let done = false;
  let answer: (result: ToolResult) => void = () => {};
  const answered = new Promise<ToolResult>((resolve) => {
    answer = resolve;
  });
  return {
    middleware: async (_ctx, next) => {
      const result = await next();
      done = true;
      answer(result);
      return result;
    },
    answered,
    seen: () => done,
  };
}

/** A tool whose handler starts, tells the test, and then never settles unless `settle` is called. */
function stubborn(): {
  tool: ToolDefinition;
  started: Promise<void>;
  settle: (how: 'ok' | 'throw') => void;
} {
  let started: () => void = () => {};
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  let settle: (how: 'ok' | 'throw') => void = () => {};
  const tool = defineTool({
    name: 'stubborn',
    description: 'Ignores its abort signal.',
    input: {},
    handler: () =>
      new Promise<ToolResult>((resolve, reject) => {
        started();
        settle = (how) => (how === 'ok' ? resolve(ok({ late: true })) : reject(new Error('ECONNRESET late')));
      }),
  });
  return { tool, started: running, settle: (how) => settle(how) };
}

async function serve(
  tool: ToolDefinition,
  middleware: ToolMiddleware[],
  options: Partial<RegisterToolsOptions>,
  logs: LogEntry[],
): Promise<TestClient> {
  const server = new McpServer({ name: 'test', version: '1.0.0' });
  registerTools(server, [tool], { middleware, logger: recordingLogger(logs), ...options });
  client = await connectTestClient(server);
  return client;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A stubborn handler behind an observer, its call started; `cancel` (with a reason) aborts it from the
 * client and waits for the client's rejection.
 */
async function started(abandonAfterMs: number | false): Promise<{
  logs: LogEntry[];
  seen: ReturnType<typeof observer>;
  handler: ReturnType<typeof stubborn>;
  call: Promise<unknown>;
  cancel: (reason?: string) => Promise<void>;
}> {
  const logs: LogEntry[] = [];
  const seen = observer();
  const handler = stubborn();
  const c = await serve(handler.tool, [seen.middleware], { abandonAfterMs }, logs);
  const controller = new AbortController();
  const call = c.callTool('stubborn', {}, { signal: controller.signal, timeoutMs: 10_000 });
  await handler.started;
  const cancel = async (reason?: string): Promise<void> => {
    controller.abort(reason);
    await expect(call).rejects.toThrow();
  };
  return { logs, seen, handler, call, cancel };
}

describe('a handler that ignores its cancelled call', () => {
  it('is answered without after abandonAfterMs: the chain sees timeout, the log says why', async () => {
    const { logs, seen, handler, cancel } = await started(40);
    await cancel('user gave up');
    const result = await seen.answered;
    expect(result.isError).toBe(true);
    const envelope = parseResultText(result) as { error: string; incidentId: string; retryable: boolean };
    expect(envelope.error).toBe('timeout');
    expect(envelope.incidentId).toMatch(/\S/);
    const warning = logs.find((entry) => entry.message?.includes('cancelled; answered without it'));
    expect(warning).toMatchObject({
      level: 'warn',
      fields: { incidentId: envelope.incidentId, tool: 'stubborn', abandonAfterMs: 40 },
    });
    // What it settles to later is dropped; a late failure is logged, never thrown.
    handler.settle('throw');
    await sleep(10);
    expect(logs.find((entry) => entry.message?.includes('failed after its call was answered'))).toMatchObject(
      {
        level: 'warn',
        fields: { incidentId: envelope.incidentId, tool: 'stubborn' },
      },
    );
  });

  it('keeps the handler’s own answer when it settles within the grace', async () => {
    const { logs, seen, handler, cancel } = await started(5000);
    await cancel();
    await sleep(20);
    expect(seen.seen()).toBe(false);
    handler.settle('ok');
    const result = await seen.answered;
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toEqual({ ok: true, late: true });
    expect(logs.filter((entry) => entry.level === 'warn')).toEqual([]);
  });

  it('is never abandoned while its call is not cancelled', async () => {
    const { seen, handler, call } = await started(0);
    await sleep(60);
    expect(seen.seen()).toBe(false);
    handler.settle('ok');
    const result = (await call) as ToolResult;
    expect(result.structuredContent).toEqual({ ok: true, late: true });
  });

  it('waits however long it takes with abandonAfterMs: false', async () => {
    const { seen, handler, cancel } = await started(false);
    await cancel();
    await sleep(80);
    expect(seen.seen()).toBe(false);
    handler.settle('ok');
    expect((await seen.answered).structuredContent).toEqual({ ok: true, late: true });
  });

  it('refuses an abandonAfterMs that is not a number of ms or false', () => {
    const server = new McpServer({ name: 'test', version: '1.0.0' });
    const { tool } = stubborn();
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY, '5000', true]) {
      expect(() => registerTools(server, [tool], { abandonAfterMs: bad as never })).toThrow(
        /abandonAfterMs must be a number of ms \(0 or more\) or false/,
      );
    }
  });
});

describe('a handler that ignores its cancelled call, with a logger that throws', () => {
  it('is still answered timeout and its late failure dropped: the logger breaks neither the answer nor the process', async () => {
    const broken: LogEntry[] = [];
    const throwing = {
      ...recordingLogger(broken),
      warn: () => {
        throw new Error("EBADF: bad file descriptor, write '/var/log/orders/toolgate.log'");
      },
    };
    const seen = observer();
    const handler = stubborn();
    const server = new McpServer({ name: 'test', version: '1.0.0' });
    registerTools(server, [handler.tool], {
      middleware: [seen.middleware],
      logger: throwing,
      abandonAfterMs: 20,
    });
    client = await connectTestClient(server);
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown): void => {
      uncaught.push(error);
    };
    process.on('uncaughtException', onUncaught);
    process.on('unhandledRejection', onUncaught);
    try {
      const controller = new AbortController();
      const call = client.callTool('stubborn', {}, { signal: controller.signal, timeoutMs: 10_000 });
      await handler.started;
      controller.abort('user gave up');
      await expect(call).rejects.toThrow();
      const envelope = parseResultText(await seen.answered) as { error: string };
      expect(envelope.error).toBe('timeout');
      handler.settle('throw');
      await sleep(50);
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
      process.off('unhandledRejection', onUncaught);
    }
  });
});
