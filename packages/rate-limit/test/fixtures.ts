import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import {
  defineTool,
  ok,
  type PolicyDecision,
  type ToolDefinition,
  type ToolMiddleware,
} from '@toolgate/core';
import { type LogEntry, recordingLogger, serveTools, type TestClient } from '@toolgate/core/testing';
import * as z from 'zod';

/** A bearer token's info as the transport would verify it: client id plus claims (no subject). */
export function token(clientId: string, extra: Record<string, unknown> = {}): AuthInfo {
  return { token: `t-${clientId}-${JSON.stringify(extra)}`, clientId, scopes: ['orders:read'], extra };
}

/** Counts handler runs per tool. */
export const runs = new Map<string, number>();

function countingTool(name: string): ToolDefinition {
  return defineTool({
    name,
    description: `Test tool ${name}.`,
    input: { q: z.string().max(20).optional() },
    handler: async () => {
      runs.set(name, (runs.get(name) ?? 0) + 1);
      return ok({ tool: name });
    },
  }) as ToolDefinition;
}

export const TOOLS = [countingTool('search_orders'), countingTool('get_order_status')];

/** Keeps each call's decisions, as audit would, from outside the rate limiter. */
export function decisionRecorder(): { middleware: ToolMiddleware; calls: PolicyDecision[][] } {
  const calls: PolicyDecision[][] = [];
  const middleware: ToolMiddleware = async (ctx, next) => {
    try {
      return await next();
    } finally {
      calls.push(ctx.decisions);
    }
  };
  return { middleware, calls };
}

const open: TestClient[] = [];

/** A real SDK client on a new McpServer with the given middleware, as `authInfo`'s caller. */
export async function serve(
  middleware: ToolMiddleware[],
  options: { authInfo?: AuthInfo; log?: LogEntry[] } = {},
): Promise<TestClient> {
  const client = await serveTools(TOOLS, {
    middleware,
    ...(options.authInfo === undefined ? {} : { authInfo: options.authInfo }),
    ...(options.log === undefined ? {} : { logger: recordingLogger(options.log) }),
  });
  open.push(client);
  return client;
}

export async function closeAll(): Promise<void> {
  await Promise.all(open.splice(0).map((client) => client.close()));
}
