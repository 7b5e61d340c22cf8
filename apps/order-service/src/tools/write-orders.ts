import { randomUUID } from 'node:crypto';
import { confirmationArgument } from '@toolgate/confirm';
import { defineTool, fail, ok, type ToolContext, type ToolDefinition } from '@toolgate/core';
import * as z from 'zod';
import { bindCustomerId } from '../customer-scope.js';
import type { WriteTransactions } from '../write-transaction.js';

export interface WriteToolsOptions {
  db: WriteTransactions;
  /** Bind the customer id from the caller's token: a customer changes only their own orders. @default false */
  customerScoped?: boolean;
  /** Statement timeout of each write transaction, in ms. @default 2000 */
  timeoutMs?: number;
  /**
   * How long a change made by a call is found again when the same call (idempotency's key) runs once
   * more, and answered instead of made twice: a COMMIT whose acknowledgement was lost, a crash between
   * the COMMIT and the idempotency store, a claim that expired. Idempotency's `windowMs`. @default 600000
   */
  replayWindowMs?: number;
}

const ORDER_ID = z
  .string()
  .regex(/^\d{16}$/)
  .describe('The 16-digit order id.');
// PostgreSQL text holds no NUL (the write failed as an internal error), and a surrogate without its
// pair is no character (the driver would store U+FFFD): both are the model's mistake, refused as such.
const REASON = z
  .string()
  .trim()
  .min(3)
  .max(300)
  // biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is the character refused.
  .regex(/^[^\u0000\p{Cs}]*$/u, 'text without NUL characters or unpaired surrogates')
  .describe('Why, in the customer’s words (3 to 300 characters); recorded with the change.');

// Only orders that were paid can be refunded; only orders that have not left can be cancelled.
const REFUNDABLE = ['paid', 'shipped', 'delivered'] as const;
const CANCELLABLE = ['pending', 'paid'] as const;

interface OrderRow {
  status: string;
  total_cents: number;
  currency: string;
}

/**
 * `request_refund`: records a refund of part or all of what a customer paid, in its own table, and marks
 * the order refunded once nothing is left to refund. One read-write transaction that locks exactly the
 * order's row; the amount is bounded by what was paid less what was already refunded.
 */
export function requestRefundTool(options: WriteToolsOptions): ToolDefinition {
  const scoped = options.customerScoped ?? false;
  const window = replayWindowSeconds(options);
  return defineTool({
    name: 'request_refund',
    title: 'Refund an order',
    description:
      'Refund part or all of ONE paid order (status paid, shipped or delivered) by its 16-digit id. ' +
      'The user confirms the refund before it is made. Use search_docs for the refund policy first. ' +
      'Not for cancelling an order that has not shipped: use cancel_order.',
    input: {
      order_id: ORDER_ID,
      amount_cents: z
        .number()
        .int()
        .min(1)
        .max(10_000_000)
        .describe('Amount to refund in cents; at most what was paid less earlier refunds.'),
      reason: REASON,
      confirmation: confirmationArgument,
    },
    output: {
      refund_id: z.string(),
      order_id: z.string(),
      amount_cents: z.number(),
      refunded_cents: z.number(),
      currency: z.string(),
      status: z.string(),
    },
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    bind: bindCustomerId(scoped),
    handler: async ({ order_id, amount_cents, reason }, ctx) =>
      options.db.readWrite({ timeoutMs: options.timeoutMs ?? 2000, signal: ctx.signal }, async (runner) => {
        const order = await lockOrder(runner, order_id, ctx.bindings.customerId);
        if (!order) return notFound(order_id);
        // Read only now that this transaction holds the order's lock (a statement of its own, so a new
        // snapshot): a refund another call committed while this one waited for the lock counts.
        const callKey = claimedKey(ctx);
        const { refunded_cents, made } = await refundsOf(runner, order_id, callKey, window);
        if (made) {
          return ok({
            refund_id: String(made.refund_id),
            order_id,
            amount_cents: Number(made.amount_cents),
            refunded_cents,
            currency: order.currency,
            status: order.status,
          });
        }
        if (!(REFUNDABLE as readonly string[]).includes(order.status)) {
          return fail(
            'invalid_argument',
            `Order ${order_id} is ${order.status}; only paid orders can be refunded.`,
            {
              hint:
                order.status === 'refunded'
                  ? 'It was already refunded in full; tell the user.'
                  : 'A pending order is cancelled with cancel_order instead; a cancelled one has nothing to refund.',
            },
          );
        }
        const left = order.total_cents - refunded_cents;
        if (amount_cents > left) {
          return fail(
            'invalid_argument',
            `At most ${left} cents of order ${order_id} can still be refunded.`,
            {
              hint: `Ask the user to confirm an amount of at most ${left} cents.`,
              fields: [{ path: 'amount_cents', expected: `at most ${left}` }],
            },
          );
        }
        const refundId = randomUUID();
        await runner.query(
          `INSERT INTO refunds (refund_id, order_id, amount_cents, reason, requested_by, call_key)
           VALUES ($1, $2, $3, $4, $5, $6)`,
          [refundId, order_id, amount_cents, reason, ctx.caller.id, callKey],
        );
        const refunded = refunded_cents + amount_cents;
        let status = order.status;
        if (refunded === order.total_cents) {
          await updateExactlyOne(runner, `UPDATE orders SET status = 'refunded' WHERE order_id = $1`, [
            order_id,
          ]);
          status = 'refunded';
        }
        return ok({
          refund_id: refundId,
          order_id,
          amount_cents,
          refunded_cents: refunded,
          currency: order.currency,
          status,
        });
      }),
  });
}

