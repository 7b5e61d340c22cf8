import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  type CallToolResult,
  type ClientCapabilities,
  type CreateMessageRequest,
  CreateMessageRequestSchema,
  type CreateMessageResult,
  type ElicitRequest,
  ElicitRequestSchema,
  type ElicitResult,
  LoggingMessageNotificationSchema,
  type ServerNotification,
} from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';
import { defineTool } from './define-tool.js';
import { createSilentLogger } from './logger.js';
import { type RegisterToolsOptions, registerTools } from './register.js';
import { type ErrorEnvelope, errorOf, fail, ok, type ToolResult } from './result.js';
import type { ToolDefinition, ToolMiddleware } from './types.js';

export interface TestClientOptions {
  /** Auth info attached to every request, as a verified bearer token's would be. @default undefined */
  authInfo?: AuthInfo;
  /** The session id the server sees (`ctx.request.sessionId`). @default undefined */
  sessionId?: string;
  /** The client's name in `initialize`. @default 'toolgate-test-client' */
  clientName?: string;
  /**
   * Answers `elicitation/create` as the person would; the client then declares the elicitation
   * capability (form, and URL when `elicitUrl`). @default undefined (no elicitation capability)
   */
  onElicit?: (params: ElicitRequest['params']) => ElicitResult | Promise<ElicitResult>;
  /** Declare URL-mode elicitation too. @default false */
  elicitUrl?: boolean;
  /** Answers `sampling/createMessage`; the client then declares sampling. @default undefined */
  onSample?: (params: CreateMessageRequest['params']) => CreateMessageResult | Promise<CreateMessageResult>;
}

export interface CallOptions {
  /** `params._meta` of the request (e.g. `traceparent`). */
  meta?: Record<string, unknown>;
  /** Aborts the request from the client side (the server's `ctx.signal` follows). */
  signal?: AbortSignal;
  /** Request timeout in ms. @default 60000 */
  timeoutMs?: number;
  /** Sends a progress token and receives the server's progress notifications. */
  onProgress?: (progress: { progress: number; total?: number; message?: string }) => void;
}

/** A real SDK client connected to a server over the in-memory transport. */
export interface TestClient {
  readonly client: Client;
  /** Every notification the server sent (progress, log messages), in order. */
  readonly notifications: ServerNotification[];
  /** Sends a real `tools/call` and returns the result exactly as the client received it. */
  callTool(name: string, args?: Record<string, unknown>, options?: CallOptions): Promise<CallToolResult>;
  /** `callTool`, then the parsed JSON of the first text content (what the model reads). */
  callToolJson(name: string, args?: Record<string, unknown>, options?: CallOptions): Promise<unknown>;
  close(): Promise<void>;
}

/**
 * Connects a real SDK `Client` to `server` over a linked in-memory transport pair, so tests drive
 * real `tools/call` round trips (JSON-RPC framing, SDK validation, cancellation).
 */
export async function connectTestClient(
  server: McpServer,
  options: TestClientOptions = {},
): Promise<TestClient> {
  const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
  if (options.sessionId !== undefined) serverTransport.sessionId = options.sessionId;
  if (options.authInfo !== undefined) {
    const authInfo = options.authInfo;
    const send = clientTransport.send.bind(clientTransport);
    clientTransport.send = (message, sendOptions) => send(message, { ...sendOptions, authInfo });
  }
  const capabilities: ClientCapabilities = {};
  if (options.onElicit) capabilities.elicitation = options.elicitUrl ? { form: {}, url: {} } : { form: {} };
  if (options.onSample) capabilities.sampling = {};
  const client = new Client(
    { name: options.clientName ?? 'toolgate-test-client', version: '0.0.0' },
    { capabilities },
  );
  const notifications: ServerNotification[] = [];
  client.fallbackNotificationHandler = async (notification) => {
    notifications.push(notification as ServerNotification);
  };
  // The SDK client dispatches log messages to their own handler; keep them in the same list.
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
    notifications.push(notification);
  });
  const onElicit = options.onElicit;
  if (onElicit) client.setRequestHandler(ElicitRequestSchema, (request) => onElicit(request.params));
  const onSample = options.onSample;
  if (onSample) client.setRequestHandler(CreateMessageRequestSchema, (request) => onSample(request.params));
  await server.connect(serverTransport);
  await client.connect(clientTransport);
  const callTool = async (
    name: string,
    args: Record<string, unknown> = {},
    callOptions: CallOptions = {},
  ): Promise<CallToolResult> => {
    const params: { name: string; arguments: Record<string, unknown>; _meta?: Record<string, unknown> } = {
      name,
      arguments: args,
    };
    if (callOptions.meta) params._meta = callOptions.meta;
    const requestOptions: { signal?: AbortSignal; timeout?: number } = {
      timeout: callOptions.timeoutMs ?? 60_000,
    };
    if (callOptions.signal) requestOptions.signal = callOptions.signal;
    if (callOptions.onProgress)
      (requestOptions as { onprogress?: unknown }).onprogress = callOptions.onProgress;
    return (await client.callTool(params, undefined, requestOptions)) as CallToolResult;
  };
  return {
    client,
    notifications,
    callTool,
    async callToolJson(name, args, callOptions) {
      return parseResultText(await callTool(name, args, callOptions));
    },
    async close() {
      await client.close();
      await server.close();
    },
  };
}

