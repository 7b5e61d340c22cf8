// Who counts as `local`: the caller @toolgate/authz allows every tool by default. Core used to call any
// request without HTTP headers local, so every remote caller over a transport that fills no requestInfo
// (a WebSocket server, a queue, an adapter an app writes) was `local`, allowed everything, and all of
// them shared one identity. Now `local` is what the server's transport class says, decided per connection.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult, JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  callerScope,
  defineTool,
  isLocalTransport,
  type LocalTransportRule,
  type NextFn,
  ok,
  type RegisterToolsOptions,
  registerTools,
  type ToolContext,
  type ToolMiddleware,
} from '../src/index.js';
import {
  createTestContext,
  type LogEntry,
  parseResultText,
  recordingLogger,
  serveTools,
} from '../src/testing.js';

/**
 * A server transport of the app's own, as a WebSocket or message-queue adapter is: it forwards over an
 * in-memory pair, passes no requestInfo (no headers) and no auth, and is no InMemoryTransport.
 */
class ForwardingTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;
  sessionId?: string;

  constructor(
    private readonly inner: InMemoryTransport,
    sessionId?: string,
  ) {
    if (sessionId !== undefined) this.sessionId = sessionId;
  }

  async start(): Promise<void> {
    this.inner.onmessage = (message) => this.onmessage?.(message);
    this.inner.onclose = () => this.onclose?.();
    this.inner.onerror = (error) => this.onerror?.(error);
    await this.inner.start();
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    return this.inner.send(message, options);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

interface Seen {
  caller: string;
  kind: string;
  local: boolean;
  scope: string;
}

const whoami = defineTool({
  name: 'whoami',
  description: 'Who core says is calling (test).',
  input: {},
  handler: (_args, ctx) =>
    ok({ caller: ctx.caller.id, kind: ctx.caller.kind, local: ctx.request.local, scope: callerScope(ctx) }),
});

/** As @toolgate/authz with `local: 'allow'` and a scope no caller here holds: only `local` sees the tool. */
const localsOnly = Object.assign((_ctx: ToolContext, next: NextFn) => next(), {
  canSee: (_tool: unknown, caller: { kind: string }) => caller.kind === 'local',
}) as ToolMiddleware;

const open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((entry) => entry.close()));
});

/** A real SDK client talking to a core-registered server that is connected to `serverTransport`. */
async function connectOver(
  serverTransport: Transport,
  clientTransport: Transport,
  options: RegisterToolsOptions = {},
): Promise<{ client: Client; server: McpServer; whoami(): Promise<Seen> }> {
  const server = new McpServer({ name: 'transport-test-server', version: '0.0.0' });
  registerTools(server, [whoami], options);
  await server.connect(serverTransport);
  const client = new Client({ name: 'transport-test-client', version: '0.0.0' });
  await client.connect(clientTransport);
  open.push({
    async close() {
      await client.close();
      await server.close();
    },
  });
  return {
    client,
    server,
    async whoami() {
      return parseResultText(
        (await client.callTool({ name: 'whoami', arguments: {} })) as CallToolResult,
      ) as Seen;
    },
  };
}

function forwardingPair(sessionId?: string): [Transport, Transport] {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  return [new ForwardingTransport(serverSide, sessionId), clientSide];
}

