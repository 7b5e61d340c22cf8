// Red team, round 28: a connection string's credentials cut from it. A log formatter wraps a long line
// at a fixed width, or a handler joins pieces with a space, and the break can fall anywhere in the URL:
// after `postgres:`, inside `//app:`, right before the password. The scheme's rule then sees only part
// of the URL, and the password was left standing before the host (`S3cr3t@[host]`). Through a real
// SDK client, in the message, a `_meta` value and a progress message.
import { defineTool, fail, type ToolDefinition, type ToolResult } from '@toolgate/core';
import { recordingLogger, serveTools, type TestClient } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { createRedactErrors } from '../src/index.js';

const PASSWORD = 'Wr4pped-S3cret';
const URLS = [
  `postgres://app:${PASSWORD}@10.1.2.3:5432/orders`,
  `redis://:${PASSWORD}@cache.corp.internal:6379/0`,
  `mongodb+srv://app:${PASSWORD}@cluster0.rt.mongodb.net/shop`,
  `amqp://app:${PASSWORD}@[fd00::5]:5672/vhost`,
];
// What may not show: any 6 characters of the password, and the hosts.
const PLANTED = [
  PASSWORD.slice(0, 6),
  PASSWORD.slice(4, 10),
  PASSWORD.slice(-6),
  '10.1.2.3',
  'cluster0.rt',
  'fd00::5',
];

const open: TestClient[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((client) => client.close()));
});

/** `url` broken at `at` by `separator`, as a wrapped log line or a joined list shows it. */
function broken(url: string, at: number, separator: string): string {
  return `retrying ${url.slice(0, at)}${separator}${url.slice(at)} (attempt 3)`;
}

describe('a connection string broken by a line break or a space', () => {
  it('shows no piece of the password and no host, wherever the break falls', async () => {
    const state: { text: string } = { text: '' };
    const tool = defineTool({
      name: 'sync_orders',
      description: 'Fails with a wrapped log line (test).',
      input: {},
      handler: async (_args, ctx): Promise<ToolResult> => {
        await ctx.server.progress(1, 2, state.text);
        const result = fail('unavailable', state.text);
        result._meta = { ...result._meta, 'acme/log': { line: state.text } };
        return result;
      },
    }) as ToolDefinition;
    const client = await serveTools([tool], {
      middleware: [createRedactErrors({ logger: recordingLogger([]) })],
      logger: recordingLogger([]),
    });
    open.push(client);
    let cases = 0;
    for (const url of URLS) {
      for (let at = 1; at < url.length; at++) {
        for (const separator of ['\n', ' ', '\r\n  ']) {
          state.text = broken(url, at, separator);
          const progress: unknown[] = [];
          const result = await client.callTool('sync_orders', {}, { onProgress: (p) => progress.push(p) });
          const seen = JSON.stringify([result, progress]);
          for (const planted of PLANTED)
            expect(seen, `${JSON.stringify(state.text)} → ${seen}`).not.toContain(planted);
          cases++;
        }
      }
    }
    expect(cases).toBeGreaterThan(400);
  });

  it('leaves e-mail addresses and ordinary colons alone', async () => {
    const tool = defineTool({
      name: 'notify_customer',
      description: 'Fails with a plain message (test).',
      input: {},
      handler: async () =>
        fail('unavailable', 'Mail to ann@example.com bounced: mailbox full. Retry at 14:30.'),
    }) as ToolDefinition;
    const client = await serveTools([tool], {
      middleware: [createRedactErrors({ logger: recordingLogger([]) })],
      logger: recordingLogger([]),
    });
    open.push(client);
    const result = await client.callTool('notify_customer', {});
    expect(JSON.stringify(result)).toContain(
      'Mail to ann@example.com bounced: mailbox full. Retry at 14:30.',
    );
  });
});
