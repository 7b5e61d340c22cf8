import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import {
  type CallerIdentity,
  defineTool,
  identifyCaller,
  ok,
  type PolicyDecision,
  type ToolDefinition,
  type ToolMiddleware,
} from '@toolgate/core';
import { expectFailure, type ServeToolsOptions, serveTools } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { AUTHZ_META_KEY, type AuthzOptions, createAuthz } from '../src/index.js';

const searchOrders = defineTool({
  name: 'search_orders',
  description: 'Search orders by status.',
  input: { status: z.enum(['open', 'shipped']) },
  handler: async ({ status }) => ok({ items: [{ id: 1, status }] }),
}) as ToolDefinition;
const refund = defineTool({
  name: 'refund',
  description: 'Refund an order.',
  input: { orderId: z.number().int() },
  handler: async ({ orderId }) => ok({ refunded: orderId }),
}) as ToolDefinition;
const getStatus = defineTool({
  name: 'get_order_status',
  description: 'Status of one order.',
  input: { orderId: z.number().int() },
  handler: async ({ orderId }) => ok({ orderId, status: 'open' }),
}) as ToolDefinition;
const ping = defineTool({
  name: 'ping',
  description: 'Liveness.',
  input: {},
  handler: async () => ok({ pong: true }),
}) as ToolDefinition;
const ALL = [searchOrders, refund, getStatus, ping];

const OPTIONS: AuthzOptions = {
  require: { scopes: ['orders:read'] },
  tools: {
    refund: { require: { scopes: ['orders:write', 'payments'] } },
    search_orders: {
      require: { anyOf: [['orders:read'], ['support']], claims: { tenant: (v) => v === 'acme' } },
    },
    ping: false,
  },
};

const token = (scopes: string[], extra: Record<string, unknown> = {}): AuthInfo => ({
  token: 't',
  clientId: 'desk',
  scopes,
  expiresAt: Math.floor(Date.now() / 1000) + 300,
  extra: { sub: 'user-1', iss: 'https://auth.example.test', tenant: 'acme', ...extra },
});

const open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

/** Serves `tools` behind authz, with a recorder outside it that keeps each call's decisions. */
async function serve(
  tools: ToolDefinition[],
  options: AuthzOptions,
  authInfo?: AuthInfo,
  more: Pick<ServeToolsOptions, 'identify' | 'localTransport'> = {},
) {
  const decisions: PolicyDecision[][] = [];
  const recorder: ToolMiddleware = async (ctx, next) => {
    try {
      return await next();
    } finally {
      decisions.push([...ctx.decisions]);
    }
  };
  const client = await serveTools(tools, {
    middleware: [recorder, createAuthz(options)],
    ...(authInfo ? { authInfo } : {}),
    ...more,
  });
  open.push(client);
  // Every JSON-RPC message the server sends, as the bytes it puts on the wire.
  const wire: string[] = [];
  const transport = client.server.server.transport!;
  const send = transport.send.bind(transport);
  transport.send = (message: JSONRPCMessage, sendOptions) => {
    wire.push(JSON.stringify(message));
    return send(message, sendOptions);
  };
  return Object.assign(client, { decisions, wire });
}

const names = async (client: Awaited<ReturnType<typeof serve>>) =>
  (await client.client.listTools()).tools.map((t) => t.name);

describe('tools/list (hidden mode)', () => {
  it('lists, per caller and in registration order, only the tools the call path would allow', async () => {
    expect(await names(await serve(ALL, OPTIONS, token(['orders:read'])))).toEqual([
      'search_orders',
      'get_order_status',
      'ping',
    ]);
    expect(
      await names(await serve(ALL, OPTIONS, token(['orders:read', 'orders:write', 'payments']))),
    ).toEqual(['search_orders', 'refund', 'get_order_status', 'ping']);
    expect(await names(await serve(ALL, OPTIONS, token(['support'])))).toEqual(['search_orders', 'ping']);
    expect(await names(await serve(ALL, OPTIONS, token(['support'], { tenant: 'globex' })))).toEqual([
      'ping',
    ]);
    expect(await names(await serve(ALL, OPTIONS, token([])))).toEqual(['ping']);
  });
});

