// A log message's structured data passes the global middleware's `scrubValue` hook whole (keys and
// non-string values count), and `scrubText` on each string and key where a middleware has no value hook.
import { afterEach, describe, expect, it } from 'vitest';
import { defineTool, ok, type ToolDefinition, type ToolMiddleware } from '../src/index.js';
import { recordingLogger, serveTools, type TestClient } from '../src/testing.js';

let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

const chatty = defineTool({
  name: 'chatty',
  description: 'Logs what it retries (test).',
  input: {},
  handler: async (_args, ctx) => {
    await ctx.server.log('warning', { retrying: { host: 'db-7.internal', port: 54329 }, note: 'keep me' });
    return ok();
  },
}) as ToolDefinition;

const pass: ToolMiddleware = (_ctx, next) => next();

describe('scrubValue', () => {
  it('gets the whole log data, so a number under a key can go', async () => {
    const seen: unknown[] = [];
    const byValue = Object.assign(pass.bind(null), {
      scrubValue: (value: unknown) => {
        seen.push(value);
        const data = value as { retrying: Record<string, unknown>; note: string };
        return { ...data, retrying: { host: '[host]', port: '[port]' } };
      },
    });
    client = await serveTools([chatty], { middleware: [byValue], logger: recordingLogger([]) });
    await client.callTool('chatty', {});
    expect(seen).toEqual([{ retrying: { host: 'db-7.internal', port: 54329 }, note: 'keep me' }]);
    const sent = JSON.stringify(client.notifications);
    expect(sent).not.toContain('54329');
    expect(sent).not.toContain('db-7');
    expect(sent).toContain('keep me');
  });

  it('falls back to scrubText on each string and key, in the middleware order', async () => {
    const order: string[] = [];
    const first = Object.assign(pass.bind(null), {
      scrubValue: (value: unknown) => {
        order.push('value');
        return value;
      },
    });
    const second = Object.assign(pass.bind(null), {
      scrubText: (text: string) => {
        order.push(`text:${text}`);
        return text.replace('db-7.internal', '[host]');
      },
    });
    client = await serveTools([chatty], { middleware: [first, second], logger: recordingLogger([]) });
    await client.callTool('chatty', {});
    expect(order[0]).toBe('value');
    expect(order).toContain('text:db-7.internal');
    expect(order).toContain('text:retrying');
    const sent = JSON.stringify(client.notifications);
    expect(sent).not.toContain('db-7');
    expect(sent).toContain('54329');
  });
});
