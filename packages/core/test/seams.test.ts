import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import {
  type CallerIdentity,
  callKey,
  createMemoryStore,
  defineTool,
  ERROR_META_KEY,
  fail,
  identifyCaller,
  isPassThrough,
  limitStore,
  type NextFn,
  ok,
  optInTools,
  principalOf,
  raceAbort,
  resolveToolOptions,
  type ToolContext,
  ToolError,
  type ToolMiddleware,
  type ToolRequest,
  withDeadline,
  withdrawClientRequests,
} from '../src/index.js';
import {
  expectFailure,
  type LogEntry,
  parseResultText,
  recordingLogger,
  serveTools,
  type TestClient,
} from '../src/testing.js';

let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

function token(
  clientId: string,
  extra: Record<string, unknown>,
  scopes: string[] = ['orders:read'],
): AuthInfo {
  return { token: `t-${clientId}-${JSON.stringify(extra)}`, clientId, scopes, extra };
}

function requestWith(
  authInfo: AuthInfo | undefined,
  headers?: Record<string, string>,
  local = false,
): ToolRequest {
  return {
    id: 1,
    sessionId: undefined,
    authInfo,
    meta: undefined,
    headers,
    local,
    signal: new AbortController().signal,
  };
}

/** Records the context each call had, as the chain's outermost middleware saw it after the call. */
function recorder(seen: ToolContext[]): ToolMiddleware {
  return async (ctx, next) => {
    try {
      return await next();
    } finally {
      seen.push(ctx);
    }
  };
}

