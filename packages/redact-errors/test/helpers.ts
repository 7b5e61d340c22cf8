import { createServer } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import {
  ERROR_META_KEY,
  type ErrorEnvelope,
  type Logger,
  registerTools,
  type ToolDefinition,
  type ToolMiddleware,
} from '@toolgate/core';
import { connectTestClient, parseResultText, type TestClient } from '@toolgate/core/testing';
import { expect } from 'vitest';

const open: TestClient[] = [];

/** A server with `tools` behind `middleware`, and a real SDK client connected to it. */
export async function serve(
  tools: readonly ToolDefinition[],
  middleware: ToolMiddleware[],
  logger: Logger,
): Promise<TestClient> {
  const server = new McpServer({ name: 'redact-errors-test', version: '1.0.0' });
  registerTools(server, tools as ToolDefinition[], { middleware, logger });
  const client = await connectTestClient(server);
  open.push(client);
  return client;
}

/** Closes every client `serve` opened (call in afterEach). */
export async function closeAll(): Promise<void> {
  await Promise.all(open.splice(0).map((client) => client.close()));
}

/** What core's `newIncidentId()` produces. */
export const INCIDENT_ID = /^inc_[A-Za-z0-9_-]{12}$/;

/** The envelope the model reads in `content`, checked to equal the `_meta` envelope machines read. */
export function seenEnvelope(result: CallToolResult): ErrorEnvelope {
  expect(result.isError).toBe(true);
  const envelope = parseResultText(result) as ErrorEnvelope;
  expect(result._meta?.[ERROR_META_KEY]).toEqual(envelope);
  return envelope;
}

/** What `run` rejected with (a real library's error to carry into a result). */
export async function rejection(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

/** A loopback port nothing listens on (it was free a moment ago): a real ECONNREFUSED. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