/** `cancel_order`: cancels ONE order that has not shipped (pending or paid), recording why. */
export function cancelOrderTool(options: WriteToolsOptions): ToolDefinition {
  const scoped = options.customerScoped ?? false;
  const window = replayWindowSeconds(options);
  return defineTool({
    name: 'cancel_order',
    title: 'Cancel an order',
    description:
      'Cancel ONE order that has not shipped yet (status pending or paid) by its 16-digit id. ' +
      'The user confirms the cancellation before it is made. A shipped order cannot be cancelled: ' +
      'explain the returns policy (search_docs) instead.',
    input: { order_id: ORDER_ID, reason: REASON, confirmation: confirmationArgument },
    output: { order_id: z.string(), previous_status: z.string(), status: z.literal('cancelled') },
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    bind: bindCustomerId(scoped),
    handler: async ({ order_id, reason }, ctx) =>
      options.db.readWrite({ timeoutMs: options.timeoutMs ?? 2000, signal: ctx.signal }, async (runner) => {
        const order = await lockOrder(runner, order_id, ctx.bindings.customerId);
        if (!order) return notFound(order_id);
        const callKey = claimedKey(ctx);
        const made = await madeBy(runner, CANCELLATION_MADE_BY, order_id, callKey, window);
        if (made) {
          return ok({
            order_id,
            previous_status: String(made.previous_status),
            status: 'cancelled' as const,
          });
        }
        if (!(CANCELLABLE as readonly string[]).includes(order.status)) {
          return fail(
            'invalid_argument',
            `Order ${order_id} is ${order.status} and can no longer be cancelled.`,
            {
              hint:
                order.status === 'cancelled'
                  ? 'It is already cancelled; tell the user.'
                  : 'Explain the returns policy (search_docs) instead.',
            },
          );
        }
        // A cancelled order is refunded in full (docs/refund-policy.md): one already refunded in part
        // would be paid back twice. Its lock is held, so no refund can be added meanwhile.
        const { refunded_cents } = await refundsOf(runner, order_id, null, window);
        if (refunded_cents > 0) {
          return fail(
            'invalid_argument',
            `Order ${order_id} was already refunded ${refunded_cents} of ${order.total_cents} cents; cancelling it would refund it again.`,
            {
              hint: 'Do not cancel it. If the user wants the rest back, refund what is left with request_refund (after their confirmation).',
            },
          );
        }
        await updateExactlyOne(runner, `UPDATE orders SET status = 'cancelled' WHERE order_id = $1`, [
          order_id,
        ]);
        await runner.query(
          `INSERT INTO order_cancellations (order_id, previous_status, reason, requested_by, call_key)
           VALUES ($1, $2, $3, $4, $5)`,
          [order_id, order.status, reason, ctx.caller.id, callKey],
        );
        return ok({ order_id, previous_status: order.status, status: 'cancelled' as const });
      }),
  });
}

