import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { defineTool, fail, ok, type ToolDefinition, type ToolResult } from '@toolgate/core';
import { serveTools } from '@toolgate/core/testing';
import { afterEach } from 'vitest';
import * as z from 'zod';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A refund tool whose handler counts its runs; `outcomes` decides each run's result (default: success). */
export function refundTool(options: { delayMs?: number; outcomes?: ('ok' | 'fail' | 'throw')[] } = {}) {
  const runs = { count: 0 };
  const tool = defineTool({
    name: 'create_refund',
    description: 'Refund an amount on an order. Runs once per request.',
    input: { order_id: z.string(), amount: z.number().positive(), confirmation: z.string().optional() },
    handler: async ({ order_id, amount }): Promise<ToolResult> => {
      runs.count += 1;
      const run = runs.count;
      await sleep(options.delayMs ?? 30);
      const outcome = options.outcomes?.[run - 1] ?? 'ok';
      if (outcome === 'fail') return fail('unavailable', 'The payment service did not answer.');
      if (outcome === 'throw') throw new Error('payment service exploded');
      return ok({ refund_id: `R-${run}`, order_id, amount });
    },
  }) as ToolDefinition;
  return { tool, runs };
}

export const readTool = defineTool({
  name: 'get_order',
  description: 'Read an order.',
  input: { order_id: z.string() },
  handler: async ({ order_id }) => ok({ order_id, status: 'open' }),
}) as ToolDefinition;

export function authAs(subject: string): AuthInfo {
  return {
    token: `token-${subject}`,
    clientId: 'desk',
    scopes: [],
    extra: { iss: 'https://idp.test', sub: subject },
  };
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

/** `serveTools`, its client closed after each test. */
export async function serve(...args: Parameters<typeof serveTools>) {
  const client = await serveTools(...args);
  closers.push(() => client.close());
  return client;
}