describe('a transport of the app’s own that passes no headers', () => {
  it('identifies its caller as anonymous, never local, and an authz-like policy hides local-only tools', async () => {
    const plain = await connectOver(...forwardingPair());
    expect(await plain.whoami()).toEqual({
      ok: true,
      caller: 'anonymous',
      kind: 'anonymous',
      local: false,
      scope: '["anonymous",{}]',
    });
    const guarded = await connectOver(...forwardingPair(), { middleware: [localsOnly] });
    await expect(guarded.client.callTool({ name: 'whoami', arguments: {} })).rejects.toThrow(
      /^MCP error -32602: Unknown tool: whoami$/,
    );
    expect((await guarded.client.listTools()).tools).toEqual([]);
  });

  it('keeps two clients with sessions apart: each its own caller and per-caller key', async () => {
    // A server per connection, as a WebSocket server builds them, sharing one middleware list (its policies' state).
    const middleware = [((_ctx, next) => next()) as ToolMiddleware];
    const a = await connectOver(...forwardingPair('ws-a'), { middleware });
    const b = await connectOver(...forwardingPair('ws-b'), { middleware });
    const seenA = await a.whoami();
    const seenB = await b.whoami();
    expect(seenA).toEqual({
      ok: true,
      caller: 'session:ws-a',
      kind: 'session',
      local: false,
      scope: '["session:ws-a",{}]',
    });
    expect(seenB).toEqual({
      ok: true,
      caller: 'session:ws-b',
      kind: 'session',
      local: false,
      scope: '["session:ws-b",{}]',
    });
    expect(seenA.scope).not.toBe(seenB.scope);
  });

  it('is local when the app declares it with localTransport, which replaces core’s rule', async () => {
    const localTransport: LocalTransportRule = (transport) => transport instanceof ForwardingTransport;
    const declared = await connectOver(...forwardingPair(), { middleware: [localsOnly], localTransport });
    expect(await declared.whoami()).toEqual({
      ok: true,
      caller: 'local',
      kind: 'local',
      local: true,
      scope: '["local",{}]',
    });
    // The rule replaces core's: an in-memory transport is then remote.
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const inMemory = await connectOver(serverSide, clientSide, { localTransport });
    expect(await inMemory.whoami()).toMatchObject({ caller: 'anonymous', local: false });
    // Extending it keeps the SDK's own.
    const extended: LocalTransportRule = (t) => t instanceof ForwardingTransport || isLocalTransport(t);
    const [clientBoth, serverBoth] = InMemoryTransport.createLinkedPair();
    const both = await connectOver(serverBoth, clientBoth, { localTransport: extended });
    expect(await both.whoami()).toMatchObject({ caller: 'local', local: true });
  });
});

describe('localTransport', () => {
  it('is asked once per connection, and again for the next connection of the same server', async () => {
    const asked: Transport[] = [];
    const localTransport: LocalTransportRule = (transport) => {
      asked.push(transport);
      return true;
    };
    const [serverTransport, clientTransport] = forwardingPair();
    const first = await connectOver(serverTransport, clientTransport, {
      localTransport,
      middleware: [localsOnly],
    });
    await first.whoami();
    await first.client.listTools();
    await first.whoami();
    expect(asked).toHaveLength(1);
    expect(asked[0]).toBe(serverTransport);
    await first.client.close();
    const [nextServer, nextClient] = forwardingPair();
    await first.server.connect(nextServer);
    const client = new Client({ name: 'again', version: '0.0.0' });
    await client.connect(nextClient);
    open.push(client);
    await client.callTool({ name: 'whoami', arguments: {} });
    expect(asked).toHaveLength(2);
    expect(asked[1]).toBe(nextServer);
  });

  it('only true makes a transport local; one that throws makes it remote, logged once per connection', async () => {
    const truthy = await connectOver(...forwardingPair(), { localTransport: (() => 1) as never });
    expect(await truthy.whoami()).toMatchObject({ caller: 'anonymous', local: false });
    const entries: LogEntry[] = [];
    const broken = await connectOver(...forwardingPair(), {
      logger: recordingLogger(entries),
      localTransport: () => {
        throw new Error('rule broke');
      },
    });
    expect(await broken.whoami()).toMatchObject({ caller: 'anonymous', local: false });
    expect(await broken.whoami()).toMatchObject({ caller: 'anonymous', local: false });
    expect(entries).toEqual([
      {
        level: 'error',
        message: 'localTransport threw; transport treated as remote',
        fields: { err: new Error('rule broke') },
      },
    ]);
  });

  it('refuses a value that is not a function with a TypeError', () => {
    const server = new McpServer({ name: 's', version: '0.0.0' });
    expect(() => registerTools(server, [whoami], { localTransport: 'stdio' as never })).toThrow(
      new TypeError('registerTools: localTransport must be a function (transport) => boolean, not string'),
    );
    expect(() =>
      registerTools(new McpServer({ name: 's', version: '0.0.0' }), [whoami], {
        localTransport: null as never,
      }),
    ).toThrow(
      new TypeError('registerTools: localTransport must be a function (transport) => boolean, not null'),
    );
  });
});