// What was refunded so far, and a refund this same call made within the window (`call_key = NULL`
// matches nothing: without idempotency there is no call key). One statement, sent after the order's
// row is locked: under READ COMMITTED it reads every refund committed before the lock was granted.
// Computed inside the locking statement instead, the sum came from that statement's snapshot, taken
// before it waited: two refunds sent together each saw none of the other and both passed the bound.
const REFUNDS_OF = `SELECT (SELECT coalesce(sum(amount_cents), 0)::integer FROM refunds WHERE order_id = $1) AS refunded_cents,
       made.refund_id, made.amount_cents
  FROM (SELECT 1) AS one
  LEFT JOIN LATERAL (SELECT refund_id, amount_cents FROM refunds
     WHERE order_id = $1 AND call_key = $2 AND created_at > now() - make_interval(secs => $3)
     ORDER BY created_at DESC LIMIT 1) AS made ON true`;
// A cancellation this same call made within the window (the order's row is locked, so no other
// transaction can add one meanwhile).
const CANCELLATION_MADE_BY = `SELECT previous_status FROM order_cancellations
  WHERE order_id = $1 AND call_key = $2 AND created_at > now() - make_interval(secs => $3)`;

/**
 * The key idempotency claimed for this call (its decision, recorded before the tool runs): caller,
 * bindings, tool and arguments, or the client's own key scoped by the caller. Null without idempotency.
 */
function claimedKey(ctx: ToolContext): string | null {
  for (const decision of ctx.decisions) {
    if (decision.by === 'idempotency' && decision.action === 'claimed') {
      const key = (decision.detail as { key?: unknown } | undefined)?.key;
      return typeof key === 'string' ? key : null;
    }
  }
  return null;
}

async function madeBy(
  runner: Runner,
  query: string,
  orderId: string,
  callKey: string | null,
  windowSeconds: number,
): Promise<Record<string, unknown> | undefined> {
  if (callKey === null) return undefined;
  const { rows } = await runner.query(query, [orderId, callKey, windowSeconds]);
  return rows[0];
}

function replayWindowSeconds(options: WriteToolsOptions): number {
  const ms = options.replayWindowMs ?? 600_000;
  if (!(Number.isSafeInteger(ms) && ms >= 0)) {
    throw new TypeError(`write tools: replayWindowMs must be a whole number of ms, got ${String(ms)}`);
  }
  return ms / 1000;
}

type Runner = Parameters<Parameters<WriteTransactions['readWrite']>[1]>[0];

// Locks exactly the order's row (and only when it belongs to the bound customer, when scoped). Only
// the order's own columns: they are read after the lock is granted (the newest version of the row).
async function lockOrder(
  runner: Runner,
  orderId: string,
  customerId: unknown,
): Promise<OrderRow | undefined> {
  const scoped = typeof customerId === 'number';
  const { rows } = await runner.query(
    `SELECT o.status, o.total_cents, o.currency
       FROM orders o
      WHERE o.order_id = $1${scoped ? ' AND o.customer_id = $2' : ''}
      FOR UPDATE OF o`,
    scoped ? [orderId, customerId] : [orderId],
  );
  return rows[0] as OrderRow | undefined;
}

/** What was refunded of the (locked) order so far, and this call's own refund when it made one. */
async function refundsOf(
  runner: Runner,
  orderId: string,
  callKey: string | null,
  windowSeconds: number,
): Promise<{ refunded_cents: number; made: { refund_id: unknown; amount_cents: unknown } | undefined }> {
  const { rows } = await runner.query(REFUNDS_OF, [orderId, callKey, windowSeconds]);
  const row = rows[0] as { refunded_cents: number; refund_id: unknown; amount_cents: unknown };
  return {
    refunded_cents: Number(row.refunded_cents),
    made: row.refund_id === null || row.refund_id === undefined ? undefined : row,
  };
}

async function updateExactlyOne(runner: Runner, text: string, values: readonly unknown[]): Promise<void> {
  const { rowCount } = await runner.query(text, values);
  // The row is locked by lockOrder: anything but one row means the statement is wrong, not the data.
  if (rowCount !== 1) throw new Error(`write touched ${rowCount} rows instead of exactly one`);
}

function notFound(orderId: string) {
  return fail('not_found', `No order ${orderId}.`, { hint: 'Check the id with search_orders.' });
}
