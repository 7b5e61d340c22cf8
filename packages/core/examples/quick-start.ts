// The README's usage example, compiled by `pnpm typecheck` so it cannot drift from the API.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import * as z from 'zod';
import { defineTool, fail, ok, registerTools, ToolError, type ToolMiddleware } from '../src/index.js';

interface Order {
  status: 'pending' | 'shipped' | 'delivered';
  customerId: number;
}
declare function findOrder(orderId: string): Promise<Order | undefined>;

export const getOrderStatus = defineTool({
  name: 'get_order_status',
  description: 'Status of one order by its 16-digit id. Use search_orders to find ids; not for lists.',
  input: {
    orderId: z
      .string()
      .regex(/^\d{16}$/)
      .describe('The 16-digit order id'),
  },
  output: { orderId: z.string(), status: z.enum(['pending', 'shipped', 'delivered']) },
  annotations: { readOnlyHint: true },
  // Taken from the verified token, never from the model; part of every key derived from the call.
  bind: (request) => {
    const customerId = request.authInfo?.extra?.customerId;
    if (request.authInfo && typeof customerId !== 'number') {
      throw new ToolError('permission_denied', 'This token is not tied to a customer.');
    }
    return { customerId };
  },
  handler: async ({ orderId }, ctx) => {
    await ctx.server.progress(0, 1, 'looking the order up');
    const order = await findOrder(orderId);
    if (!order || (ctx.bindings.customerId !== undefined && order.customerId !== ctx.bindings.customerId)) {
      return fail('not_found', `No order ${orderId}.`, { hint: 'Check the id with search_orders.' });
    }
    return ok({ orderId, status: order.status });
  },
});

export const timing: ToolMiddleware = async (ctx, next) => {
  const result = await next();
  ctx.logger.info(
    { tool: ctx.toolName, caller: ctx.caller.id, ms: performance.now() - ctx.startTime },
    'tool call',
  );
  return result;
};

export async function main(): Promise<void> {
  const server = new McpServer({ name: 'orders', version: '1.0.0' });
  registerTools(server, [getOrderStatus], { middleware: [timing] });
  await server.connect(new StdioServerTransport()); // register every tool before connect()
}