describe('the SDK’s local transports', () => {
  it('in-memory (core/testing’s client) is still local', async () => {
    const client = await serveTools([whoami]);
    open.push(client);
    expect(await client.callToolJson('whoami')).toEqual({
      ok: true,
      caller: 'local',
      kind: 'local',
      local: true,
      scope: '["local",{}]',
    });
  });

  it('another copy of the SDK (its CommonJS build) is recognised by class name', async () => {
    const require = createRequire(import.meta.url);
    const cjs = {
      InMemoryTransport: require('@modelcontextprotocol/sdk/inMemory.js')
        .InMemoryTransport as typeof InMemoryTransport,
      StdioServerTransport: require('@modelcontextprotocol/sdk/server/stdio.js')
        .StdioServerTransport as typeof StdioServerTransport,
    };
    expect(cjs.InMemoryTransport).not.toBe(InMemoryTransport);
    expect(cjs.StdioServerTransport).not.toBe(StdioServerTransport);
    expect(isLocalTransport(new cjs.StdioServerTransport())).toBe(true);
    expect(isLocalTransport(new StdioServerTransport())).toBe(true);
    class Subclassed extends cjs.InMemoryTransport {}
    expect(isLocalTransport(new Subclassed())).toBe(true);
    expect(isLocalTransport(new ForwardingTransport(new InMemoryTransport()))).toBe(false);
    const [clientSide, serverSide] = cjs.InMemoryTransport.createLinkedPair();
    const connected = await connectOver(serverSide, clientSide);
    expect(await connected.whoami()).toMatchObject({ caller: 'local', local: true });
  });

  it('a test context is local unless given headers, and says so in request.local', () => {
    const bare = createTestContext();
    expect(bare.request.local).toBe(true);
    expect(bare.caller).toEqual({ id: 'local', kind: 'local' });
    const http = createTestContext({ request: { headers: {}, sessionId: 's-1' } });
    expect(http.request.local).toBe(false);
    expect(http.caller).toEqual({ id: 'session:s-1', kind: 'session' });
    expect(createTestContext({ request: { local: false } }).caller).toEqual({
      id: 'anonymous',
      kind: 'anonymous',
    });
  });
});

// A ceiling, not a measurement: starting node with tsx takes seconds on a busy two-core machine.
describe('stdio, a real child process', { timeout: 30_000 }, () => {
  const SERVER = fileURLToPath(new URL('./fixtures/whoami-server.ts', import.meta.url));
  const PACKAGE = fileURLToPath(new URL('..', import.meta.url));

  async function whoamiOverStdio(env: Record<string, string> = {}): Promise<unknown> {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ['--import', 'tsx', SERVER],
      cwd: PACKAGE,
      env: { ...getDefaultEnvironment(), ...env },
      stderr: 'ignore',
    });
    const client = new Client({ name: 'stdio-test-client', version: '0.0.0' });
    await client.connect(transport);
    open.push(client);
    return parseResultText((await client.callTool({ name: 'whoami', arguments: {} })) as CallToolResult);
  }

  it('over StdioServerTransport the caller is local', async () => {
    expect(await whoamiOverStdio()).toEqual({ ok: true, caller: 'local', kind: 'local', local: true });
  });

  it('an app that declares no transport local (stdio bridged to a socket) gets anonymous', async () => {
    expect(await whoamiOverStdio({ WHOAMI_NO_LOCAL: '1' })).toEqual({
      ok: true,
      caller: 'anonymous',
      kind: 'anonymous',
      local: false,
    });
  });
});
