import { realpathSync } from 'node:fs';
import { defineTool, fail, ok, type ToolDefinition } from '@toolgate/core';
import { option, safeExec } from '@toolgate/exec';
import type { Queryable } from '@toolgate/sql';
import * as z from 'zod';
import { bindCustomerId } from '../customer-scope.js';

export interface RenderInvoiceOptions {
  db: Queryable;
  /** Absolute path of the bundled invoice CLI (dist/invoice-cli.js). */
  invoiceCli: string;
  /** Absolute path of the Node.js binary that runs it. @default process.execPath */
  node?: string;
  /** Working directory of the CLI. */
  cwd: string;
  /** Bind the customer id from the caller's token, as the order tools do. @default false */
  customerScoped?: boolean;
}

// Written by this app, parameterized; the model only supplies the id, checked by the schema first.
const ORDER_FOR_INVOICE = `SELECT order_id, customer_email, status, total_cents, currency, item_count, created_at
  FROM orders WHERE order_id = $1`;
const ORDER_FOR_INVOICE_SCOPED = `${ORDER_FOR_INVOICE} AND customer_id = $2`;

/**
 * `render_invoice`: looks the order up, then runs the bundled invoice CLI by absolute path with an
 * argv array (no shell); every value passed is tagged and inline, so it can never become an option.
 */
export function renderInvoiceTool(options: RenderInvoiceOptions): ToolDefinition {
  // exec wants the real file on its allowlist (node is often a symlink).
  const node = options.node ?? realpathSync(process.execPath);
  return defineTool({
    name: 'render_invoice',
    title: 'Render an invoice',
    description:
      'Plain-text invoice of ONE order by its 16-digit order id, for the user to read or copy. ' +
      'Not for refunds or changes: the invoice only shows what was ordered and paid.',
    input: {
      order_id: z
        .string()
        .regex(/^\d{16}$/)
        .describe('The 16-digit order id.'),
    },
    output: { order_id: z.string(), invoice: z.string() },
    annotations: { readOnlyHint: true, openWorldHint: false },
    // Bound by core before the chain, so the customer is part of every key derived from the call.
    bind: bindCustomerId(options.customerScoped ?? false),
    handler: async ({ order_id }, ctx) => {
      const customerId = ctx.bindings.customerId;
      const rows = await options.db.readOnly({ timeoutMs: 2000, signal: ctx.signal }, (runner) =>
        options.customerScoped
          ? runner.query(ORDER_FOR_INVOICE_SCOPED, [order_id, customerId])
          : runner.query(ORDER_FOR_INVOICE, [order_id]),
      );
      const order = rows.rows[0];
      if (!order) {
        return fail('not_found', `No order ${order_id}.`, {
          hint: 'Check the 16-digit id with the user, or find the order with search_orders.',
        });
      }
      // Each value is the database's, not the model's, and goes inline (`--customer=<value>`): an inline
      // value can never read as an option, so a value starting with "-" (an address such as
      // "-ops@example.com" is valid) is rendered, not refused as if the model had sent it.
      const field = (flag: string, text: string) => option(flag, text, { inline: true, allowDash: true });
      const outcome = await safeExec(
        node,
        [
          options.invoiceCli,
          field('--order-id', String(order.order_id)),
          field('--customer', String(order.customer_email)),
          field('--status', String(order.status)),
          field('--total-cents', String(order.total_cents)),
          field('--currency', String(order.currency)),
          field('--items', String(order.item_count)),
          field('--created-at', new Date(order.created_at as string).toISOString()),
        ],
        {
          allow: [node],
          cwd: options.cwd,
          timeoutMs: 5000,
          maxOutputBytes: 64 * 1024,
          signal: ctx.signal,
          logger: ctx.logger,
        },
      );
      // A cut invoice would read as a whole one without its last lines (the total): none is better.
      if (outcome.exitCode !== 0 || outcome.truncated) {
        return fail('unavailable', 'The invoice could not be rendered.', {
          hint: 'Tell the user the invoice is unavailable right now; do not retry.',
          retryable: false,
        });
      }
      return ok({ order_id, invoice: outcome.stdout });
    },
  });
}
