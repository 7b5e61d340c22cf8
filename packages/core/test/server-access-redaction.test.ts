// What a call sends the client while it runs (progress, log messages, sampling and elicitation
// requests) reaches the client and, through sampling, the client's model directly. A handler that asks
// the model to explain an upstream's failure, or shows the person a message built from one, must not
// carry the upstream's secrets there; and the scrubbing a server installed for failures (a global
// middleware's `scrubText`, as @toolgate/redact-errors has) covers these diagnostic channels too.
import type {
  CreateMessageRequest,
  CreateMessageResult,
  ElicitRequest,
} from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  defineTool,
  type NextFn,
  ok,
  REDACTED,
  type ToolContext,
  type ToolMiddleware,
} from '../src/index.js';
import { serveTools, type TestClient } from '../src/testing.js';

let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

const R = REDACTED;
const STRIPE = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc';
const UPSTREAM = 'postgres://app:hunter2pw@db.internal:5432/orders';
// A 1x1 PNG: base64 a secret pattern must never touch.
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

type SampleParams = CreateMessageRequest['params'];

/** A client's sampling handler that records each request and answers `summary`. */
function sampled(): { params: SampleParams[]; onSample: (p: SampleParams) => CreateMessageResult } {
  const params: SampleParams[] = [];
  return {
    params,
    onSample: (p) => {
      params.push(p);
      return { role: 'assistant', model: 'test', content: { type: 'text', text: 'summary' } };
    },
  };
}

