import type { ElicitRequest, ElicitResult } from '@modelcontextprotocol/sdk/types.js';
import type { PolicyDecision } from '@toolgate/core';
import { expectFailure, serveTools } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { createConfirm, DECLINED_HINT } from '../src/index.js';
import { decisionsOf, refundTool, SECRET, sleep } from './fixtures.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

async function withPerson(answer: (params: ElicitRequest['params']) => ElicitResult | Promise<ElicitResult>) {
  const { tool, runs } = refundTool();
  const asked: ElicitRequest['params'][] = [];
  const decisions: PolicyDecision[][] = [];
  const client = await serveTools([tool], {
    middleware: [decisionsOf(decisions), createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
    onElicit: (params) => {
      asked.push(params);
      return answer(params);
    },
  });
  closers.push(() => client.close());
  return { client, runs, asked, decisions };
}

const DIGEST = expect.stringMatching(/^[0-9a-f]{32}$/);

describe('confirm: a client with elicitation asks the person', () => {
  it('shows the concrete effect; accept runs the handler once and records the digest', async () => {
    const { client, runs, asked, decisions } = await withPerson(() => ({ action: 'accept', content: {} }));
    const result = await client.callTool('create_refund', { order_id: 'A-1', amount: 25 });
    expect(result.structuredContent).toEqual({ ok: true, refund_id: 'R-1' });
    expect(runs.count).toBe(1);
    expect(asked).toEqual([
      {
        mode: 'form',
        message: 'Run "Refund an order"?\nTool: create_refund\nArguments:\n  order_id: "A-1"\n  amount: 25',
        requestedSchema: { type: 'object', properties: {} },
      },
    ]);
    expect(decisions).toEqual([[{ by: 'confirm', action: 'confirmed', detail: { digest: DIGEST } }]]);
  });

  it('decline refuses with a hint the model must not work around; the handler never runs', async () => {
    const { client, runs, decisions } = await withPerson(() => ({ action: 'decline' }));
    const envelope = expectFailure(await client.callTool('create_refund', { order_id: 'A-1', amount: 25 }));
    expect(envelope).toEqual({
      ok: false,
      error: 'permission_denied',
      message: 'The user declined this request.',
      hint: DECLINED_HINT,
      retryable: false,
    });
    expect(DECLINED_HINT).toBe(
      'The user declined. Do not retry or rephrase to get around it; ask the user what they want instead.',
    );
    expect(runs.count).toBe(0);
    expect(decisions).toEqual([
      [{ by: 'confirm', action: 'declined', reason: 'decline', detail: { digest: DIGEST } }],
    ]);
  });

  it('cancel refuses the same way', async () => {
    const { client, runs } = await withPerson(() => ({ action: 'cancel' }));
    const envelope = expectFailure(await client.callTool('create_refund', { order_id: 'A-1', amount: 25 }));
    expect(envelope).toMatchObject({
      error: 'permission_denied',
      message: 'The user dismissed the confirmation without accepting.',
      hint: DECLINED_HINT,
    });
    expect(runs.count).toBe(0);
  });

  it('control, bidirectional and zero-width characters never reach the prompt', async () => {
    const { client, asked } = await withPerson(() => ({ action: 'decline' }));
    const note = 'ok\u202Eevil\u2066x\u2069\u200E\u200F\u0007\u0085\u200B end';
    await client.callTool('create_refund', { order_id: 'A-1', amount: 25, note });
    const message = (asked[0] as { message: string }).message;
    expect(message).toBe(
      'Run "Refund an order"?\nTool: create_refund\nArguments:\n  order_id: "A-1"\n  amount: 25\n  note: "ok\uFFFDevil\uFFFDx\uFFFD\uFFFD\uFFFD\\u0007\uFFFD\uFFFD end"',
    );
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the test looks for them.
    const unsafe = /[\u0000-\u0009\u000B-\u001F\u007F-\u009F\u200B-\u200F\u202A-\u202E\u2066-\u2069]/;
    expect(message).not.toMatch(unsafe);
  });

  it('a long argument is cut, and the prompt says how much was not shown', async () => {
    const { client, asked } = await withPerson(() => ({ action: 'decline' }));
    await client.callTool('create_refund', { order_id: 'A-1', amount: 25, note: 'x'.repeat(5000) });
    const message = (asked[0] as { message: string }).message;
    expect(message.length).toBeLessThanOrEqual(1500);
    expect(message).toMatch(/ … \(\d+ more characters not shown\)$/);
  });

  it('a call cancelled while the person decides never runs, even if they accept later', async () => {
    let accept: () => void = () => {};
    const { client, runs } = await withPerson(
      () =>
        new Promise<ElicitResult>((resolve) => {
          accept = () => resolve({ action: 'accept', content: {} });
        }),
    );
    const controller = new AbortController();
    const call = client.callTool(
      'create_refund',
      { order_id: 'A-1', amount: 25 },
      { signal: controller.signal },
    );
    await sleep(50);
    controller.abort();
    await expect(call).rejects.toThrow();
    accept();
    await sleep(50);
    expect(runs.count).toBe(0);
  });

  it('a tool that did not opt in runs without asking', async () => {
    const { tool, runs } = refundTool('get_refund_status');
    const asked: unknown[] = [];
    const client = await serveTools([tool], {
      middleware: [createConfirm({ secret: SECRET, tools: { create_refund: {} } })],
      onElicit: (params) => {
        asked.push(params);
        return { action: 'decline' };
      },
    });
    closers.push(() => client.close());
    expect(
      (await client.callTool('get_refund_status', { order_id: 'A-1', amount: 1 })).isError,
    ).toBeUndefined();
    expect(runs.count).toBe(1);
    expect(asked).toEqual([]);
  });

  it('describe() opens the prompt with the effect in words', async () => {
    const { tool } = refundTool();
    const asked: ElicitRequest['params'][] = [];
    const client = await serveTools([tool], {
      middleware: [
        createConfirm({
          secret: SECRET,
          tools: {
            create_refund: { describe: (args) => `Refund ${args.amount} EUR on order ${args.order_id}` },
          },
        }),
      ],
      onElicit: (params) => {
        asked.push(params);
        return { action: 'accept', content: {} };
      },
    });
    closers.push(() => client.close());
    await client.callTool('create_refund', { order_id: 'A-1', amount: 25 });
    expect((asked[0] as { message: string }).message.split('\n')[0]).toBe('Refund 25 EUR on order A-1');
  });
});

describe('createConfirm: options', () => {
  it('requires a secret of at least 32 bytes', () => {
    const message =
      'createConfirm: secret is required, at least 32 bytes (random, from a secret store, the same on every replica)';
    expect(() => createConfirm({ secret: 'short' })).toThrow(message);
    expect(() => createConfirm({} as never)).toThrow(message);
  });
  it('refuses a per-tool option it does not know', () => {
    expect(() => createConfirm({ secret: SECRET, tools: { create_refund: { ttl: 5 } as never } })).toThrow(
      'createConfirm: tools.create_refund has unknown option(s) ttl',
    );
  });
});
