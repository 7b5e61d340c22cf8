// What the model or client reads besides a call's result: progress and log notifications and sampling
// requests a handler sends while it runs, and secrets disguised by characters no one sees. Each through
// a real SDK client, with the middleware listed globally as a server lists it.
import type { CreateMessageRequest } from '@modelcontextprotocol/sdk/types.js';
import { defineTool, fail, ok, REDACTED } from '@toolgate/core';
import { recordingLogger, serveTools, type TestClient } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRedactErrors } from '../src/index.js';
import { seenEnvelope } from './helpers.js';

const R = REDACTED;
const open: TestClient[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((client) => client.close()));
});

const STRIPE = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc';
// What a careless handler says while it retries: a stack frame, a host and port, a secret hidden in
// base64 (a `state` parameter), and a Stripe key split by a zero-width space.
const ENCODED = Buffer.from('{"client_secret":"hunter2-XYZ-abc"}').toString('base64');
const CHATTER = [
  'at connect (/srv/app/db.js:10:5)',
  'connect ECONNREFUSED 10.0.0.5:5432',
  `state=${ENCODED}`,
  `key ${STRIPE.slice(0, 3)}\u200b${STRIPE.slice(3)}`,
];
const CHATTER_LEAKS = ['/srv/app', '10.0.0.5', ENCODED, STRIPE.slice(8)];

function chattyTool(name: string) {
  return defineTool({
    name,
    description: 'Reports progress, logs and asks the model while it retries (test).',
    input: {},
    handler: async (_args, ctx) => {
      for (const line of CHATTER) {
        await ctx.server.progress(1, 2, `retrying: ${line}`);
        await ctx.server.log('warning', { upstream: line, [line]: 'seen' }, `pool ${line}`);
      }
      await ctx.server.sample({
        messages: [{ role: 'user', content: { type: 'text', text: `Explain: ${CHATTER.join('; ')}` } }],
        maxTokens: 20,
      });
      return ok();
    },
  });
}

describe('progress, log messages and sampling requests during a call', () => {
  it('carry no path, host, encoded or disguised secret to the client', async () => {
    const progress: { message?: string }[] = [];
    const sampled: CreateMessageRequest['params'][] = [];
    const client = await serveTools([chattyTool('chatty')], {
      middleware: [createRedactErrors({ logger: recordingLogger([]) })],
      logger: recordingLogger([]),
      onSample: (params) => {
        sampled.push(params);
        return { role: 'assistant', model: 'test', content: { type: 'text', text: 'ok' } };
      },
    });
    open.push(client);
    expect((await client.callTool('chatty', {}, { onProgress: (p) => progress.push(p) })).isError).toBe(
      undefined,
    );
    expect(progress.map((p) => p.message)).toEqual([
      'retrying: at connect ([path])',
      'retrying: connect ECONNREFUSED [host]',
      `retrying: state=${R}`,
      `retrying: key ${R}`,
    ]);
    expect(client.notifications.map((n) => n.params)).toEqual([
      // A frame alone on its line goes whole, as in a failure.
      { level: 'warning', data: { upstream: '', '': 'seen' }, logger: 'pool at connect ([path])' },
      {
        level: 'warning',
        data: { upstream: 'connect ECONNREFUSED [host]', 'connect ECONNREFUSED [host]': 'seen' },
        logger: 'pool connect ECONNREFUSED [host]',
      },
      {
        level: 'warning',
        data: { upstream: `state=${R}`, [`state=${R}`]: 'seen' },
        logger: `pool state=${R}`,
      },
      { level: 'warning', data: { upstream: `key ${R}`, [`key ${R}`]: 'seen' }, logger: `pool key ${R}` },
    ]);
    expect(sampled.map((p) => p.messages[0]?.content)).toEqual([
      {
        type: 'text',
        text: `Explain: at connect ([path]); connect ECONNREFUSED [host]; state=${R}; key ${R}`,
      },
    ]);
    const seen = JSON.stringify([progress, client.notifications, sampled]);
    for (const leak of CHATTER_LEAKS) expect(seen, leak).not.toContain(leak);
  });

  it('of a tool opted out with tools: { name: false } get core’s secret patterns only', async () => {
    const progress: { message?: string }[] = [];
    const client = await serveTools([chattyTool('raw_debug')], {
      middleware: [createRedactErrors({ logger: recordingLogger([]), tools: { raw_debug: false } })],
      logger: recordingLogger([]),
      onSample: () => ({ role: 'assistant', model: 'test', content: { type: 'text', text: 'ok' } }),
    });
    open.push(client);
    await client.callTool('raw_debug', {}, { onProgress: (p) => progress.push(p) });
    expect(progress.map((p) => p.message)).toEqual(CHATTER.map((line) => `retrying: ${line}`));
  });
});

describe('invisible characters that are not format characters, inside a secret', () => {
  // Unicode's default-ignorable code points outside the format category: a combining grapheme joiner,
  // a variation selector, Hangul fillers, a Mongolian variation selector. None is drawn; a model reads
  // through them.
  const disguised = defineTool({
    name: 'disguised',
    description: 'Fails with what the upstream said, in its message and _meta (test).',
    input: { text: z.string(), key: z.string() },
    handler: ({ text, key }) => {
      const result = fail('unavailable', `Upstream said: ${text}`);
      result._meta = { ...result._meta, 'acme/config': { [key]: 'opaque-vault-value' } };
      return result;
    },
  });
  const IGNORABLE = /\p{Default_Ignorable_Code_Point}/gu;

  it.each([
    ['a combining grapheme joiner in a Stripe key', `key sk_l\u034five_${STRIPE.slice(8)}`, STRIPE.slice(8)],
    [
      'a variation selector in a GitHub token',
      'ghp\ufe0f_16C7e42F292c6912E7710c838347Ae178B4a',
      '16C7e42F292c',
    ],
    ['a Hangul filler in a password key', 'pass\u3164word=hunter2', 'hunter2'],
    ['a halfwidth Hangul filler in a connection URL', 'postgres\uffa0://admin:hunter2@db:5432/x', 'hunter2'],
    [
      'a Mongolian variation selector in an IP address',
      'connect ECONNREFUSED 10.0\u180b.3.7:5432',
      '10.0.3.7',
    ],
  ])('%s never reaches the model', async (_name, text, secret) => {
    const client = await serveTools([disguised], {
      middleware: [createRedactErrors({ logger: recordingLogger([]) })],
      logger: recordingLogger([]),
    });
    open.push(client);
    const result = await client.callTool('disguised', { text, key: 'note' });
    const { message } = seenEnvelope(result);
    expect(message).toMatch(/^Upstream said: /);
    expect(message.replace(IGNORABLE, '').normalize('NFKC')).not.toContain(secret);
  });

  it('a value under a key name split by one is replaced whole (in _meta, through core’s key rule)', async () => {
    const client = await serveTools([disguised], {
      middleware: [createRedactErrors({ logger: recordingLogger([]) })],
      logger: recordingLogger([]),
    });
    open.push(client);
    const keys = ['pass\u034fword', 'api\ufe0f_key', 'to\u3164ken', 'se\u180bcret'];
    for (const key of keys) {
      const result = await client.callTool('disguised', { text: 'down', key });
      expect(result._meta?.['acme/config'], key).toEqual({ [key]: R });
    }
  });
});
