import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  createSilentLogger,
  defineTool,
  fail,
  type Logger,
  ok,
  type PolicyDecision,
  registerTools,
  type ToolDefinition,
  type ToolMiddleware,
} from '@toolgate/core';
import { connectTestClient, type TestClient, type TestClientOptions } from '@toolgate/core/testing';
import * as z from 'zod';

/** Handler invocations per tool, so a test proves a call did or did not reach the handler. */
export type Invocations = Record<string, number>;

/** A gate a handler waits at, so a test holds a call in flight. */
export interface Gate {
  /** Resolves when the first call reaches the gate. */
  readonly entered: Promise<void>;
  /** Resolves when the test opens the gate. */
  readonly opened: Promise<void>;
  enter(): void;
  open(): void;
}

export function createGate(): Gate {
  let enter!: () => void;
  let open!: () => void;
  const entered = new Promise<void>((resolve) => {
    enter = resolve;
  });
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { entered, opened, enter, open };
}

export interface Fixture {
  readonly invocations: Invocations;
  readonly tools: ToolDefinition[];
  /** The gate `get_order_status` waits at for id `slow`. */
  readonly gate: Gate;
}

/** The tools every test serves; each counts its invocations. */
export function createFixture(): Fixture {
  const invocations: Invocations = {};
  const count = (name: string): void => {
    invocations[name] = (invocations[name] ?? 0) + 1;
  };
  const fixture: Fixture = { invocations, tools: [], gate: createGate() };
  let flakyCalls = 0;
  fixture.tools.push(
    defineTool({
      name: 'search_orders',
      description: 'Search orders by status.',
      input: {
        status: z.enum(['open', 'shipped', 'cancelled']),
        days: z.number().int().min(1).max(90).default(30),
        filters: z.record(z.string(), z.string()).optional(),
      },
      output: { items: z.array(z.object({ id: z.string() })) },
      handler: async ({ status, days }) => {
        count('search_orders');
        if (status === 'cancelled') return ok({ items: [] }, { total: 0, note: 'No orders match.' });
        return ok({ items: [{ id: `${status}-${days}` }] }, { total: 1 });
      },
    }) as ToolDefinition,
    defineTool({
      name: 'get_order_status',
      description: 'One order by id.',
      input: { id: z.string() },
      handler: async ({ id }, ctx) => {
        count('get_order_status');
        if (id === 'missing') return fail('not_found', `No order ${id}.`, { hint: 'Check the id.' });
        if (id === 'busy') return fail('unavailable', 'Carrier API is down.', { retryAfterMs: 150 });
        if (id === 'slow-db') return fail('timeout', 'The lookup took too long.');
        if (id === 'crash') throw new Error('connect ECONNREFUSED 10.0.0.5:5432');
        if (id === 'flaky') {
          flakyCalls += 1;
          if (flakyCalls === 1) return fail('unavailable', 'Carrier API is down.', { retryAfterMs: 30 });
        }
        if (id === 'slow') {
          fixture.gate.enter();
          await fixture.gate.opened;
        }
        if (id === 'cancel-me') {
          await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
        }
        return ok({ id, status: 'shipped' });
      },
    }) as ToolDefinition,
    defineTool({
      name: 'job_status',
      description: 'Poll a background job.',
      input: { jobId: z.string() },
      handler: async ({ jobId }) => {
        count('job_status');
        return ok({ jobId, state: 'running' });
      },
    }) as ToolDefinition,
    defineTool({
      name: 'lookup_sku',
      description: 'Find a product by SKU.',
      input: { sku: z.string() },
      output: { found: z.boolean() },
      handler: async () => {
        count('lookup_sku');
        return ok({ found: false });
      },
    }) as ToolDefinition,
  );
  return fixture;
}

/** Records each call's policy decisions as the outermost middleware saw them. */
export function decisionRecorder(into: PolicyDecision[][]): ToolMiddleware {
  return async (ctx, next) => {
    try {
      return await next();
    } finally {
      into.push([...ctx.decisions]);
    }
  };
}

const open: TestClient[] = [];

/** A server with `middleware` and a real client connected to it; closed by `closeAll()`. */
export async function serve(
  tools: ToolDefinition[],
  middleware: ToolMiddleware[],
  options: TestClientOptions & { logger?: Logger } = {},
): Promise<TestClient> {
  const server = new McpServer({ name: 'repeat-guard-test', version: '1.0.0' });
  registerTools(server, tools, { middleware, logger: options.logger ?? createSilentLogger() });
  const { logger: _logger, ...clientOptions } = options;
  const client = await connectTestClient(server, clientOptions);
  open.push(client);
  return client;
}

export async function closeAll(): Promise<void> {
  await Promise.all(open.splice(0).map((client) => client.close()));
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
