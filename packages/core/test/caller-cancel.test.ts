import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cancelledResult,
  defineTool,
  isCallerCancel,
  registerTools,
  type ToolMiddleware,
  type ToolResult,
} from '../src/index.js';
import { createTestContext } from '../src/test-context.js';
import { connectTestClient, type LogEntry, recordingLogger, type TestClient } from '../src/testing.js';

// A client's `notifications/cancelled` carries a reason the client wrote; the SDK aborts the call's
// signal with it as it is (a string), and fetch, a store or a deadline reject with that string. It was
// answered `internal` and logged at error level with the client's text, an incident the client authored.

const REASON = 'ALERT: database password rotated, page on-call';

let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

describe('a call its caller cancelled', () => {
  it('failing with what the cancel made is answered timeout and logged at info, without the reason', async () => {
    const logs: LogEntry[] = [];
    const thrown: unknown[] = [];
    // What a middleware sees: the reason itself, thrown up the chain; core's last resort answers it.
    const observer: ToolMiddleware = async (_ctx, next) => {
      try {
        return await next();
      } catch (error) {
        thrown.push(error);
        throw error;
      }
    };
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const tool = defineTool({
      name: 'lookup',
      description: 'Waits for its dependency, which rejects with the abort reason (as fetch does).',
      input: {},
      handler: (_args, ctx) =>
        new Promise<ToolResult>((_resolve, reject) => {
          started();
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
        }),
    });
    const server = new McpServer({ name: 'test', version: '1.0.0' });
    registerTools(server, [tool], { middleware: [observer], logger: recordingLogger(logs) });
    client = await connectTestClient(server);
    const controller = new AbortController();
    const call = client.callTool('lookup', {}, { signal: controller.signal });
    await running;
    controller.abort(REASON);
    await expect(call).rejects.toThrow();
    await expect.poll(() => logs.length).toBeGreaterThan(0);
    expect(thrown).toEqual([REASON]);
    expect(logs.filter((entry) => entry.level === 'error' || entry.level === 'warn')).toEqual([]);
    expect(logs).toContainEqual({
      level: 'info',
      fields: { tool: 'lookup', requestId: expect.anything() },
      message: 'tool call cancelled by the client',
    });
    expect(JSON.stringify(logs)).not.toContain('ALERT');
  });

  it('is answered like a breaker answers a cancel', () => {
    expect(cancelledResult('lookup')).toMatchObject({
      isError: true,
      _meta: {
        'toolgate/error': {
          ok: false,
          error: 'timeout',
          message: 'lookup was cancelled before it finished.',
          hint: 'The request was cancelled. Call again only if the answer is still needed.',
          retryable: true,
        },
      },
    });
  });

  it('tells the cancel apart from a failure of its own', () => {
    const controller = new AbortController();
    const ctx = createTestContext({ request: { signal: controller.signal } });
    // Not cancelled: nothing is the caller's cancel.
    expect(isCallerCancel(ctx, REASON)).toBe(false);
    controller.abort(REASON);
    expect(isCallerCancel(ctx, REASON)).toBe(true);
    expect(isCallerCancel(ctx, new Error('wrapped', { cause: REASON }))).toBe(false);
    const reasonError = new Error('the client went away');
    const other = new AbortController();
    other.abort(reasonError);
    const withError = createTestContext({ request: { signal: other.signal } });
    expect(isCallerCancel(withError, reasonError)).toBe(true);
    expect(isCallerCancel(withError, new Error('fetch failed', { cause: reasonError }))).toBe(true);
    expect(isCallerCancel(withError, new DOMException('aborted', 'AbortError'))).toBe(true);
    // A real failure while cancelled stays a failure (its own incident).
    expect(isCallerCancel(withError, new TypeError('x is not a function'))).toBe(false);
    expect(isCallerCancel(withError, 'some other string')).toBe(false);
  });

  it('a handler that outlives its cancel and then throws the reason is logged at info, without it', async () => {
    const logs: LogEntry[] = [];
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    let stop: () => void = () => {};
    const tool = defineTool({
      name: 'write',
      description: 'Waits for a lock, then looks at its signal (`throwIfAborted`).',
      input: {},
      handler: (_args, ctx) =>
        new Promise<ToolResult>((_resolve, reject) => {
          started();
          stop = () => {
            try {
              ctx.signal.throwIfAborted();
            } catch (error) {
              reject(error);
            }
          };
        }),
    });
    const server = new McpServer({ name: 'test', version: '1.0.0' });
    registerTools(server, [tool], { logger: recordingLogger(logs), abandonAfterMs: 10 });
    client = await connectTestClient(server);
    const controller = new AbortController();
    const call = client.callTool('write', {}, { signal: controller.signal });
    await running;
    controller.abort(REASON);
    await expect(call).rejects.toThrow();
    // Abandoned (answered timeout, a warn line of core's own), then the lock frees and the work stops.
    await expect.poll(() => logs.length).toBe(1);
    stop();
    await expect.poll(() => logs.length).toBe(2);
    expect(logs[1]).toMatchObject({
      level: 'info',
      message: 'abandoned handler stopped after its call was answered',
      fields: { tool: 'write', cancelled: true },
    });
    expect(JSON.stringify(logs)).not.toContain('ALERT');
  });
});
