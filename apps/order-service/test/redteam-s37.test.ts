// Session 37's red team on the order service's own tools: a refund then a cancellation paid an order
// back twice; a carrier's terminal escapes and direction overrides reached the model and the person
// as they were; a customer id past the database's integer range got a different answer from each tool.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { connectTestClient, expectFailure, parseResultText } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Running, startService } from './harness.js';

const tenant = (customerId: number) => ({
  token: `tenant-${customerId}-token-0123456789`,
  clientId: 'portal',
  scopes: ['orders:read', 'orders:write', 'docs:read'],
  extra: { customerId },
});

describe('customer-scoped writes and ids', () => {
  let running: Running;
  beforeAll(async () => {
    running = await startService({ customerScoped: true });
  }, 60_000);
  afterAll(async () => {
    await running?.stop();
  });
  const rows = async (text: string, values: unknown[] = []) =>
    (await running.service.db.pglite!.query<Record<string, unknown>>(text, values)).rows;

  it('an order refunded in part is not cancelled (a cancellation refunds it in full: it would be paid twice)', async () => {
    const [order] = await rows(
      `SELECT order_id, total_cents FROM orders WHERE customer_id = 42 AND status = 'paid' ORDER BY order_id LIMIT 1`,
    );
    const orderId = String(order!.order_id);
    const total = Number(order!.total_cents);
    const client = await connectTestClient(running.service.createServer(), {
      authInfo: tenant(42),
      onElicit: () => ({ action: 'accept' }),
    });
    try {
      const refund = parseResultText(
        await client.callTool('request_refund', {
          order_id: orderId,
          amount_cents: total - 1,
          reason: 'item damaged',
        }),
      ) as Record<string, unknown>;
      expect(refund).toMatchObject({ ok: true, refunded_cents: total - 1 });
      const cancel = expectFailure(
        (await client.callTool('cancel_order', {
          order_id: orderId,
          reason: 'changed my mind',
        })) as CallToolResult,
      );
      expect(cancel).toMatchObject({
        error: 'invalid_argument',
        message: `Order ${orderId} was already refunded ${total - 1} of ${total} cents; cancelling it would refund it again.`,
      });
      expect(await rows(`SELECT status FROM orders WHERE order_id = $1`, [orderId])).toEqual([
        { status: 'paid' },
      ]);
      expect(
        await rows(`SELECT count(*)::int AS n FROM order_cancellations WHERE order_id = $1`, [orderId]),
      ).toEqual([{ n: 0 }]);
    } finally {
      await client.close();
    }
  });

  it('a customer id past the database column (2^31, 2^53 - 1) gets one refusal from every tool', async () => {
    const calls: [string, Record<string, unknown>][] = [
      ['search_orders', {}],
      ['get_order_status', { order_id: '4000000053001867' }],
      ['render_invoice', { order_id: '4000000053001867' }],
      ['track_shipment', { tracking_number: 'TRK00006693' }],
      ['cancel_order', { order_id: '4000000056169467', reason: 'because' }],
      ['request_refund', { order_id: '4000000056169467', amount_cents: 5, reason: 'because' }],
    ];
    for (const customerId of [2_147_483_648, Number.MAX_SAFE_INTEGER]) {
      const client = await connectTestClient(running.service.createServer(), {
        authInfo: tenant(customerId),
        onElicit: () => ({ action: 'accept' }),
      });
      try {
        for (const [tool, args] of calls) {
          const answer = expectFailure((await client.callTool(tool, args)) as CallToolResult);
          expect(answer, `${tool} as customer ${customerId}`).toMatchObject({
            error: 'permission_denied',
            message: 'This token is not tied to a customer.',
          });
        }
      } finally {
        await client.close();
      }
    }
  });
});

describe("a carrier's answer", () => {
  let carrier: Server;
  let running: Running;
  beforeAll(async () => {
    carrier = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          trackingNumber: 'TRK00000001',
          carrier: '\x1b[2J\x1b]0;pwn\x07Parcel',
          status: 'in\u202etransit\u2066',
          events: [{ at: '2026-12-01', where: '\x1b[31mHub\tA', what: 'sorted\u009b' }],
        }),
      );
    });
    await new Promise<void>((done) => carrier.listen(0, '127.0.0.1', done));
    running = await startService({
      carrierUrl: `http://127.0.0.1:${(carrier.address() as AddressInfo).port}`,
    });
  }, 60_000);
  afterAll(async () => {
    await running?.stop();
    carrier?.closeAllConnections();
    carrier?.close();
  });

  it('shows terminal escapes and direction overrides as visible text, in structuredContent and in the text', async () => {
    const client = await connectTestClient(running.service.createServer());
    try {
      const result = (await client.callTool('track_shipment', {
        tracking_number: 'TRK00000001',
      })) as CallToolResult;
      expect(result.structuredContent).toMatchObject({
        carrier: '\\u001b[2J\\u001b]0;pwn\\u0007Parcel',
        status: 'in\\u202etransit\\u2066',
        events: [{ at: '2026-12-01', where: '\\u001b[31mHub\\u0009A', what: 'sorted\\u009b' }],
      });
      const text = (result.content[0] as { text: string }).text;
      // The text the model reads holds the same visible escapes, never the characters themselves.
      expect(JSON.parse(text)).toMatchObject({
        carrier: '\\u001b[2J\\u001b]0;pwn\\u0007Parcel',
        status: 'in\\u202etransit\\u2066',
      });
      expect(text.includes('\x1b') || text.includes('\u202e')).toBe(false);
    } finally {
      await client.close();
    }
  });
});