describe('tools/call', () => {
  it('runs an allowed call and records the allow decision', async () => {
    const client = await serve(ALL, OPTIONS, token(['support']));
    expect(await client.callToolJson('search_orders', { status: 'open' })).toEqual({
      ok: true,
      items: [{ id: 1, status: 'open' }],
    });
    expect(client.decisions).toEqual([[{ by: 'authz', action: 'allow', reason: 'requirement met' }]]);
  });

  it('answers a hidden tool byte for byte like a tool the server does not have, before validating arguments', async () => {
    const hidden = await serve(ALL, OPTIONS, token(['orders:read']));
    const absent = await serve([searchOrders, getStatus, ping], OPTIONS, token(['orders:read']));
    for (const args of [{ orderId: 7 }, { orderId: 'not a number', extra: true }]) {
      const a = await hidden.callTool('refund', args).catch((e: unknown) => e);
      const b = await absent.callTool('refund', args).catch((e: unknown) => e);
      expect(String(a)).toBe('McpError: MCP error -32602: Unknown tool: refund');
      expect(String(b)).toBe(String(a));
    }
    // The requests carry the same ids on both servers (same sequence), so the wire bytes compare as they are.
    expect(hidden.wire.slice(-2)).toEqual(absent.wire.slice(-2));
    expect(hidden.wire.at(-1)).toBe(
      `{"jsonrpc":"2.0","id":${JSON.parse(hidden.wire.at(-1)!).id},"error":{"code":-32602,"message":"Unknown tool: refund"}}`,
    );
    // Server-side only, the audit trail says authz hid it; the truly absent tool has no decision.
    expect(hidden.decisions).toEqual([
      [{ by: 'authz', action: 'hide', reason: 'missing scope(s): orders:write payments' }],
      [{ by: 'authz', action: 'hide', reason: 'missing scope(s): orders:write payments' }],
    ]);
    expect(absent.decisions).toEqual([[], []]);
  });

  it('hides a tool whose claim predicate fails or throws', async () => {
    const throwing: AuthzOptions = {
      require: {},
      tools: {
        refund: {
          require: {
            claims: {
              tenant: () => {
                throw new Error('boom');
              },
            },
          },
        },
      },
    };
    const client = await serve(ALL, throwing, token(['orders:write']));
    expect(await names(client)).toEqual(['search_orders', 'get_order_status', 'ping']);
    await expect(client.callTool('refund', { orderId: 1 })).rejects.toThrow(
      'MCP error -32602: Unknown tool: refund',
    );
    expect(client.decisions).toEqual([[{ by: 'authz', action: 'hide', reason: 'claim tenant refused' }]]);
  });

  it('lets a check function decide the rest', async () => {
    const onlyUserOne: AuthzOptions = {
      require: {},
      tools: {
        refund: {
          require: { check: ({ caller, tool }) => caller.subject === 'user-1' && tool.name === 'refund' },
        },
      },
    };
    expect(await (await serve(ALL, onlyUserOne, token([]))).callToolJson('refund', { orderId: 3 })).toEqual({
      ok: true,
      refunded: 3,
    });
    expect(await names(await serve(ALL, onlyUserOne, token([], { sub: 'user-2' })))).toEqual([
      'search_orders',
      'get_order_status',
      'ping',
    ]);
  });

  it('leaves an opted-out tool alone (no decision)', async () => {
    const client = await serve(ALL, OPTIONS, token([]));
    expect(await client.callToolJson('ping')).toEqual({ ok: true, pong: true });
    expect(client.decisions).toEqual([[]]);
  });
});

