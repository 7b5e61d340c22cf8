import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  createSilentLogger,
  defineTool,
  fail,
  type Logger,
  ok,
  registerTools,
  type ToolDefinition,
  ToolError,
  type ToolMiddleware,
} from '@toolgate/core';
import { connectTestClient, type TestClient, type TestClientOptions } from '@toolgate/core/testing';
import * as z from 'zod';
import { type AuditRecord, createFunctionSink } from '../src/index.js';

/** A sink that keeps records in memory, for exact assertions. */
export function memorySink(): { records: AuditRecord[]; sink: ReturnType<typeof createFunctionSink> } {
  const records: AuditRecord[] = [];
  return { records, sink: createFunctionSink((batch) => void records.push(...batch)) };
}

export const getOrder = defineTool({
  name: 'get_order',
  description: 'One order by id.',
  input: {
    id: z.string().max(20),
    password: z.string().optional(),
    note: z.string().optional(),
    nested: z.object({ items: z.array(z.object({ apiKey: z.string(), sku: z.string() })) }).optional(),
  },
  handler: async ({ id }, ctx) => {
    if (id === 'missing') return fail('not_found', `No order ${id}.`, { hint: 'Check the id.' });
    if (id === 'crash') throw new Error('connect ECONNREFUSED 10.0.0.5:5432');
    if (id === 'slow') {
      await new Promise((resolve, reject) => {
        const timer = setTimeout(resolve, 5_000);
        ctx.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(new ToolError('timeout', 'Cancelled.'));
        });
      });
    }
    return ok({ id, status: 'shipped' });
  },
});

export const echo = defineTool({
  name: 'echo',
  description: 'Echo a value.',
  input: { value: z.unknown() },
  handler: async ({ value }) => ok({ value }),
});

export const openConnections: TestClient[] = [];

export async function serve(
  middleware: ToolMiddleware[],
  tools: ToolDefinition[] = [getOrder as ToolDefinition, echo as ToolDefinition],
  client: TestClientOptions = {},
  logger: Logger = createSilentLogger(),
): Promise<TestClient> {
  const server = new McpServer({ name: 'audit-test', version: '1.0.0' });
  registerTools(server, tools, { middleware, logger });
  const connection = await connectTestClient(server, client);
  openConnections.push(connection);
  return connection;
}

export async function closeConnections(): Promise<void> {
  for (const connection of openConnections.splice(0)) await connection.close();
}

const CLI = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const run = promisify(execFile);

/** Runs the built CLI (`toolgate-audit`); resolves with its exit code and output whatever the code. */
export async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return cliWithEnv({}, ...args);
}

/** `cli` with variables added to the environment. */
export async function cliWithEnv(
  env: Record<string, string>,
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], {
      env: { ...process.env, ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}
