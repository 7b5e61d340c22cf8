import { fail, type ToolDefinition, type ToolMiddleware } from '@toolgate/core';
import { type BindSource, type Queryable, sqlTool } from '@toolgate/sql';
import { customerIdOf } from '../customer-scope.js';
import { ORDER_STATUSES } from '../db.js';

const ORDER_COLUMNS = [
  'order_id',
  'status',
  'customer_email',
  'total_cents',
  'currency',
  'item_count',
  'created_at',
  'shipped_at',
  'carrier',
  'tracking_number',
] as const;

export interface OrderToolsOptions {
  db: Queryable;
  /**
   * Bind the customer id from the caller's token (`authInfo.extra.customerId`): a customer's agent
   * sees only that customer's orders. Off for a support desk that serves every customer.
   * @default false
   */
  customerScoped?: boolean;
  /** Statement timeout per call. @default 2000 */
  timeoutMs?: number;
}

// Bound by core before the chain (the tool's `bind`), so the customer is part of every key of the call.
// Named `customerId` as every other scoped tool binds it: per-caller keys (the rate limit's budget) are
// the identity plus the bindings, and a name of its own would count these tools' calls apart.
const customerBinding = {
  customerId: {
    column: 'customer_id',
    value: ({ request }: BindSource) => customerIdOf(request),
  },
};

/** `search_orders`: lists of orders by status, age, customer email; never one order by id. */
export function searchOrdersTool(options: OrderToolsOptions): ToolDefinition {
  return sqlTool({
    name: 'search_orders',
    title: 'Search orders',
    description:
      'List orders by status, age and customer email, newest first by default. Use it to find orders or ' +
      'count them ("how many orders are still pending this week?"). Not for a single known order id: use ' +
      'get_order_status. Read-only: it cannot change, cancel or refund an order. ' +
      'Defaults: days=30, limit=10 (at most 50); the total says how many match in all.',
    db: options.db,
    from: 'orders',
    columns: [...ORDER_COLUMNS],
    filters: {
      status: {
        kind: 'enum',
        values: [...ORDER_STATUSES],
        description: 'Only orders in this status. Leave out for every status.',
      },
      days: {
        kind: 'withinDays',
        column: 'created_at',
        max: 90,
        default: 30,
        description: 'Only orders placed within the last N days (1 to 90, default 30).',
      },
      customer_email: {
        kind: 'prefix',
        maxLength: 100,
        description: 'Only orders whose customer email starts with this text, e.g. "customer042".',
      },
    },
    ...(options.customerScoped ? { bind: customerBinding } : {}),
    sort: {
      keys: { created_at: 'created_at', total: 'total_cents' },
      default: 'created_at_desc',
      tiebreaker: 'order_id',
    },
    limit: { default: 10, max: 50 },
    timeoutMs: options.timeoutMs ?? 2000,
    noun: 'orders',
  });
}

// sqlTool answers an empty list; for one order by id, "absent" is not_found with a next step.
const notFoundWhenEmpty: ToolMiddleware = async (ctx, next) => {
  const result = await next();
  const items = (result.structuredContent as { items?: unknown[] } | undefined)?.items;
  if (result.isError !== true && Array.isArray(items) && items.length === 0) {
    return fail('not_found', `No order ${String(ctx.args.order_id)}.`, {
      hint: 'Check the 16-digit id with the user, or find the order with search_orders.',
    });
  }
  return result;
};

/** `get_order_status`: one order by its 16-digit id. */
export function getOrderStatusTool(options: OrderToolsOptions): ToolDefinition {
  return sqlTool({
    name: 'get_order_status',
    title: 'Get order status',
    description:
      'Status, totals, dates and tracking number of ONE order by its 16-digit order id. Use it when the user ' +
      'gives an order id. Not for lists or searches: use search_orders. Answers not_found when no order has that id.',
    db: options.db,
    from: 'orders',
    columns: [...ORDER_COLUMNS],
    filters: {
      order_id: {
        kind: 'equals',
        type: 'string',
        pattern: /^\d{16}$/,
        maxLength: 16,
        required: true,
        description: 'The 16-digit order id, digits only, e.g. "4000000000007919".',
      },
    },
    ...(options.customerScoped ? { bind: customerBinding } : {}),
    limit: { default: 1, max: 1 },
    timeoutMs: options.timeoutMs ?? 2000,
    noun: 'orders',
    middleware: [notFoundWhenEmpty],
  });
}
