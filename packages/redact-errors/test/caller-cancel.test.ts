import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  cancelledResult,
  defineTool,
  registerTools,
  type ToolContext,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import { connectTestClient, type LogEntry, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterEach, expect, it } from 'vitest';
import { createRedactErrors } from '../src/index.js';

// The SDK aborts a cancelled call's signal with the client's own reason text; a dependency rejects
// with it as it is. redact-errors answered that `internal`, under an incident id, with an error-level
// line quoting the client's text: an incident any client could author.

const REASON = 'ALERT: database password rotated, page on-call';

let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

it('a failure made by the caller’s cancel is answered timeout, with no incident and no reason text in the log', async () => {
  const logs: LogEntry[] = [];
  let seen: (answer: { result: ToolResult; ctx: ToolContext }) => void = () => {};
  const outcome = new Promise<{ result: ToolResult; ctx: ToolContext }>((resolve) => {
    seen = resolve;
  });
  const observer: ToolMiddleware = async (ctx, next) => {
    const result = await next();
    seen({ result, ctx });
    return result;
  };
  let started: () => void = () => {};
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  const tool = defineTool({
    name: 'track',
    description: 'Waits for a carrier that rejects with the abort reason, as fetch does.',
    input: {},
    handler: (_args, ctx) =>
      new Promise<ToolResult>((_resolve, reject) => {
        started();
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
      }),
  });
  const server = new McpServer({ name: 'test', version: '1.0.0' });
  registerTools(server, [tool], {
    middleware: [observer, createRedactErrors()],
    logger: recordingLogger(logs),
  });
  client = await connectTestClient(server);
  const controller = new AbortController();
  const call = client.callTool('track', {}, { signal: controller.signal });
  await running;
  controller.abort(REASON);
  await expect(call).rejects.toThrow();
  const { result, ctx } = await outcome;
  expect(result).toEqual(cancelledResult('track'));
  expect(ctx.incidentId).toBeUndefined();
  expect(ctx.decisions).toContainEqual({
    by: 'redact-errors',
    action: 'cancelled',
    reason: 'the caller cancelled the call',
  });
  expect(logs.filter((entry) => entry.level === 'error' || entry.level === 'warn')).toEqual([]);
  expect(logs.map((entry) => entry.message)).toContain('tool call cancelled by the client');
  expect(JSON.stringify(logs)).not.toContain('ALERT');
});
