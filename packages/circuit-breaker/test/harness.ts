// Shared test harness: a real McpServer with scripted tools, a real SDK client, and recorders.
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  defineTool,
  fail,
  ok,
  type PolicyDecision,
  registerTools,
  type ToolContext,
  type ToolDefinition,
  ToolError,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import { connectTestClient, type LogEntry, recordingLogger, type TestClient } from '@toolgate/core/testing';
import * as z from 'zod';
import { type CircuitBreaker, type CircuitBreakerOptions, createCircuitBreaker } from '../src/index.js';

export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls until `check` holds (up to about a second), then asserts it. */
export async function waitFor(check: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !check(); i += 1) await sleep(5);
  if (!check()) throw new Error('waitFor: condition never held');
}

/** What a scripted handler does on one call. */
export type Step =
  | 'ok'
  | 'unavailable'
  | 'internal'
  | 'timeout'
  | 'throw'
  | 'invalid_argument'
  | 'not_found'
  | 'permission_denied'
  | 'repeated_call'
  | 'rate_limited'
  | ((ctx: ToolContext) => Promise<ToolResult>);

/** A tool that follows a script, one step per call ('ok' once the script runs out), counting calls. */
export interface ScriptedTool {
  readonly tool: ToolDefinition;
  readonly script: Step[];
  calls: number;
}

export function scriptedTool(
  name: string,
  script: Step[] = [],
  middleware: ToolMiddleware[] = [],
): ScriptedTool {
  const scripted: ScriptedTool = {
    script,
    calls: 0,
    tool: defineTool({
      name,
      description: `Scripted test tool ${name}.`,
      input: { id: z.string().max(20).optional() },
      middleware,
      handler: async (_args, ctx) => {
        scripted.calls += 1;
        const step = scripted.script.shift() ?? 'ok';
        if (typeof step === 'function') return step(ctx as ToolContext);
        switch (step) {
          case 'ok':
            return ok({ call: scripted.calls });
          case 'throw':
            throw new Error('connect ECONNREFUSED 127.0.0.1:9');
          case 'permission_denied':
            throw new ToolError('permission_denied', 'Not your order.');
          default:
            return fail(step, `Scripted ${step}.`);
        }
      },
    }) as unknown as ToolDefinition,
  };
  return scripted;
}

export interface Harness {
  client: TestClient;
  breakers: CircuitBreaker;
  logs: LogEntry[];
  /** The decisions of every finished call, in the order the calls finished. */
  decisions: PolicyDecision[][];
  /** Results as the outermost middleware saw them, in the order the calls finished. */
  results: ToolResult[];
  close(): Promise<void>;
}

let open: { close(): Promise<void> }[] = [];

/** Serves the tools with `[...outer, recorder, breakers]` as the global chain. */
export async function serve(
  tools: ScriptedTool[],
  options: CircuitBreakerOptions = {},
  outer: ToolMiddleware[] = [],
): Promise<Harness> {
  const logs: LogEntry[] = [];
  const decisions: PolicyDecision[][] = [];
  const results: ToolResult[] = [];
  const breakers = createCircuitBreaker(options);
  const recorder: ToolMiddleware = async (ctx, next) => {
    try {
      const result = await next();
      results.push(result);
      return result;
    } finally {
      decisions.push(ctx.decisions.map((decision) => ({ ...decision })));
    }
  };
  const server = new McpServer({ name: 'breaker-test', version: '1.0.0' });
  registerTools(
    server,
    tools.map((entry) => entry.tool),
    { middleware: [...outer, recorder, breakers], logger: recordingLogger(logs) },
  );
  const client = await connectTestClient(server);
  const harness: Harness = {
    client,
    breakers,
    logs,
    decisions,
    results,
    async close() {
      breakers.close();
      await client.close();
    },
  };
  open.push(harness);
  return harness;
}

/** A bearer token's info for `subject`, as a transport with bearer auth hands it over after verifying it. */
export function subjectToken(subject: string): AuthInfo {
  return {
    token: `token-of-${subject}`,
    clientId: 'support-portal',
    scopes: ['orders:read'],
    extra: { iss: 'https://idp.test', sub: subject },
  };
}

export interface CallersHarness {
  breakers: CircuitBreaker;
  logs: LogEntry[];
  /** The decisions of every finished call, of every caller, in the order the calls finished. */
  decisions: PolicyDecision[][];
  /** The client of `subject`. */
  as(subject: string): TestClient;
}

/**
 * One breaker in front of several callers: each subject gets its own real SDK client on its own
 * McpServer (as a Streamable HTTP server has one per session) with its own verified token, and every
 * server runs the same `[recorder, breakers]` chain.
 */
export async function serveCallers(
  tools: readonly ToolDefinition[],
  subjects: readonly string[],
  options: CircuitBreakerOptions = {},
): Promise<CallersHarness> {
  const logs: LogEntry[] = [];
  const decisions: PolicyDecision[][] = [];
  const breakers = createCircuitBreaker(options);
  const recorder: ToolMiddleware = async (ctx, next) => {
    try {
      return await next();
    } finally {
      decisions.push(ctx.decisions.map((decision) => ({ ...decision })));
    }
  };
  const clients = new Map<string, TestClient>();
  for (const subject of subjects) {
    const server = new McpServer({ name: 'breaker-test', version: '1.0.0' });
    registerTools(server, tools, { middleware: [recorder, breakers], logger: recordingLogger(logs) });
    clients.set(subject, await connectTestClient(server, { authInfo: subjectToken(subject) }));
  }
  open.push({
    async close() {
      breakers.close();
      await Promise.all([...clients.values()].map((client) => client.close()));
    },
  });
  return {
    breakers,
    logs,
    decisions,
    as(subject) {
      const client = clients.get(subject);
      if (client === undefined) throw new Error(`serveCallers: no client for ${subject}`);
      return client;
    },
  };
}

/** Closes every harness a test opened (call from afterEach). */
export async function closeAll(): Promise<void> {
  const closing = open;
  open = [];
  await Promise.all(closing.map((harness) => harness.close()));
}

/** The circuit-breaker decisions of one finished call, reduced to their actions. */
export function actions(decisions: PolicyDecision[] | undefined): string[] {
  return (decisions ?? []).filter((decision) => decision.by === 'circuit-breaker').map((d) => d.action);
}