describe('tokens of unexpected shapes', () => {
  it('counts scopes only from an array: a scope string never matches by substring', async () => {
    // Another verifier may hand over the raw `scope`/`scp` string; `orders:readonly` is not `orders:read`.
    const raw = { ...token([]), scopes: 'orders:readonly orders:writer payments' as unknown as string[] };
    const client = await serve(ALL, { ...OPTIONS, tools: { ...OPTIONS.tools, search_orders: {} } }, raw);
    expect(await names(client)).toEqual(['ping']);
    await expect(client.callTool('get_order_status', { orderId: 1 })).rejects.toThrow(
      'MCP error -32602: Unknown tool: get_order_status',
    );
    expect(client.decisions).toEqual([
      [{ by: 'authz', action: 'hide', reason: 'missing scope(s): orders:read' }],
    ]);
  });

  it('gives a claim predicate undefined for a claim the token lacks, also one named like an Object member', async () => {
    const present = (value: unknown) => value !== undefined;
    const options: AuthzOptions = {
      require: {},
      tools: { refund: { require: { claims: { constructor: present, toString: present } } } },
    };
    const without = await serve(ALL, options, token(['orders:write']));
    expect(await names(without)).toEqual(['search_orders', 'get_order_status', 'ping']);
    const withClaims = await serve(ALL, options, token([], { constructor: 'x', toString: 'y' }));
    expect(await withClaims.callToolJson('refund', { orderId: 4 })).toEqual({ ok: true, refunded: 4 });
  });

  it('decides visibility per call: one instance serving many callers caches nothing between them', async () => {
    const authz = createAuthz(OPTIONS);
    const middleware = [authz];
    const reader = await serveTools(ALL, { middleware, authInfo: token(['orders:read']) });
    const writer = await serveTools(ALL, {
      middleware,
      authInfo: token(['orders:read', 'orders:write', 'payments'], { sub: 'user-2' }),
    });
    open.push(reader, writer);
    const list = async (client: typeof reader) => (await client.client.listTools()).tools.map((t) => t.name);
    for (let round = 0; round < 2; round += 1) {
      expect(await list(writer)).toEqual(['search_orders', 'refund', 'get_order_status', 'ping']);
      expect(await list(reader)).toEqual(['search_orders', 'get_order_status', 'ping']);
      expect(await writer.callToolJson('refund', { orderId: 5 })).toEqual({ ok: true, refunded: 5 });
      await expect(reader.callTool('refund', { orderId: 5 })).rejects.toThrow('Unknown tool: refund');
    }
  });
});

describe('refuse mode', () => {
  const refuse: AuthzOptions = { ...OPTIONS, mode: 'refuse' };

  it('keeps the tool listed and answers permission_denied naming only the missing scopes', async () => {
    const client = await serve(ALL, refuse, token(['orders:read', 'payments']));
    expect(await names(client)).toEqual(['search_orders', 'refund', 'get_order_status', 'ping']);
    const result = await client.callTool('refund', { orderId: 'not a number' });
    expect(expectFailure(result)).toEqual({
      ok: false,
      error: 'permission_denied',
      message: 'Calling refund needs the scope(s) orders:write, which this authorization does not grant.',
      hint: 'Do not retry as is. Tell the user which scope(s) the call needs; it can succeed after they authorize again with them.',
      retryable: false,
    });
    expect(result._meta?.[AUTHZ_META_KEY]).toEqual({ missingScopes: ['orders:write'] });
    expect(client.decisions).toEqual([
      [
        {
          by: 'authz',
          action: 'deny',
          reason: 'missing scope(s): orders:write',
          detail: { missingScopes: ['orders:write'] },
        },
      ],
    ]);
  });

  it('names the closest anyOf alternative, and nothing when a claim refuses', async () => {
    const client = await serve(ALL, refuse, token([], { tenant: 'globex' }));
    expect(expectFailure(await client.callTool('search_orders', { status: 'open' })).message).toBe(
      'Calling search_orders needs the scope(s) orders:read, which this authorization does not grant.',
    );
    const claimRefused = await serve(ALL, refuse, token(['support'], { tenant: 'globex' }));
    const result = await claimRefused.callTool('search_orders', { status: 'open' });
    expect(expectFailure(result)).toEqual({
      ok: false,
      error: 'permission_denied',
      message: 'You may not call search_orders.',
      hint: 'This call is not allowed for this user. Do not retry; tell the user it cannot be done here.',
      retryable: false,
    });
    expect(result._meta?.[AUTHZ_META_KEY]).toBeUndefined();
  });

  it('mixes modes per tool', async () => {
    const mixed: AuthzOptions = {
      ...OPTIONS,
      tools: { ...OPTIONS.tools, refund: { require: { scopes: ['orders:write'] }, mode: 'refuse' } },
    };
    const client = await serve(ALL, mixed, token([]));
    expect(await names(client)).toEqual(['refund', 'ping']);
  });
});

describe('stdio (no auth)', () => {
  it("local: 'allow' (the default) lets the local caller use every tool", async () => {
    const client = await serve(ALL, OPTIONS);
    expect(await names(client)).toEqual(['search_orders', 'refund', 'get_order_status', 'ping']);
    expect(await client.callToolJson('refund', { orderId: 2 })).toEqual({ ok: true, refunded: 2 });
    expect(client.decisions).toEqual([
      [{ by: 'authz', action: 'allow', reason: 'local caller (local transport) allowed' }],
    ]);
  });

  it("local: 'deny' treats the local caller as holding no token", async () => {
    const client = await serve(ALL, {
      ...OPTIONS,
      local: 'deny',
      tools: { ...OPTIONS.tools, get_order_status: { require: {} } },
    });
    expect(await names(client)).toEqual(['get_order_status', 'ping']);
    await expect(client.callTool('refund', { orderId: 2 })).rejects.toThrow('Unknown tool: refund');
    expect(await client.callToolJson('get_order_status', { orderId: 2 })).toEqual({
      ok: true,
      orderId: 2,
      status: 'open',
    });
    expect(client.decisions).toEqual([
      [{ by: 'authz', action: 'hide', reason: 'missing scope(s): orders:write payments' }],
      [{ by: 'authz', action: 'allow', reason: 'requirement met' }],
    ]);
  });
});