describe('caller identity', () => {
  it('is issuer + subject when the token has a subject, stable across refreshes', () => {
    const first = identifyCaller(
      requestWith(token('portal', { iss: 'https://id.example', sub: 'u1', exp: 1, iat: 1 })),
    );
    const refreshed = identifyCaller(
      requestWith(token('portal', { iss: 'https://id.example', sub: 'u1', exp: 999, iat: 5, jti: 'x' })),
    );
    expect(first).toEqual({
      id: 'sub:https://id.example|u1',
      kind: 'subject',
      subject: 'u1',
      issuer: 'https://id.example',
      clientId: 'portal',
    });
    expect(refreshed.id).toBe(first.id);
  });

  it('is the client id plus a digest of stable claims without a subject, so claims tell tokens apart', () => {
    // A person claim (`user_id`) keeps a holder one caller across refreshes; other claims tell tokens apart.
    const c42 = identifyCaller(requestWith(token('portal', { user_id: 'u1', customerId: 42, exp: 1 })));
    const c42later = identifyCaller(
      requestWith(token('portal', { user_id: 'u1', customerId: 42, exp: 2, iat: 2, nbf: 2 })),
    );
    const c43 = identifyCaller(requestWith(token('portal', { user_id: 'u1', customerId: 43, exp: 1 })));
    const moreScopes = identifyCaller(
      requestWith(token('portal', { user_id: 'u1', customerId: 42 }, ['orders:read', 'x'])),
    );
    expect(c42.kind).toBe('client');
    expect(c42.id).toMatch(/^client:portal#[A-Za-z0-9_-]{22}$/);
    expect(c42later.id).toBe(c42.id);
    expect(c43.id).not.toBe(c42.id);
    expect(moreScopes.id).not.toBe(c42.id);
  });

  it('tells apart two holders of one public client whose tokens say nothing about who holds them, by the token', async () => {
    // The SDK's introspection example reports a token as { token, clientId, scopes, expiresAt } and no
    // claims; a verifier that copies the introspection answer adds only claims about the token itself.
    // A public client's id (a Client ID Metadata Document URL) is the same for every installation.
    const app = 'https://app.example/client.json';
    const bare = (value: string): AuthInfo => ({ token: value, clientId: app, scopes: ['mcp:tools'] });
    const copied = (value: string): AuthInfo => ({
      ...bare(value),
      extra: {
        active: true,
        client_id: app,
        scope: 'mcp:tools',
        token_type: 'Bearer',
        iss: 'https://as',
        aud: 'x',
        exp: 9,
      },
    });
    const seen: ToolContext[] = [];
    const tool = defineTool({
      name: 'my_account',
      description: 'The calling account.',
      input: { section: z.string() },
      handler: (args, ctx) => ok({ section: args.section, token: ctx.request.authInfo?.token }),
    });
    for (const authInfo of [bare('tok-alice'), bare('tok-bob'), copied('tok-alice'), copied('tok-bob')]) {
      const caller = await serveTools([tool], { middleware: [recorder(seen)], authInfo });
      expect(parseResultText(await caller.callTool('my_account', { section: 'billing' }))).toEqual({
        ok: true,
        section: 'billing',
        token: authInfo.token,
      });
      await caller.close();
    }
    const ids = seen.map((ctx) => ctx.caller.id);
    for (const id of ids)
      expect(id).toMatch(/^client:https:\/\/app\.example\/client\.json#[A-Za-z0-9_-]{22}$/);
    expect(new Set(ids).size).toBe(4);
    expect(new Set(seen.map((ctx) => callKey(ctx))).size).toBe(4);
    // The same token is the same caller on every call; without a client id it is still the token.
    expect(identifyCaller(requestWith(bare('tok-alice'))).id).toBe(ids[0]);
    const noClient = (value: string) =>
      identifyCaller(requestWith({ token: value, scopes: [] } as unknown as AuthInfo)).id;
    expect(noClient('tok-alice')).not.toBe(noClient('tok-bob'));
    // An empty subject or claim names no one either.
    const empty = (value: string) =>
      identifyCaller(requestWith({ ...bare(value), extra: { sub: '', tenant: null } })).id;
    expect(empty('tok-alice')).not.toBe(empty('tok-bob'));
    // A person claim about the holder still decides alone, as before: refreshed tokens keep one
    // identity. A claim that may be shared (customerId: every user of one customer account) does not.
    expect(identifyCaller(requestWith({ ...bare('tok-1'), extra: { email: 'a@shop.example' } })).id).toBe(
      identifyCaller(requestWith({ ...bare('tok-2'), extra: { email: 'a@shop.example', exp: 5 } })).id,
    );
    expect(identifyCaller(requestWith({ ...bare('tok-1'), extra: { customerId: 42 } })).id).not.toBe(
      identifyCaller(requestWith({ ...bare('tok-2'), extra: { customerId: 42, exp: 5 } })).id,
    );
  });

  it('keeps issuer and subject apart: a | in either cannot make two callers one', () => {
    const id = (iss: string, sub: string) => identifyCaller(requestWith(token('portal', { iss, sub }))).id;
    expect(id('https://a', 'b|c')).not.toBe(id('https://a|b', 'c'));
    expect(id('https://a%7Cb', 'c')).not.toBe(id('https://a|b', 'c'));
    expect(id('https://id.example', 'u|1')).toBe('sub:https://id.example|u|1');
  });

  it('tells apart tokens that differ only in a claim named __proto__ (parsed JSON makes it an own key)', () => {
    const claims = (value: unknown) =>
      JSON.parse(`{"customerId":42,"__proto__":${JSON.stringify(value)}}`) as Record<string, unknown>;
    const a = identifyCaller(requestWith(token('portal', claims({ tenant: 'a' }))));
    const b = identifyCaller(requestWith(token('portal', claims({ tenant: 'b' }))));
    const plain = identifyCaller(requestWith(token('portal', { customerId: 42 })));
    expect(new Set([a.id, b.id, plain.id]).size).toBe(3);
    // Keys made before this stay valid: without such a claim the digest is what it always was.
    expect(plain.id).toBe(identifyCaller(requestWith(token('portal', { customerId: 42 }))).id);
  });

  it('reads sub and iss from the token alone, never through a prototype a copied __proto__ claim set', () => {
    // A verifier that copies claims with Object.assign turns a `__proto__` claim into the prototype.
    const copied = Object.assign(
      {},
      JSON.parse('{"customerId":7,"__proto__":{"sub":"victim","iss":"https://id"}}'),
    );
    expect((copied as { sub?: unknown }).sub).toBe('victim');
    const caller = identifyCaller(requestWith(token('portal', copied)));
    expect(caller.kind).toBe('client');
    expect(caller.id).not.toBe(
      identifyCaller(requestWith(token('portal', { iss: 'https://id', sub: 'victim' }))).id,
    );
    expect(principalOf({ request: requestWith(token('portal', copied)) })).toBe('portal');
  });

  it('writes an issuer that is not a string as JSON, so it is not the same caller as no issuer', () => {
    const id = (claims: Record<string, unknown>) => identifyCaller(requestWith(token('portal', claims))).id;
    expect(id({ iss: ['https://a'], sub: 'alice' })).toBe('sub:%J["https://a"]|alice');
    expect(id({ iss: ['https://a'], sub: 'alice' })).not.toBe(id({ sub: 'alice' }));
    // The array and the string that spells its JSON are two issuers.
    expect(id({ iss: ['https://a'], sub: 'alice' })).not.toBe(id({ iss: '["https://a"]', sub: 'alice' }));
    expect(id({ iss: 7, sub: 'alice' })).not.toBe(id({ iss: '7', sub: 'alice' }));
    expect(id({ iss: null, sub: 'alice' })).toBe('sub:|alice');
    expect(id({ iss: 7, sub: 'alice' })).not.toBe(id({ iss: '7x', sub: 'alice' }));
    expect(id({ iss: '', sub: 'alice' })).toBe(id({ sub: 'alice' }));
  });

  it('is local over a local transport, else the session when there is one, else anonymous', () => {
    expect(identifyCaller(requestWith(undefined, undefined, true)).id).toBe('local');
    expect(identifyCaller({ ...requestWith(undefined, { host: 'x' }), sessionId: 's1' }).id).toBe(
      'session:s1',
    );
    expect(identifyCaller(requestWith(undefined, { host: 'x' })).id).toBe('anonymous');
    // No headers is not stdio: a transport that fills no requestInfo (WebSocket, a queue) is remote.
    expect(identifyCaller(requestWith(undefined)).id).toBe('anonymous');
    expect(identifyCaller({ ...requestWith(undefined), sessionId: 'ws-1' }).id).toBe('session:ws-1');
    // A token still names its holder over a local transport.
    expect(identifyCaller(requestWith(token('portal', { sub: 'u1' }), undefined, true)).kind).toBe('subject');
  });

  it('rides on every call, with the values a tool binds from the caller, and keys include both', async () => {
    const seen: ToolContext[] = [];
    const scoped = defineTool({
      name: 'my_orders',
      description: 'The caller’s orders.',
      input: { status: z.string() },
      bind: (request) => {
        const customerId = request.authInfo?.extra?.customerId;
        if (typeof customerId !== 'number')
          throw new ToolError('permission_denied', 'No customer on this token.');
        return { customerId };
      },
      handler: (args, ctx) => ok({ customer: ctx.bindings.customerId, status: args.status }),
    });
    client = await serveTools([scoped], {
      middleware: [recorder(seen)],
      authInfo: token('portal', { customerId: 42 }),
    });
    expect(parseResultText(await client.callTool('my_orders', { status: 'open' }))).toEqual({
      ok: true,
      customer: 42,
      status: 'open',
    });
    const other = await serveTools([scoped], {
      middleware: [recorder(seen)],
      authInfo: token('portal', { customerId: 43 }),
    });
    await other.callTool('my_orders', { status: 'open' });
    await other.close();
    expect(seen.map((ctx) => ctx.bindings)).toEqual([{ customerId: 42 }, { customerId: 43 }]);
    expect(seen[0]!.caller.id).not.toBe(seen[1]!.caller.id);
    expect(callKey(seen[0]!)).not.toBe(callKey(seen[1]!));
    expect(callKey(seen[0]!)).toBe(callKey({ ...seen[0]! }));
  });

  it('a bind that throws is answered inside the chain, where middleware sees it', async () => {
    const seen: ToolContext[] = [];
    const scoped = defineTool({
      name: 'my_orders',
      description: 'The caller’s orders.',
      input: {},
      bind: () => {
        throw new ToolError('permission_denied', 'No customer on this token.');
      },
      handler: () => ok(),
    });
    client = await serveTools([scoped], { middleware: [recorder(seen)] });
    const envelope = expectFailure(await client.callTool('my_orders', {}));
    expect(envelope).toMatchObject({ error: 'permission_denied', message: 'No customer on this token.' });
    expect(seen).toHaveLength(1);
  });

  it('a server may replace the rule', async () => {
    const seen: ToolContext[] = [];
    const tool = defineTool({ name: 'ping', description: 'Ping.', input: {}, handler: () => ok() });
    const identify = (): CallerIdentity => ({ id: 'tenant:7', kind: 'client' });
    client = await serveTools([tool], { middleware: [recorder(seen)], identify });
    await client.callTool('ping', {});
    expect(seen[0]!.caller).toEqual({ id: 'tenant:7', kind: 'client' });
  });
});

describe('the model-facing boundary', () => {
  it('turns a raw isError result into internal with an incident id, and logs the raw content', async () => {
    const entries: LogEntry[] = [];
    const raw = defineTool({
      name: 'raw',
      description: 'Raw failure.',
      input: {},
      handler: () => ({
        isError: true,
        content: [{ type: 'text', text: 'db at 10.1.2.3 said password=hunter2' }],
      }),
    });
    client = await serveTools([raw], { logger: recordingLogger(entries) });
    const result = await client.callTool('raw', {});
    const envelope = expectFailure(result);
    expect(envelope).toEqual({
      ok: false,
      error: 'internal',
      message: 'Internal error.',
      hint: 'An unexpected error occurred. Do not retry; tell the user and quote the incident id.',
      retryable: false,
      incidentId: expect.stringMatching(/^inc_/),
    });
    expect(result.structuredContent).toBeUndefined();
    expect(JSON.stringify(result)).not.toContain('hunter2');
    const logged = entries.find((entry) => entry.fields.incidentId === envelope.incidentId);
    expect(JSON.stringify(logged?.fields.content)).toContain('10.1.2.3');
    expect(JSON.stringify(logged?.fields.content)).not.toContain('hunter2');
  });

  it('ok() refuses the envelope’s own keys', () => {
    expect(() => ok({ ok: false })).toThrow('ok(): data may not carry "ok"');
    expect(() => ok({ total: 1 })).toThrow('"total"');
    expect(() => ok({ note: 'x' })).toThrow('"note"');
  });

  it('a zod transform that throws during validation becomes internal inside the chain', async () => {
    const seen: ToolContext[] = [];
    const entries: LogEntry[] = [];
    const tool = defineTool({
      name: 'parse',
      description: 'Parses.',
      input: {
        when: z.string().transform((value) => {
          if (value === 'boom') throw new Error('parser state at /srv/app/parse.js:12');
          return value;
        }),
      },
      handler: ({ when }) => ok({ when }),
    });
    client = await serveTools([tool], { middleware: [recorder(seen)], logger: recordingLogger(entries) });
    const result = await client.callTool('parse', { when: 'boom' });
    const envelope = expectFailure(result);
    expect(envelope).toMatchObject({ error: 'internal', message: 'Internal error.' });
    expect(JSON.stringify(result)).not.toContain('/srv/app');
    expect(seen).toHaveLength(1);
    expect(entries.some((entry) => entry.fields.incidentId === envelope.incidentId)).toBe(true);
  });

  it('scrubs secrets from every string of a failure, _meta included, with core’s patterns and a middleware’s scrubText', async () => {
    const leaky = defineTool({
      name: 'leaky',
      description: 'Leaks.',
      input: {},
      handler: () => {
        const result = fail(
          'unavailable',
          'upstream said Authorization: Bearer abc.def.ghi and INTERNAL-HOST-7',
        );
        result._meta = { ...result._meta, debug: { nested: ['password=hunter2', 'INTERNAL-HOST-7'] } };
        return result;
      },
    });
    const scrubber: ToolMiddleware = Object.assign((_ctx: ToolContext, next: NextFn) => next(), {
      scrubText: (text: string) => text.replaceAll('INTERNAL-HOST-7', '[host]'),
    }) as ToolMiddleware;
    client = await serveTools([leaky], { middleware: [scrubber] });
    const result = await client.callTool('leaky', {});
    const text = JSON.stringify(result);
    expect(text).not.toContain('abc.def.ghi');
    expect(text).not.toContain('hunter2');
    expect(text).not.toContain('INTERNAL-HOST-7');
    expect(expectFailure(result).error).toBe('unavailable');
    expect(result._meta?.debug).toEqual({ nested: ['password=[REDACTED]', '[host]'] });
  });

  it('scrubs the keys of a failure’s _meta too: a secret or internal name used as a key never reaches the model', async () => {
    const keyed = defineTool({
      name: 'keyed',
      description: 'Leaks through keys.',
      input: {},
      handler: () => {
        const result = fail('unavailable', 'upstream failed');
        result._meta = {
          ...result._meta,
          'postgres://app:hunter2@db.internal:5432/orders': 'down',
          retries: { 'Authorization: Bearer abc.def.ghi': 3, 'INTERNAL-HOST-7': 'x' },
        };
        return result;
      },
    });
    const scrubber: ToolMiddleware = Object.assign((_ctx: ToolContext, next: NextFn) => next(), {
      scrubText: (text: string) => text.replaceAll('INTERNAL-HOST-7', '[host]'),
    }) as ToolMiddleware;
    client = await serveTools([keyed], { middleware: [scrubber] });
    const result = await client.callTool('keyed', {});
    const text = JSON.stringify(result);
    expect(text).not.toContain('hunter2');
    expect(text).not.toContain('abc.def.ghi');
    expect(text).not.toContain('INTERNAL-HOST-7');
    expect(expectFailure(result).error).toBe('unavailable');
    // The key names an authorization header, so its value is blanked as well; the other value stays.
    expect(Object.values(result._meta?.retries as object)).toEqual(['[REDACTED]', 'x']);
  });

  it('a success cannot carry the reserved error key in _meta', async () => {
    const sneaky = defineTool({
      name: 'sneaky',
      description: 'Sneaky.',
      input: {},
      handler: () => ({ ...ok({ a: 1 }), _meta: { [ERROR_META_KEY]: { error: 'internal' }, other: 1 } }),
    });
    client = await serveTools([sneaky]);
    const result = await client.callTool('sneaky', {});
    expect(result._meta).toEqual({ other: 1 });
    expect(result.isError).toBeUndefined();
  });

  it('an unknown tool’s JSON-RPC error says its message once', async () => {
    const tool = defineTool({ name: 'ping', description: 'Ping.', input: {}, handler: () => ok() });
    client = await serveTools([tool]);
    await expect(client.callTool('drop_tables', {})).rejects.toThrow(
      /^MCP error -32602: Unknown tool: drop_tables$/,
    );
  });
});

describe('rich results', () => {
  it('ok() carries other content blocks after the JSON text', async () => {
    const chart = defineTool({
      name: 'chart',
      description: 'A chart.',
      input: {},
      handler: () =>
        ok(
          { title: 'Orders' },
          {
            content: [
              { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' },
              { type: 'resource_link', uri: 'orders://schema', name: 'schema' },
            ],
          },
        ),
    });
    client = await serveTools([chart]);
    const result = await client.callTool('chart', {});
    expect(result.content).toEqual([
      { type: 'text', text: '{"ok":true,"title":"Orders"}' },
      { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' },
      { type: 'resource_link', uri: 'orders://schema', name: 'schema' },
    ]);
  });
});

describe('server access from a call', () => {
  const steps = defineTool({
    name: 'steps',
    description: 'Reports progress and logs.',
    input: {},
    handler: async (_args, ctx) => {
      const sent = [await ctx.server.progress(1, 2, 'half'), await ctx.server.progress(2, 2)];
      const logged = [
        await ctx.server.log('debug', 'detail'),
        await ctx.server.log('warning', { step: 2 }, 'steps'),
      ];
      return ok({ sent, logged });
    },
  });

  it('sends progress when the request carried a token, and log messages above the client’s level', async () => {
    const progress: unknown[] = [];
    client = await serveTools([steps]);
    await client.client.setLoggingLevel('info');
    const result = await client.callTool('steps', {}, { onProgress: (p) => progress.push(p) });
    expect(parseResultText(result)).toEqual({ ok: true, sent: [true, true], logged: [false, true] });
    expect(progress).toEqual([
      { progress: 1, total: 2, message: 'half' },
      { progress: 2, total: 2 },
    ]);
    expect(client.notifications).toEqual([
      { method: 'notifications/message', params: { level: 'warning', data: { step: 2 }, logger: 'steps' } },
    ]);
  });

  it('redacts secrets from what log messages and progress carry to the client', async () => {
    const leaky = defineTool({
      name: 'leaky_steps',
      description: 'Logs what an upstream said.',
      input: {},
      handler: async (_args, ctx) => {
        await ctx.server.progress(1, 2, 'retrying with Authorization: Bearer tok_live_8f7e6d5c4b3a');
        await ctx.server.log('error', {
          upstream: 'postgres://app:s3cret-pw@db.internal/orders refused',
          headers: { 'x-api-key': 'k-91827364', accept: 'application/json' },
          'password=hunter2': 'a key that spells a secret',
        });
        await ctx.server.log('warning', 'token=abc123def456 expired', 'sk-abcdefghijklmnopqrstuvwx');
        return ok({ done: true });
      },
    });
    const progress: unknown[] = [];
    client = await serveTools([leaky]);
    await client.callTool('leaky_steps', {}, { onProgress: (p) => progress.push(p) });
    expect(progress).toEqual([
      { progress: 1, total: 2, message: 'retrying with Authorization: Bearer [REDACTED]' },
    ]);
    expect(client.notifications).toEqual([
      {
        method: 'notifications/message',
        params: {
          level: 'error',
          data: {
            upstream: 'postgres://[REDACTED]@db.internal/orders refused',
            headers: { 'x-api-key': '[REDACTED]', accept: 'application/json' },
            'password=[REDACTED]': '[REDACTED]',
          },
        },
      },
      {
        method: 'notifications/message',
        params: { level: 'warning', data: 'token=[REDACTED] expired', logger: '[REDACTED]' },
      },
    ]);
    for (const secret of [
      'tok_live_8f7e6d5c4b3a',
      's3cret-pw',
      'k-91827364',
      'hunter2',
      'abc123def456',
      'sk-abc',
    ]) {
      expect(JSON.stringify([progress, client.notifications])).not.toContain(secret);
    }
  });

  it('sends no progress without a token', async () => {
    client = await serveTools([steps]);
    expect(parseResultText(await client.callTool('steps', {}))).toEqual({
      ok: true,
      sent: [false, false],
      logged: [true, true],
    });
  });

  const ask = defineTool({
    name: 'ask',
    description: 'Asks the person.',
    input: {},
    handler: async (_args, ctx) => {
      const answer = await ctx.server.elicit(
        {
          message: 'Proceed?',
          requestedSchema: { type: 'object', properties: { yes: { type: 'boolean' } }, required: ['yes'] },
        },
        { timeoutMs: 500 },
      );
      return ok({ action: answer.action, content: answer.content ?? null });
    },
  });

  const askLong = defineTool({
    name: 'ask_long',
    description: 'Asks the person, waiting up to a minute.',
    input: {},
    handler: async (_args, ctx) => {
      const answer = await ctx.server.elicit(
        { message: 'Proceed?', requestedSchema: { type: 'object', properties: {} } },
        { timeoutMs: 60_000 },
      );
      return ok({ action: answer.action });
    },
  });
  const plain = defineTool({
    name: 'plain',
    description: 'Asks nothing.',
    input: {},
    handler: async () => ok({ plain: true }),
  });

  it('asks the person through elicitation when the client supports it', async () => {
    const asked: unknown[] = [];
    client = await serveTools([ask], {
      onElicit: (params) => {
        asked.push(params);
        return { action: 'accept', content: { yes: true } };
      },
    });
    expect(parseResultText(await client.callTool('ask', {}))).toEqual({
      ok: true,
      action: 'accept',
      content: { yes: true },
    });
    expect(asked).toEqual([
      {
        mode: 'form',
        message: 'Proceed?',
        requestedSchema: { type: 'object', properties: { yes: { type: 'boolean' } }, required: ['yes'] },
      },
    ]);
  });

  it('withdraws a question nobody can answer any more (withdrawClientRequests), and every later one at once', async () => {
    const askedAt: number[] = [];
    // The client never answers: the person is gone (a stdio client that closed the server's stdin).
    const served = await serveTools([askLong, plain], {
      onElicit: () => {
        askedAt.push(Date.now());
        return new Promise<never>(() => undefined);
      },
    });
    client = served;
    const started = Date.now();
    const call = client.callTool('ask_long', {});
    while (askedAt.length === 0) await new Promise((done) => setTimeout(done, 5));
    expect(withdrawClientRequests(served.server)).toBe(1);
    expect(expectFailure(await call)).toMatchObject({
      error: 'unavailable',
      message: 'The client can no longer answer: its session is ending.',
      retryable: false,
    });
    // Answered now, not after the question's 60 s timeout.
    expect(Date.now() - started).toBeLessThan(30_000);
    // A later question fails before it is sent.
    expect(expectFailure(await client.callTool('ask_long', {}))).toMatchObject({ error: 'unavailable' });
    expect(askedAt).toHaveLength(1);
    expect(withdrawClientRequests(served.server)).toBe(0);
    // A call that asks nothing still runs.
    expect(parseResultText(await client.callTool('plain', {}))).toEqual({ ok: true, plain: true });
  });

  it('withdrawClientRequests is 0 for a server registerTools never saw', () => {
    expect(withdrawClientRequests(new McpServer({ name: 'x', version: '1' }))).toBe(0);
  });

  it('answers unavailable at once when the client lacks elicitation', async () => {
    client = await serveTools([ask]);
    expect(expectFailure(await client.callTool('ask', {}))).toMatchObject({
      error: 'unavailable',
      message:
        'The server cannot ask the user a question (form elicitation): this client does not support it.',
      retryable: false,
    });
  });

  it('answers unavailable at once when the transport cannot carry a request (HTTP without a session)', async () => {
    const httpLike = defineTool({
      name: 'ask_http',
      description: 'Asks.',
      input: {},
      handler: async (_args, ctx) => ok({ form: ctx.server.supports('elicitation.form') }),
    });
    client = await serveTools([httpLike], {
      onElicit: () => ({ action: 'decline' }),
      clientRequests: 'never',
    });
    expect(parseResultText(await client.callTool('ask_http', {}))).toEqual({ ok: true, form: false });
  });

  it('sends the person to a page by URL elicitation and tells the client when it is done', async () => {
    const visit = defineTool({
      name: 'visit',
      description: 'Sends the person to a page.',
      input: {},
      handler: async (_args, ctx) => {
        const answer = await ctx.server.elicit({
          mode: 'url',
          message: 'Sign the order.',
          url: 'https://orders.example/sign/e-1',
          elicitationId: 'e-1',
        });
        return ok({ action: answer.action, completed: await ctx.server.elicitationComplete('e-1') });
      },
    });
    const asked: unknown[] = [];
    client = await serveTools([visit], {
      elicitUrl: true,
      onElicit: (params) => {
        asked.push(params);
        return { action: 'accept' };
      },
    });
    expect(parseResultText(await client.callTool('visit', {}))).toEqual({
      ok: true,
      action: 'accept',
      completed: true,
    });
    expect(asked).toEqual([
      {
        mode: 'url',
        message: 'Sign the order.',
        url: 'https://orders.example/sign/e-1',
        elicitationId: 'e-1',
      },
    ]);
    expect(client.notifications).toContainEqual({
      jsonrpc: '2.0',
      method: 'notifications/elicitation/complete',
      params: { elicitationId: 'e-1' },
    });
  });

  it('sends no completion notice to a client without URL elicitation', async () => {
    const done = defineTool({
      name: 'done',
      description: 'Says an interaction is over.',
      input: {},
      handler: async (_args, ctx) => ok({ completed: await ctx.server.elicitationComplete('e-2') }),
    });
    client = await serveTools([done], { onElicit: () => ({ action: 'decline' }) });
    expect(parseResultText(await client.callTool('done', {}))).toEqual({ ok: true, completed: false });
    expect(client.notifications.some((n) => n.method === 'notifications/elicitation/complete')).toBe(false);
  });

  it('answers timeout when the person does not answer in time', async () => {
    client = await serveTools([ask], { onElicit: () => new Promise(() => {}) });
    expect(expectFailure(await client.callTool('ask', {}))).toMatchObject({
      error: 'timeout',
      message: 'No answer from the client within 500 ms.',
    });
  });

  it('asks the client’s model through sampling', async () => {
    const summarise = defineTool({
      name: 'summarise',
      description: 'Summarises.',
      input: {},
      handler: async (_args, ctx) => {
        const answer = await ctx.server.sample({
          messages: [{ role: 'user', content: { type: 'text', text: 'Summarise' } }],
          maxTokens: 10,
        });
        return ok({ text: answer.content.type === 'text' ? answer.content.text : '' });
      },
    });
    client = await serveTools([summarise], {
      onSample: () => ({ role: 'assistant', model: 'test', content: { type: 'text', text: 'short' } }),
    });
    expect(parseResultText(await client.callTool('summarise', {}))).toEqual({ ok: true, text: 'short' });
  });
});

describe('hidden tools', () => {
  const ping = defineTool({ name: 'ping', description: 'Ping.', input: {}, handler: () => ok() });
  const refund = defineTool({
    name: 'refund',
    description: 'Refunds.',
    input: { amount: z.number() },
    handler: () => ok(),
  });
  const hideRefund: ToolMiddleware = Object.assign((_ctx: ToolContext, next: NextFn) => next(), {
    canSee: (tool: { name: string }) => tool.name !== 'refund',
  });

  it('are left out of tools/list and answered exactly like an unknown tool, even with bad arguments', async () => {
    const seen: ToolContext[] = [];
    client = await serveTools([ping, refund], { middleware: [recorder(seen), hideRefund] });
    expect((await client.client.listTools()).tools.map((tool) => tool.name)).toEqual(['ping']);
    const hidden = await client.callTool('refund', { amount: 'lots' }).catch((error: unknown) => error);
    const unknown = await client.callTool('refnd', { amount: 'lots' }).catch((error: unknown) => error);
    expect(String(hidden)).toBe(String(unknown).replace('refnd', 'refund'));
    expect(hidden).toMatchObject({ code: -32602 });
    expect(seen.map((ctx) => [ctx.toolName, ctx.tool])).toEqual([
      ['refund', undefined],
      ['refnd', undefined],
    ]);
  });
});

describe('plumbing', () => {
  it('resolveToolOptions: a tool’s field wins over the global one, which wins over the default', () => {
    const resolver = resolveToolOptions(
      'createThing',
      { limit: 10, mode: 'a' as 'a' | 'b' },
      { limit: 5, tools: { one: { mode: 'b' }, off: false } },
    );
    expect(resolver.global).toEqual({ limit: 5, mode: 'a' });
    expect(resolver.forTool('one')).toEqual({ limit: 5, mode: 'b' });
    expect(resolver.forTool('off')).toBeUndefined();
    expect(resolver.forTool('other')).toBe(resolver.global);
  });

  it('resolveToolOptions refuses unknown per-tool options and runs the check on every set', () => {
    expect(() =>
      resolveToolOptions('createThing', { limit: 10 }, { tools: { one: { limt: 1 } as never } }),
    ).toThrow('createThing: tools.one has unknown option(s) limt; a tool may set limit');
    const check = (resolved: { limit: number }, where: string): void => {
      if (resolved.limit < 1) throw new RangeError(`${where}: limit must be at least 1`);
    };
    expect(() =>
      resolveToolOptions('createThing', { limit: 10 }, { tools: { one: { limit: 0 } } }, check),
    ).toThrow('createThing: tools.one: limit must be at least 1');
  });

  it('isPassThrough is true for unknown tools and refused arguments', () => {
    expect(isPassThrough({ tool: undefined, validation: { ok: true } })).toBe(true);
    expect(isPassThrough({ tool: {} as never, validation: { ok: false, issues: [] } })).toBe(true);
    expect(isPassThrough({ tool: {} as never, validation: { ok: true } })).toBe(false);
  });

  it('withDeadline rejects at the deadline even when the work ignores its signal, and follows the caller’s abort', async () => {
    await expect(withDeadline(() => new Promise(() => {}), { timeoutMs: 20 })).rejects.toMatchObject({
      name: 'TimeoutError',
    });
    const controller = new AbortController();
    const pending = withDeadline(() => new Promise(() => {}), {
      timeoutMs: 10_000,
      signal: controller.signal,
    });
    controller.abort(new Error('client went away'));
    await expect(pending).rejects.toThrow('client went away');
    await expect(withDeadline(async (signal) => signal.aborted, { timeoutMs: 1000 })).resolves.toBe(false);
  });
});

describe('the boundary and core’s own refusals', () => {
  it('passes an invalid_argument answer unchanged, even where a field name reads like a secret key', async () => {
    const seen: unknown[] = [];
    const tool = defineTool({
      name: 'get_order',
      description: 'One order.',
      input: { id: z.string() },
      handler: () => ok(),
    });
    const capture: ToolMiddleware = async (_ctx, next) => {
      const result = await next();
      seen.push(JSON.parse(JSON.stringify(result)));
      return result;
    };
    client = await serveTools([tool], { middleware: [capture] });
    const result = await client.callTool('get_order', { id: 'a', secret: 'x' });
    expect(expectFailure(result).hint).toBe(
      'Fix and call again: secret: not an accepted argument; remove it (accepted: id).',
    );
    expect(seen).toEqual([JSON.parse(JSON.stringify(result))]);
  });
});

describe('deadlines and stores', () => {
  it('raceAbort on an already aborted signal leaves no unhandled rejection behind', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    process.on('unhandledRejection', onUnhandled);
    try {
      await expect(
        raceAbort(Promise.reject(new Error('late')), AbortSignal.abort(new Error('gone'))),
      ).rejects.toThrow('gone');
      await new Promise((done) => setTimeout(done, 10));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('withDeadline aborts the work’s own signal when the time is up', async () => {
    let seen: AbortSignal | undefined;
    await expect(
      withDeadline(
        (signal) => {
          seen = signal;
          return new Promise(() => {});
        },
        { timeoutMs: 10, what: 'the redis read' },
      ),
    ).rejects.toThrow('the redis read did not finish within 10 ms');
    expect(seen?.aborted).toBe(true);
  });

  it('limitStore bounds every operation of a store that stops answering', async () => {
    const silent = {
      setIfAbsent: () => new Promise<boolean>(() => {}),
      set: () => new Promise<void>(() => {}),
      get: () => new Promise<string | undefined>(() => {}),
      delete: () => new Promise<boolean>(() => {}),
    };
    const store = limitStore(silent, { timeoutMs: 15, name: 'redis' });
    await expect(store.get('k')).rejects.toMatchObject({ name: 'TimeoutError' });
    await expect(store.setIfAbsent('k', 'v', 100)).rejects.toThrow('redis did not finish within 15 ms');
    const memory = limitStore(createMemoryStore(), { timeoutMs: 50 });
    expect(await memory.setIfAbsent('k', 'v', 1000)).toBe(true);
    expect(await memory.get('k')).toBe('v');
  });

  it('optInTools enables a listed tool unless it says enabled: false, and keeps opt-outs', () => {
    const resolver = resolveToolOptions(
      'createThing',
      { enabled: false, ttl: 10 },
      {
        tools: optInTools<{ enabled: boolean; ttl: number }>({
          refund: {},
          cancel: { enabled: false },
          other: false,
        }),
      },
    );
    expect(resolver.forTool('refund')).toEqual({ enabled: true, ttl: 10 });
    expect(resolver.forTool('cancel')).toEqual({ enabled: false, ttl: 10 });
    expect(resolver.forTool('other')).toBeUndefined();
    expect(resolver.forTool('search')).toEqual({ enabled: false, ttl: 10 });
  });
});

describe('the log of ToolError causes during an outage', () => {
  it('logs the first cause in full, then one line with the count and every incident id', async () => {
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
    client = await serveTools([down], { middleware: [], logger: recordingLogger(entries) });
    const ids: string[] = [];
    for (let n = 0; n < 30; n++) ids.push(expectFailure(await client.callTool('down', { n })).incidentId!);
    // The rest are held for up to a second and written at the latest when the server closes.
    await client.close();
    client = undefined;
    const full = entries.filter((entry) => entry.message === 'tool error with a cause');
    expect(full).toHaveLength(1);
    expect(full[0]!.fields.incidentId).toBe(ids[0]);
    const summaries = entries.filter((entry) => entry !== full[0]);
    for (const summary of summaries) {
      expect(summary).toMatchObject({
        level: 'error',
        message: 'tool errors with the same cause (first one logged in full)',
        fields: { failureClass: 'down:unavailable:ECONNREFUSED' },
      });
    }
    expect(summaries.flatMap((summary) => summary.fields.incidentIds as string[])).toEqual(ids.slice(1));
  });
});