describe('sampling requests a call sends', () => {
  const explain = defineTool({
    name: 'explain_failure',
    description: "Asks the client's model to explain an upstream failure.",
    input: {},
    handler: async (_args, ctx) => {
      const answer = await ctx.server.sample({
        systemPrompt: `You explain errors. Support key: ${STRIPE}`,
        messages: [
          { role: 'user', content: { type: 'text', text: `Explain: connect to ${UPSTREAM} refused` } },
          { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
          {
            role: 'user',
            content: [
              { type: 'text', text: 'retried with Authorization: Bearer tok_8f7e6d5c4b3a2910' },
              {
                type: 'tool_result',
                toolUseId: 'u1',
                content: [{ type: 'text', text: `token=${STRIPE}` }],
              },
            ],
          },
        ],
        metadata: { upstream: UPSTREAM },
        maxTokens: 50,
      });
      return ok({ text: answer.content.type === 'text' ? answer.content.text : '' });
    },
  });

  it("redacts secrets from every text the client's model reads, and leaves payloads and roles alone", async () => {
    const { params, onSample } = sampled();
    client = await serveTools([explain], { onSample });
    expect(await client.callToolJson('explain_failure', {})).toEqual({ ok: true, text: 'summary' });
    expect(params).toEqual([
      {
        systemPrompt: `You explain errors. Support key: ${R}`,
        messages: [
          {
            role: 'user',
            content: {
              type: 'text',
              text: `Explain: connect to postgres://${R}@db.internal:5432/orders refused`,
            },
          },
          { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
          {
            role: 'user',
            content: [
              { type: 'text', text: `retried with Authorization: Bearer ${R}` },
              { type: 'tool_result', toolUseId: 'u1', content: [{ type: 'text', text: `token=${R}` }] },
            ],
          },
        ],
        metadata: { upstream: `postgres://${R}@db.internal:5432/orders` },
        maxTokens: 50,
      },
    ]);
    expect(JSON.stringify(params)).not.toContain('hunter2pw');
    expect(JSON.stringify(params)).not.toContain('4eC39HqLyjWDarjtT1zdp7dc');
  });
});

describe('elicitation requests a call sends', () => {
  it('redacts secrets from the message and the form, keeping its fields and the page URL', async () => {
    const ask = defineTool({
      name: 'ask_rotate',
      description: 'Asks the person whether to rotate a key.',
      input: {},
      handler: async (_args, ctx) => {
        const form = await ctx.server.elicit({
          message: `The key ${STRIPE} was refused by ${UPSTREAM}. Rotate it?`,
          requestedSchema: {
            type: 'object',
            properties: {
              password: { type: 'string', title: 'New password', description: `not ${STRIPE}` },
              rotate: { type: 'boolean', default: true },
            },
            required: ['password'],
          },
        });
        const page = await ctx.server.elicit({
          mode: 'url',
          message: `Sign in again (old token=${STRIPE}).`,
          url: 'https://orders.example/confirm?token=c_91827364',
          elicitationId: 'e-1',
        });
        return ok({ actions: [form.action, page.action] });
      },
    });
    const asked: ElicitRequest['params'][] = [];
    client = await serveTools([ask], {
      elicitUrl: true,
      onElicit: (params) => {
        asked.push(params);
        return { action: 'decline' };
      },
    });
    expect(await client.callToolJson('ask_rotate', {})).toEqual({
      ok: true,
      actions: ['decline', 'decline'],
    });
    expect(asked).toEqual([
      {
        mode: 'form',
        message: `The key ${R} was refused by postgres://${R}@db.internal:5432/orders. Rotate it?`,
        requestedSchema: {
          type: 'object',
          properties: {
            password: { type: 'string', title: 'New password', description: `not ${R}` },
            rotate: { type: 'boolean', default: true },
          },
          required: ['password'],
        },
      },
      {
        mode: 'url',
        message: `Sign in again (old token=${R}).`,
        url: 'https://orders.example/confirm?token=c_91827364',
        elicitationId: 'e-1',
      },
    ]);
  });
});

describe("a global middleware's scrubText hook", () => {
  // Stands in for @toolgate/redact-errors: removes an internal host name (no secret pattern knows it).
  const scrubber: ToolMiddleware = Object.assign((_ctx: ToolContext, next: NextFn) => next(), {
    scrubText: (text: string, ctx: ToolContext) =>
      ctx.toolName === 'opted_out' ? text : text.replaceAll('db-primary.corp', '[host]'),
  });
  const HOST = 'db-primary.corp';
  const chatty = (name: string) =>
    defineTool({
      name,
      description: 'Reports progress, logs and asks the model.',
      input: {},
      handler: async (_args, ctx) => {
        await ctx.server.progress(1, 2, `retrying ${HOST} with token=${STRIPE}`);
        await ctx.server.log('error', { upstream: `${HOST} refused`, [HOST]: 'down' }, `pool ${HOST}`);
        await ctx.server.sample({
          messages: [{ role: 'user', content: { type: 'text', text: `Explain: ${HOST} refused` } }],
          maxTokens: 10,
        });
        await ctx.server.elicit({
          message: `Retry ${HOST}?`,
          requestedSchema: { type: 'object', properties: {} },
        });
        return ok();
      },
    });

  it('scrubs progress, log messages and sampling requests as it scrubs failures (elicitation: secrets only)', async () => {
    const progress: unknown[] = [];
    const elicited: unknown[] = [];
    const { params, onSample } = sampled();
    client = await serveTools([chatty('chatty'), chatty('opted_out')], {
      middleware: [scrubber],
      onSample,
      onElicit: (p) => {
        elicited.push(p.message);
        return { action: 'decline' };
      },
    });
    await client.callTool('chatty', {}, { onProgress: (p) => progress.push(p) });
    await client.callTool('opted_out', {}, { onProgress: (p) => progress.push(p) });
    expect(progress).toEqual([
      { progress: 1, total: 2, message: `retrying [host] with token=${R}` },
      { progress: 1, total: 2, message: `retrying ${HOST} with token=${R}` },
    ]);
    expect(client.notifications.map((n) => n.params)).toEqual([
      { level: 'error', data: { upstream: '[host] refused', '[host]': 'down' }, logger: 'pool [host]' },
      { level: 'error', data: { upstream: `${HOST} refused`, [HOST]: 'down' }, logger: `pool ${HOST}` },
    ]);
    expect(params.map((p) => p.messages[0]?.content)).toEqual([
      { type: 'text', text: 'Explain: [host] refused' },
      { type: 'text', text: `Explain: ${HOST} refused` },
    ]);
    // The person reads an elicitation (confirm renders the model's own arguments there): secret
    // patterns apply, internal-detail scrubbers would garble it, as for a confirmation prompt.
    expect(elicited).toEqual([`Retry ${HOST}?`, `Retry ${HOST}?`]);
  });
});