describe('local means a local transport', () => {
  // An app's identify written to the rule before core decided locality from the transport: a request
  // without HTTP headers (stdio, but equally a WebSocket or queue transport) is `local`.
  const guessingIdentify = (request: Parameters<typeof identifyCaller>[0]): CallerIdentity =>
    request.authInfo || request.headers ? identifyCaller(request) : { id: 'local', kind: 'local' };
  const remote = { localTransport: () => false };

  it('a caller an identify names local over a remote transport gets no tool a token would need', async () => {
    const client = await serve(ALL, OPTIONS, undefined, { ...remote, identify: guessingIdentify });
    expect(await names(client)).toEqual(['ping']);
    await expect(client.callTool('refund', { orderId: 2 })).rejects.toThrow('Unknown tool: refund');
    expect(client.decisions).toEqual([
      [{ by: 'authz', action: 'hide', reason: 'missing scope(s): orders:write payments' }],
    ]);
    // Core's own rule names it anonymous there: the same answer.
    const plain = await serve(ALL, OPTIONS, undefined, remote);
    expect(await names(plain)).toEqual(['ping']);
    await expect(plain.callTool('refund', { orderId: 2 })).rejects.toThrow('Unknown tool: refund');
  });

  it('a caller named local over a local transport but holding a token is judged by the token', async () => {
    const named = await serve(ALL, OPTIONS, token(['orders:read']), {
      identify: () => ({ id: 'local', kind: 'local' }),
    });
    expect(await names(named)).toEqual(['search_orders', 'get_order_status', 'ping']);
    await expect(named.callTool('refund', { orderId: 2 })).rejects.toThrow('Unknown tool: refund');
  });

  it('the same identify over a local transport keeps local: allow', async () => {
    const client = await serve(ALL, OPTIONS, undefined, { identify: guessingIdentify });
    expect(await names(client)).toEqual(['search_orders', 'refund', 'get_order_status', 'ping']);
    expect(await client.callToolJson('refund', { orderId: 2 })).toEqual({ ok: true, refunded: 2 });
  });
});

describe('as a tool middleware (no canSee)', () => {
  it('still refuses, without naming scopes, when hidden mode cannot hide', async () => {
    const guarded = defineTool({
      ...refund,
      input: { orderId: z.number().int() },
      middleware: [createAuthz({ require: { scopes: ['orders:write'] } })],
      handler: refund.handler,
    }) as ToolDefinition;
    const client = await serveTools([guarded], { authInfo: token(['orders:read']) });
    open.push(client);
    expect(expectFailure(await client.callTool('refund', { orderId: 1 })).message).toBe(
      'You may not call refund.',
    );
  });
});

describe('createAuthz options', () => {
  it('refuses a missing default, unknown keys, empty alternatives and bad modes at creation', () => {
    expect(() => createAuthz({} as AuthzOptions)).toThrow('createAuthz: give require');
    expect(() => createAuthz({ require: { scope: ['x'] } as never })).toThrow(
      'createAuthz: require has unknown key(s) scope',
    );
    expect(() => createAuthz({ require: {}, tools: { refund: { scopes: ['x'] } as never } })).toThrow(
      'createAuthz: tools.refund has unknown option(s) scopes; a tool may set require, mode, local',
    );
    expect(() => createAuthz({ require: { anyOf: [[]] } })).toThrow('createAuthz: require.anyOf[0] is empty');
    expect(() => createAuthz({ require: { scopes: ['has space'] } })).toThrow(/scope strings/);
    expect(() => createAuthz({ require: {}, mode: 'loud' as never })).toThrow(
      "createAuthz: mode must be 'hidden' or 'refuse'",
    );
    expect(() => createAuthz({ require: {}, tools: { x: { local: 'maybe' as never } } })).toThrow(
      "createAuthz: tools.x: local must be 'allow' or 'deny'",
    );
  });
});
