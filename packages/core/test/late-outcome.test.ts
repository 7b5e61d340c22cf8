// A handler that settles after its call was answered without it (core abandoned it, or a middleware's
// deadline answered for it): core hands what it came to, model-facing, to whoever asked with
// onLateOutcome, so a policy such as idempotency can keep what the call did.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  defineTool,
  fail,
  type LateOutcome,
  ok,
  onLateOutcome,
  type RegisterToolsOptions,
  registerTools,
  type ToolDefinition,
  ToolError,
  type ToolMiddleware,
  type ToolResult,
} from '../src/index.js';
import {
  answerTimeoutAfter,
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

type Settle = { ok: ToolResult } | { throw: unknown };

/** A handler that ignores its signal and settles only when the test says how. */
function stubborn(): { tool: ToolDefinition; started: Promise<void>; settle: (how: Settle) => void } {
  let started: () => void = () => {};
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  let settle: (how: Settle) => void = () => {};
  const tool = defineTool({
    name: 'refund',
    description: 'Ignores its abort signal.',
    input: {},
    handler: () =>
      new Promise<ToolResult>((resolve, reject) => {
        started();
        settle = (how) => ('ok' in how ? resolve(how.ok) : reject(how.throw));
      }),
  });
  return { tool, started: running, settle: (how) => settle(how) };
}

/** Asks for the late outcome of every call whose answer is `timeout`; keeps what arrives. */
function lateWatcher(): { middleware: ToolMiddleware; outcomes: LateOutcome[]; answers: ToolResult[] } {
  const outcomes: LateOutcome[] = [];
  const answers: ToolResult[] = [];
  return {
    outcomes,
    answers,
    middleware: async (ctx, next) => {
      const result = await next();
      answers.push(result);
      if (result.isError === true) onLateOutcome(ctx, (outcome) => outcomes.push(outcome));
      return result;
    },
  };
}

async function serve(
  tool: ToolDefinition,
  middleware: ToolMiddleware[],
  options: Partial<RegisterToolsOptions>,
  logs: LogEntry[] = [],
): Promise<TestClient> {
  const server = new McpServer({ name: 'test', version: '1.0.0' });
  registerTools(server, [tool], { middleware, logger: recordingLogger(logs), ...options });
  client = await connectTestClient(server);
  return client;
}

async function abandonedCall(
  watcher: ReturnType<typeof lateWatcher>,
  logs: LogEntry[] = [],
  extra: ToolMiddleware[] = [],
): Promise<ReturnType<typeof stubborn>> {
  const handler = stubborn();
  const c = await serve(handler.tool, [watcher.middleware, ...extra], { abandonAfterMs: 10 }, logs);
  const controller = new AbortController();
  const call = c.callTool('refund', {}, { signal: controller.signal, timeoutMs: 10_000 });
  await handler.started;
  controller.abort('the user pressed stop');
  await expect(call).rejects.toThrow();
  await vi.waitFor(() => expect(watcher.answers).toHaveLength(1));
  expect((parseResultText(watcher.answers[0]!) as { error: string }).error).toBe('timeout');
  return handler;
}

describe('onLateOutcome', () => {
  it('hands an abandoned handler’s late result to the chain', async () => {
    const watcher = lateWatcher();
    const handler = await abandonedCall(watcher);
    expect(watcher.outcomes).toEqual([]);
    handler.settle({ ok: ok({ refund_id: 'R-1' }) });
    await vi.waitFor(() => expect(watcher.outcomes).toHaveLength(1));
    const late = watcher.outcomes[0]!;
    expect(late.error).toBeUndefined();
    expect(late.result?.isError).not.toBe(true);
    expect(late.result?.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
  });

  it('hands a late failure over model-facing, as the boundary would have answered it (secrets redacted)', async () => {
    const watcher = lateWatcher();
    const handler = await abandonedCall(watcher);
    handler.settle({ ok: fail('unavailable', 'The payment API said: invalid password=hunter22') });
    await vi.waitFor(() => expect(watcher.outcomes).toHaveLength(1));
    const late = watcher.outcomes[0]!;
    expect((parseResultText(late.result!) as { error: string }).error).toBe('unavailable');
    expect(JSON.stringify(late.result)).not.toContain('hunter22');
  });

  it('hands a late ToolError as the model would have seen it, and any other throw as an error', async () => {
    const first = lateWatcher();
    const one = await abandonedCall(first);
    one.settle({ throw: new ToolError('not_found', 'Order A-9 does not exist.') });
    await vi.waitFor(() => expect(first.outcomes).toHaveLength(1));
    expect((parseResultText(first.outcomes[0]!.result!) as { error: string }).error).toBe('not_found');
    await client?.close();
    client = undefined;

    const second = lateWatcher();
    const two = await abandonedCall(second);
    const crash = Object.assign(new Error('connect ECONNREFUSED 10.0.3.7:5432'), { code: 'ECONNREFUSED' });
    two.settle({ throw: crash });
    await vi.waitFor(() => expect(second.outcomes).toHaveLength(1));
    expect(second.outcomes[0]!.result).toBeUndefined();
    expect(second.outcomes[0]!.error).toBe(crash);
  });

  it('hands the handler’s outcome over when a middleware’s deadline answered for it', async () => {
    const watcher = lateWatcher();
    const handler = stubborn();
    const c = await serve(handler.tool, [watcher.middleware, answerTimeoutAfter(20)], {
      abandonAfterMs: false,
    });
    const answer = await c.callTool('refund', {}, { timeoutMs: 10_000 });
    expect(answer.isError).toBe(true);
    handler.settle({ ok: ok({ refund_id: 'R-2' }) });
    await vi.waitFor(() => expect(watcher.outcomes).toHaveLength(1));
    expect(JSON.stringify(watcher.outcomes[0]!.result)).toContain('R-2');
  });

  describe('a handler that settles after a deadline answered, while the chain outside is still finishing', () => {
    /** Goes on for a turn of the event loop after its answer (as idempotency awaits a store write). */
    function finishesLater(onAnswer: () => void): ToolMiddleware {
      return async (_ctx, next) => {
        const result = await next();
        onAnswer();
        await new Promise((resolve) => setImmediate(resolve));
        return result;
      };
    }

    it('is handed to a listener that asked before it settled', async () => {
      const watcher = lateWatcher();
      const handler = stubborn();
      const c = await serve(
        handler.tool,
        [
          finishesLater(() => handler.settle({ ok: ok({ refund_id: 'R-4' }) })),
          watcher.middleware,
          answerTimeoutAfter(20),
        ],
        { abandonAfterMs: false },
      );
      const answer = await c.callTool('refund', {}, { timeoutMs: 10_000 });
      expect((parseResultText(answer) as { error: string }).error).toBe('timeout');
      await vi.waitFor(() => expect(watcher.outcomes).toHaveLength(1));
      expect(JSON.stringify(watcher.outcomes[0]!.result)).toContain('R-4');
    });

    it('is handed to a listener that asked after it settled, and a throw as an error', async () => {
      const watcher = lateWatcher();
      const handler = stubborn();
      const crash = new Error('connection reset by peer');
      const c = await serve(
        handler.tool,
        [watcher.middleware, finishesLater(() => handler.settle({ throw: crash })), answerTimeoutAfter(20)],
        { abandonAfterMs: false },
      );
      const answer = await c.callTool('refund', {}, { timeoutMs: 10_000 });
      expect((parseResultText(answer) as { error: string }).error).toBe('timeout');
      await vi.waitFor(() => expect(watcher.outcomes).toHaveLength(1));
      expect(watcher.outcomes[0]!.result).toBeUndefined();
      expect(watcher.outcomes[0]!.error).toBe(crash);
    });

    it('is not handed over when the answer was the handler’s own (an in-time failure, its own timeout)', async () => {
      for (const own of [
        fail('unavailable', 'The payment service did not answer.'),
        fail('timeout', 'Too slow.'),
      ]) {
        const watcher = lateWatcher();
        const tool = defineTool({
          name: 'refund',
          description: 'Fails at once.',
          input: {},
          handler: async () => own,
        });
        const c = await serve(
          tool,
          [watcher.middleware, finishesLater(() => {}), answerTimeoutAfter(5_000)],
          {
            abandonAfterMs: false,
          },
        );
        const answer = await c.callTool('refund', {}, { timeoutMs: 10_000 });
        expect(answer.isError).toBe(true);
        expect(watcher.answers).toHaveLength(1);
        // A hand-over is queued in a microtask at the end of the chain: a turn later it would be here.
        await new Promise((resolve) => setImmediate(resolve));
        expect(watcher.outcomes).toEqual([]);
        await client?.close();
        client = undefined;
      }
    });
  });

  it('never calls a listener for a handler that settled in time', async () => {
    const outcomes: LateOutcome[] = [];
    const tool = defineTool({
      name: 'quick',
      description: 'Answers at once.',
      input: {},
      handler: async () => ok({ done: true }),
    });
    const c = await serve(
      tool,
      [
        async (ctx, next) => {
          onLateOutcome(ctx, (outcome) => outcomes.push(outcome));
          return next();
        },
      ],
      {},
    );
    expect((await c.callTool('quick', {})).isError).not.toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(outcomes).toEqual([]);
  });

  it('logs a listener that throws and still calls the others, once each', async () => {
    const logs: LogEntry[] = [];
    const calls: string[] = [];
    const watcher = lateWatcher();
    const handler = await abandonedCall(watcher, logs, [
      async (ctx, next) => {
        const result = await next();
        onLateOutcome(ctx, () => {
          calls.push('thrower');
          throw new Error('listener bug');
        });
        onLateOutcome(ctx, () => calls.push('second'));
        return result;
      },
    ]);
    handler.settle({ ok: ok({ refund_id: 'R-3' }) });
    await vi.waitFor(() => expect(watcher.outcomes).toHaveLength(1));
    expect(calls).toEqual(['thrower', 'second']);
    expect(logs.some((entry) => entry.message === 'a late-outcome listener threw')).toBe(true);
  });

  it('refuses a listener that is not a function', () => {
    expect(() => onLateOutcome({} as never, 'nope' as never)).toThrow(/listener must be a function/);
  });
});