export interface ServeToolsOptions extends RegisterToolsOptions, TestClientOptions {
  /** The McpServer's info. @default { name: 'toolgate-test-server', version: '0.0.0' } */
  serverInfo?: { name: string; version: string };
}

/**
 * One line for a test: a new McpServer with `tools` registered through `registerTools` (with the given
 * middleware, logger, identity rule), connected to a real SDK client over the in-memory transport.
 */
export async function serveTools(
  tools: readonly ToolDefinition[],
  options: ServeToolsOptions = {},
): Promise<TestClient & { readonly server: McpServer }> {
  const server = new McpServer(options.serverInfo ?? { name: 'toolgate-test-server', version: '0.0.0' });
  const registerOptions: RegisterToolsOptions = {};
  if (options.middleware) registerOptions.middleware = options.middleware;
  if (options.logger) registerOptions.logger = options.logger;
  if (options.identify) registerOptions.identify = options.identify;
  if (options.localTransport) registerOptions.localTransport = options.localTransport;
  if (options.clientRequests) registerOptions.clientRequests = options.clientRequests;
  if (options.abandonAfterMs !== undefined) registerOptions.abandonAfterMs = options.abandonAfterMs;
  registerTools(server, tools, registerOptions);
  const client = await connectTestClient(server, options);
  return Object.assign(client, { server });
}

/**
 * Microtask hops from a handler's return until the client holds the answer, through `middleware` (the
 * fewest of five `tools/call` round trips over the in-memory transport). For a middleware's own test: a
 * policy that only observes the outcome (see `afterSettled`) should answer in as many hops as no policy
 * at all. Each hop delays every answer, and over HTTP the SDK's Node adapter writes the answer at once
 * only when it comes within a few hops. `handler: 'async'` counts through an async handler (most real
 * tools): its own promise adds one hop, and core should add none beside it. `abandonAfterMs` as for
 * `registerTools`.
 */
export async function countAnswerHops(
  middleware: readonly ToolMiddleware[],
  options: { handler?: 'sync' | 'async'; abandonAfterMs?: number | false } = {},
): Promise<number> {
  let hops = 0;
  let counting = false;
  const count = (): void => {
    if (!counting) return;
    hops += 1;
    queueMicrotask(count);
  };
  const start = (): void => {
    hops = 0;
    counting = true;
    queueMicrotask(count);
  };
  const echo = defineTool({
    name: 'echo',
    description: 'Echo.',
    input: { q: z.string() },
    handler:
      options.handler === 'async'
        ? async ({ q }) => {
            start();
            return ok({ q });
          }
        : ({ q }) => {
            start();
            return ok({ q });
          },
  });
  const client = await serveTools([echo], {
    middleware: [...middleware],
    logger: createSilentLogger(),
    ...(options.abandonAfterMs !== undefined && { abandonAfterMs: options.abandonAfterMs }),
  });
  const counts: number[] = [];
  try {
    for (let i = 0; i < 5; i += 1) {
      await client.callTool('echo', { q: `v${i}` });
      counting = false;
      counts.push(hops);
    }
  } finally {
    await client.close();
  }
  return Math.min(...counts);
}

/** The parsed JSON of a result's first text content. */
export function parseResultText(result: CallToolResult): unknown {
  const text = result.content.find((part) => part.type === 'text');
  if (text?.type !== 'text') throw new Error('result has no text content');
  return JSON.parse(text.text);
}

/** The failure envelope of a result; throws when the result is a success (a test wanted a failure). */
export function expectFailure(result: CallToolResult): ErrorEnvelope {
  const envelope = errorOf(result);
  if (!envelope) throw new Error(`expected a failure, got success: ${JSON.stringify(result)}`);
  return envelope;
}

/**
 * What a circuit breaker's deadline does, for tests of a call answered before its handler finished: a
 * middleware that answers `timeout` after `ms` and leaves the chain below it running (its outcome, if it
 * comes later, is not this middleware's answer). An earlier outcome is passed on as it is.
 */
export function answerTimeoutAfter(ms: number): ToolMiddleware {
  return (ctx, next) =>
    new Promise<ToolResult>((resolve, reject) => {
      const timer = setTimeout(() => resolve(fail('timeout', `${ctx.toolName} did not finish in time.`)), ms);
      next().then(
        (result) => {
          clearTimeout(timer);
          resolve(result);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
}

export { type FaultProxy, type FaultProxyOptions, startFaultProxy } from './fault-proxy.js';
export {
  createTestContext,
  type LogEntry,
  recordingLogger,
  type TestContextOptions,
} from './test-context.js';

/**
 * For a suite that needs a service (PostgreSQL, Redis) its variable does not point at: registers one test
 * named for what did not run. In CI (`CI=true`) it fails; elsewhere it is reported as skipped with the
 * reason, so a missing service is counted and visible, never a silent pass. Pass vitest's `it`.
 */
export function reportMissingService(
  it: (name: string, fn: (context: { skip: (note?: string) => void }) => void) => void,
  what: string,
  variable: string,
  example: string,
): void {
  const reason = `needs ${variable} (e.g. ${example}): ${what} did not run`;
  it(reason, (context) => {
    if (process.env.CI === 'true') throw new Error(`${reason}; CI=true requires it`);
    context.skip(reason);
  });
}
