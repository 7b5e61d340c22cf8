// Red team of the seams between the packages, driven as an outside tester drives the service: real
// Streamable HTTP on loopback with the app's own bearer-token verifier, two customers (and two desk
// agents) whose tokens differ only in the claims that say who they are, every answer read as the model
// would read it. Each test names the promise it attacks.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createSilentLogger } from '@toolgate/core';
import { connectTestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokenVerifier } from '../src/auth.js';
import { type RunningHttpServer, startHttpServer } from '../src/http.js';
import type { OrderServiceConfig } from '../src/service.js';
import { type Running, startService } from './harness.js';
import {
  type Caller,
  confirmationOf,
  confirmedWrite,
  connect,
  type Envelope,
  envelope,
} from './redteam-callers.js';

const C42 = 'rt-portal-42-0123456789abcdef';
const C43 = 'rt-portal-43-0123456789abcdef';
const AGENT_1 = 'rt-agent-1-0123456789abcdef';
const AGENT_2 = 'rt-agent-2-0123456789abcdef';
const ALL_SCOPES = ['orders:read', 'orders:write', 'docs:read'];

// Digits that a human reads as the same id: fullwidth and Arabic-Indic.
const fullwidth = (id: string): string =>
  [...id].map((digit) => String.fromCharCode(0xff10 + Number(digit))).join('');
const arabicIndic = (id: string): string =>
  [...id].map((digit) => String.fromCharCode(0x0660 + Number(digit))).join('');
const shapesOf = (id: string): string[] => [
  ` ${id}`,
  `${id} `,
  `${id}\n`,
  `\t${id}`,
  fullwidth(id),
  arabicIndic(id),
  `${id.slice(0, 8)}\u200b${id.slice(8)}`,
  `0${id}`,
  id.slice(1),
  id.repeat(256),
];

interface Portal {
  running: Running;
  http: RunningHttpServer;
  c42: Caller;
  c43: Caller;
  close(): Promise<void>;
}

/** The service customer-scoped over HTTP, and one client for each of customers 42 and 43. */
async function startPortal(overrides: Partial<OrderServiceConfig>): Promise<Portal> {
  const running = await startService({ transport: 'tcp', customerScoped: true, ...overrides });
  const http = await startHttpServer({
    port: 0,
    verifier: createTokenVerifier({
      tokens: [
        { token: C42, clientId: 'portal', scopes: ALL_SCOPES, claims: { customerId: 42 } },
        { token: C43, clientId: 'portal', scopes: ALL_SCOPES, claims: { customerId: 43 } },
      ],
    }),
    createServer: () => running.service.createServer(),
    logger: createSilentLogger(),
  });
  const c42 = await connect(http.url, C42);
  const c43 = await connect(http.url, C43);
  return {
    running,
    http,
    c42,
    c43,
    async close() {
      await c42.close();
      await c43.close();
      await http.close();
      await running.stop();
    },
  };
}

// The blocks after the portal's need no customer scope: the desk agents, the sentence a person approves
// and the misbehaving carrier share one service (each start costs a seeded database), started by the
// first block that needs it. Its carrier is the misbehaving one, which only the carrier block calls (a
// transport of 'tcp' only decides how spans treat a client's traceparent). The approval tests decline
// every change, and the sentence they check is written before the refundable amount is read, so the
// desk's refund of order 4000000000007919 changes nothing they see.
const CLOUD_SECRET = 'sk_live_51HcarrierLeakedKey0000';
interface Desk {
  running: Running;
  carrierUrl: string;
  close(): Promise<void>;
}
let shared: Promise<Desk> | undefined;
const desk = (): Promise<Desk> => {
  shared ??= startDesk();
  return shared;
};
afterAll(async () => {
  await (await shared)?.close();
});

async function startDesk(): Promise<Desk> {
  const carrier: Server = createServer((req, res) => {
    const number = /^\/track\/(TRK\d{8})$/.exec(req.url ?? '')?.[1];
    const { port } = carrier.address() as AddressInfo;
    switch (number) {
      case 'TRK00000001':
        res.writeHead(302, {
          location: 'http://169.254.169.254/latest/meta-data/iam/security-credentials/admin',
        });
        return void res.end();
      case 'TRK00000002':
        res.writeHead(302, { location: `http://127.0.0.1:${port + 1}/internal?key=${CLOUD_SECRET}` });
        return void res.end();
      case 'TRK00000003':
        res.writeHead(418, { 'content-type': 'text/plain' });
        return void res.end(`teapot: upstream db password hunter2, key ${CLOUD_SECRET}`);
      case 'TRK00000004':
        res.writeHead(500, { 'content-type': 'text/plain' });
        return void res.end(`Traceback /srv/carrier/app.py key=${CLOUD_SECRET}`);
      case 'TRK00000005':
        res.writeHead(302, { location: `/track/TRK00000005?session=${CLOUD_SECRET}` });
        return void res.end();
      default:
        res.writeHead(404).end();
    }
  });
  await new Promise<void>((done) => carrier.listen(0, '127.0.0.1', done));
  const carrierUrl = `http://127.0.0.1:${(carrier.address() as AddressInfo).port}`;
  const running = await startService({ transport: 'tcp', carrierUrl, breakerResetMs: 60_000 });
  return {
    running,
    carrierUrl,
    async close() {
      await running.stop();
      carrier.close();
    },
  };
}

describe('customer-scoped portal tokens that may write (two customers, one client id)', () => {
  let running: Running;
  let c42: Caller;
  let c43: Caller;
  const pick = async (sql: string, customerId: number): Promise<string> => {
    const { rows } = await running.service.db.pglite!.query<{ v: string }>(sql, [customerId]);
    return rows[0]!.v;
  };
  const orderOf = (customerId: number, status: string): Promise<string> =>
    pick(
      `SELECT order_id AS v FROM orders WHERE customer_id = $1 AND status = '${status}' ORDER BY order_id LIMIT 1`,
      customerId,
    );
  const trackingOf = (customerId: number): Promise<string> =>
    pick(
      `SELECT tracking_number AS v FROM orders WHERE customer_id = $1 AND tracking_number IS NOT NULL
        ORDER BY order_id LIMIT 1`,
      customerId,
    );
  const statusOf = async (orderId: string): Promise<string> => {
    const { rows } = await running.service.db.pglite!.query<{ status: string }>(
      'SELECT status FROM orders WHERE order_id = $1',
      [orderId],
    );
    return rows[0]!.status;
  };
  const changesOf = async (orderId: string): Promise<number> => {
    const { rows } = await running.service.db.pglite!.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM refunds WHERE order_id = $1)
            + (SELECT count(*) FROM order_cancellations WHERE order_id = $1) AS n`,
      [orderId],
    );
    return Number(rows[0]!.n);
  };

  beforeAll(async () => {
    portal = await startPortal({ writesPerMinute: 1000, callsPerMinute: 1000 });
    ({ running, c42, c43 } = portal);
  });
  let portal: Portal | undefined;
  afterAll(async () => {
    await portal?.close();
  });

  it('customer 43 neither reads nor changes an order of customer 42 through any tool or shape of its id', async () => {
    // Customer 42's orders are paid, delivered or refunded: paid ones may be cancelled, delivered refunded.
    const pending = await orderOf(42, 'paid');
    const paid = await orderOf(42, 'delivered');
    const tracking = await trackingOf(42);
    const carrierBefore = running.carrier.requests;
    const answers: CallToolResult[] = [];
    for (const id of [paid, ...shapesOf(paid)]) {
      for (const tool of ['get_order_status', 'render_invoice']) {
        const result = await c43.call(tool, { order_id: id });
        expect(['not_found', 'invalid_argument'], `${tool} ${JSON.stringify(id)}`).toContain(
          envelope(result).error,
        );
        answers.push(result);
      }
    }
    for (const id of [pending, ...shapesOf(pending)]) {
      const result = await confirmedWrite(c43, 'cancel_order', { order_id: id, reason: 'not mine' });
      expect(['not_found', 'invalid_argument']).toContain(envelope(result).error);
      answers.push(result);
    }
    for (const id of [paid, ...shapesOf(paid)]) {
      const result = await confirmedWrite(c43, 'request_refund', {
        order_id: id,
        amount_cents: 100,
        reason: 'not mine',
      });
      expect(['not_found', 'invalid_argument']).toContain(envelope(result).error);
      answers.push(result);
    }
    for (const number of [
      tracking,
      tracking.toLowerCase(),
      ` ${tracking}`,
      `TRK${fullwidth(tracking.slice(3))}`,
    ]) {
      answers.push(await c43.call('track_shipment', { tracking_number: number }));
      answers.push(
        await c43.call('track_shipment', { tracking_url: `${running.carrier.url}/track/${number}` }),
      );
    }
    answers.push(await c43.call('search_orders', { customer_email: 'customer042', days: 90, limit: 50 }));
    expect((answers.at(-1)!.structuredContent as { items: unknown[] }).items).toEqual([]);
    for (const answer of answers) expect(JSON.stringify(answer)).not.toContain('customer042');
    expect(running.carrier.requests).toBe(carrierBefore);
    expect(await statusOf(pending)).toBe('paid');
    expect(await changesOf(pending)).toBe(0);
    expect(await changesOf(paid)).toBe(0);
  });

  it('an identical call by the other customer is never answered from the first one’s cache, replay or confirmation', async () => {
    const tracking = await trackingOf(42);
    const mine = await c42.call('track_shipment', { tracking_number: tracking });
    expect(envelope(mine)).toMatchObject({ ok: true, trackingNumber: tracking });
    const carrierBefore = running.carrier.requests;
    const theirs = await c43.call('track_shipment', { tracking_number: tracking });
    expect(envelope(theirs).error).toBe('not_found');
    expect(running.carrier.requests).toBe(carrierBefore);

    // A confirmation shown to customer 42 is worth nothing to customer 43, even with the same arguments.
    const pending = await orderOf(42, 'paid');
    const cancel = { order_id: pending, reason: 'ordered twice' };
    const asked = await c42.call('cancel_order', cancel);
    const confirmation = confirmationOf(asked);
    const stolen = await c43.call('cancel_order', { ...cancel, confirmation });
    expect(envelope(stolen).error).toBe('permission_denied');
    expect(await statusOf(pending)).toBe('paid');
    const done = await c42.call('cancel_order', { ...cancel, confirmation });
    expect(envelope(done)).toMatchObject({ ok: true, status: 'cancelled' });
    // The same confirmed call again by customer 43: no replay of 42's answer.
    const replayed = await c43.call('cancel_order', { ...cancel, confirmation });
    expect(replayed._meta?.['toolgate/idempotency']).toBeUndefined();
    expect(envelope(replayed).ok).not.toBe(true);

    // One explicit idempotency key sent by both customers: each gets only its own change.
    const key = { 'toolgate/idempotency-key': 'same-key-from-a-shared-client-library' };
    const paid42 = await orderOf(42, 'delivered');
    const paid43 = await orderOf(43, 'shipped');
    const refund42 = await confirmedWrite(
      c42,
      'request_refund',
      { order_id: paid42, amount_cents: 100, reason: 'late' },
      key,
    );
    expect(envelope(refund42)).toMatchObject({ ok: true, order_id: paid42, amount_cents: 100 });
    const sameArgs = await confirmedWrite(
      c43,
      'request_refund',
      { order_id: paid42, amount_cents: 100, reason: 'late' },
      key,
    );
    expect(envelope(sameArgs).error).toBe('not_found');
    const own43 = await confirmedWrite(
      c43,
      'request_refund',
      { order_id: paid43, amount_cents: 100, reason: 'late' },
      key,
    );
    expect(envelope(own43)).toMatchObject({ ok: true, order_id: paid43, amount_cents: 100 });
    expect(await changesOf(paid42)).toBe(1);
    expect(await changesOf(paid43)).toBe(1);
  });

  it('the refund sentence a customer approves carries the currency of its own order, and nothing of another’s', async () => {
    const order = await orderOf(42, 'delivered');
    const refund = { order_id: order, amount_cents: 100, reason: 'currency check' };
    const before = await changesOf(order);
    const mine = envelope(await c42.call('request_refund', refund));
    expect(mine.error).toBe('confirmation_required');
    expect(mine.message).toContain(
      `Show the user: Refund 1.00 USD of order ${order} (reason: "currency check").`,
    );
    // Customer 43 asking about 42's order learns nothing of it, its currency neither: no row, no currency.
    const theirs = envelope(await c43.call('request_refund', refund));
    expect(theirs.error).toBe('confirmation_required');
    expect(theirs.message).toContain(
      `Show the user: Refund 1.00 of order ${order} (reason: "currency check").`,
    );
    expect(await changesOf(order)).toBe(before);
  });

  it('a customer’s per-minute budget counts every tool together, search_docs with the scoped tools', async () => {
    // Session 36's red team: search_docs bound nothing while the scoped tools bound the customer, so
    // its calls counted in a budget of their own: 4 + 4 calls accepted under a limit of 4.
    const small = await startPortal({ callsPerMinute: 4 });
    try {
      const outcomes: (string | undefined)[] = [];
      for (let call = 0; call < 4; call++) {
        outcomes.push(envelope(await small.c42.call('search_orders', { days: 30 + call })).error);
      }
      for (let call = 0; call < 4; call++) {
        outcomes.push(envelope(await small.c42.call('search_docs', { query: `refund ${call}` })).error);
      }
      expect(outcomes.slice(0, 4)).toEqual([undefined, undefined, undefined, undefined]);
      expect(outcomes.slice(4)).toEqual(['rate_limited', 'rate_limited', 'rate_limited', 'rate_limited']);
      // The other customer's budget is its own.
      expect(envelope(await small.c43.call('search_docs', { query: 'refund' })).error).toBeUndefined();
    } finally {
      await small.close();
    }
  });

  it('one customer spending its write budget leaves the other’s whole', async () => {
    const small = await startPortal({ writesPerMinute: 3 });
    try {
      const pending = '4000000000047514';
      let limited: Envelope | undefined;
      for (let call = 0; call < 6 && limited === undefined; call++) {
        const result = await small.c42.call('cancel_order', { order_id: pending, reason: `probe ${call}` });
        if (envelope(result).error === 'rate_limited') limited = envelope(result);
      }
      expect(limited?.error).toBe('rate_limited');
      const other = await small.c43.call('cancel_order', { order_id: pending, reason: 'duplicate order' });
      expect(envelope(other).error).toBe('confirmation_required');
    } finally {
      await small.close();
    }
  });
});
describe('desk agents (not customer-scoped): two people, one client id', () => {
  let running: Running;
  let http: RunningHttpServer;
  let agent1: Caller;
  let agent2: Caller;
  const refundsOf = async (orderId: string): Promise<number> => {
    const { rows } = await running.service.db.pglite!.query<{ n: number }>(
      'SELECT count(*)::integer AS n FROM refunds WHERE order_id = $1',
      [orderId],
    );
    return rows[0]!.n;
  };
  const PAID = '4000000000007919';

  beforeAll(async () => {
    ({ running } = await desk());
    http = await startHttpServer({
      port: 0,
      verifier: createTokenVerifier({
        tokens: [
          { token: AGENT_1, clientId: 'support-desk', scopes: ALL_SCOPES, claims: { sub: 'agent-1' } },
          { token: AGENT_2, clientId: 'support-desk', scopes: ALL_SCOPES, claims: { sub: 'agent-2' } },
        ],
      }),
      createServer: () => running.service.createServer(),
      logger: createSilentLogger(),
    });
    agent1 = await connect(http.url, AGENT_1);
    agent2 = await connect(http.url, AGENT_2);
  });
  afterAll(async () => {
    await agent1?.close();
    await agent2?.close();
    await http?.close();
  });

  it('a confirmation works only for the agent it was shown to, on its tool, for its exact arguments, once', async () => {
    const refund = { order_id: PAID, amount_cents: 250, reason: 'arrived damaged' };
    const confirmation = confirmationOf(await agent1.call('request_refund', refund));
    const misuses = [
      () => agent2.call('request_refund', { ...refund, confirmation }),
      () => agent1.call('request_refund', { ...refund, amount_cents: 8000, confirmation }),
      () =>
        agent1.call('request_refund', { ...refund, reason: 'arrived damaged, and shipping', confirmation }),
      () => agent1.call('cancel_order', { order_id: PAID, reason: refund.reason, confirmation }),
    ];
    for (const misuse of misuses) {
      const result = await misuse();
      expect(envelope(result).error, JSON.stringify(result)).toBe('permission_denied');
    }
    expect(await refundsOf(PAID)).toBe(0);
    expect(envelope(await agent1.call('request_refund', { ...refund, confirmation }))).toMatchObject({
      ok: true,
      amount_cents: 250,
    });
    // Agent 2 sends the very call agent 1 made: neither a replay of agent 1's answer nor a second refund.
    const copy = await agent2.call('request_refund', { ...refund, confirmation });
    expect(copy._meta?.['toolgate/idempotency']).toBeUndefined();
    expect(envelope(copy).error).toBe('permission_denied');
    expect(await refundsOf(PAID)).toBe(1);
  });

  it('an explicit idempotency key replays only for the agent that sent it', async () => {
    const order = '4000000000015838';
    const refund = { order_id: order, amount_cents: 300, reason: 'late delivery' };
    const key = { 'toolgate/idempotency-key': 'ticket-1234' };
    const first = await confirmedWrite(agent1, 'request_refund', refund, key);
    expect(envelope(first)).toMatchObject({ ok: true, amount_cents: 300 });
    const again = await agent1.call('request_refund', refund, key);
    expect(again._meta?.['toolgate/idempotency']).toMatchObject({ replayed: true });
    const other = await agent2.call('request_refund', refund, key);
    expect(other._meta?.['toolgate/idempotency']).toBeUndefined();
    expect(envelope(other).error).toBe('confirmation_required');
    expect(await refundsOf(order)).toBe(1);
  });

  it('an invoice of a customer whose email starts with "-" renders; nothing of the command reaches the model', async () => {
    // "-ops@example.com" is a valid address (RFC 5322 allows a leading "-" in the local part).
    const order = '4000000000023757';
    await running.service.db.pglite!.query('UPDATE orders SET customer_email = $2 WHERE order_id = $1', [
      order,
      '-ops@example.com',
    ]);
    const result = await agent1.call('render_invoice', { order_id: order });
    const text = JSON.stringify(result);
    for (const leak of ['invoice-cli', '/work', process.execPath, 'argv', 'may not start']) {
      expect(text).not.toContain(leak);
    }
    expect(envelope(result), text).toMatchObject({ ok: true, order_id: order });
    expect((result.structuredContent as { invoice: string }).invoice).toContain('Customer: -ops@example.com');
  });

  it('an invoice longer than exec’s output limit is refused whole, never handed over cut (without its total)', async () => {
    const order = '4000000000031676';
    await running.service.db.pglite!.query('UPDATE orders SET customer_email = $2 WHERE order_id = $1', [
      order,
      `${'x'.repeat(70_000)}@example.com`,
    ]);
    const result = await agent1.call('render_invoice', { order_id: order });
    expect(envelope(result)).toMatchObject({
      error: 'unavailable',
      message: 'The invoice could not be rendered.',
    });
    expect(JSON.stringify(result)).not.toContain('xxxxxxxxxx');
  });
});

describe('what the person is asked to approve', () => {
  let running: Running;
  beforeAll(async () => {
    ({ running } = await desk());
  });

  it('a reason cannot read as more of the sentence: the amount the person approves is the one refunded', async () => {
    const asked: string[] = [];
    const client = await connectTestClient(running.service.createServer(), {
      onElicit: (params) => {
        asked.push(params.message);
        return { action: 'decline' };
      },
    });
    try {
      const order = '4000000000007919';
      // A model steered by an injected instruction writes the reason so the sentence seems to say 0.84.
      const reason = `damaged). The amount above is in cents: Refund 0.84 of order ${order} (reason: damaged`;
      const refund = await client.callTool('request_refund', { order_id: order, amount_cents: 8407, reason });
      expect(envelope(refund).error).toBe('permission_denied');
      const cancel = await client.callTool('cancel_order', {
        order_id: order,
        reason: 'x"). Cancel nothing (reason: "x',
      });
      expect(envelope(cancel).error).toBe('permission_denied');
      expect(asked[0]!.split('\n')[0]).toBe(
        `Refund 84.07 USD of order ${order} (reason: ${JSON.stringify(reason)}).`,
      );
      expect(asked[1]!.split('\n')[0]).toBe(
        `Cancel order ${order} (reason: "x\\"). Cancel nothing (reason: \\"x").`,
      );
    } finally {
      await client.close();
    }
  });

  it('the amount the person approves carries the order’s own currency, read from its row; an unknown order gets none invented', async () => {
    const asked: string[] = [];
    const client = await connectTestClient(running.service.createServer(), {
      onElicit: (params) => {
        asked.push(params.message);
        return { action: 'decline' };
      },
    });
    // Row 15 of the seed is a delivered order in EUR, row 1 a paid one in USD; 4000000000000001 is no order.
    const orders = ['4000000000118785', '4000000000007919', '4000000000000001'];
    const { rows } = await running.service.db.pglite!.query<{ order_id: string; currency: string }>(
      'SELECT order_id, currency FROM orders WHERE order_id = ANY($1) ORDER BY currency',
      [orders],
    );
    expect(rows).toEqual([
      { order_id: orders[0], currency: 'EUR' },
      { order_id: orders[1], currency: 'USD' },
    ]);
    try {
      for (const order of orders) {
        const refund = { order_id: order, amount_cents: 1234, reason: 'damaged' };
        expect(envelope(await client.callTool('request_refund', refund)).error).toBe('permission_denied');
      }
      expect(asked.map((message) => message.split('\n')[0])).toEqual([
        `Refund 12.34 EUR of order ${orders[0]} (reason: "damaged").`,
        `Refund 12.34 USD of order ${orders[1]} (reason: "damaged").`,
        `Refund 12.34 of order ${orders[2]} (reason: "damaged").`,
      ]);
    } finally {
      await client.close();
    }
  });
});

describe('a carrier that misbehaves (redirects inward, errors with secrets in its page)', () => {
  let running: Running;
  let carrierUrl: string;
  beforeAll(async () => {
    ({ running, carrierUrl } = await desk());
  });

  it('nothing of a redirect target, an error page or the carrier’s address reaches the model', async () => {
    const client = await connectTestClient(running.service.createServer());
    try {
      const results: CallToolResult[] = [];
      for (const number of ['TRK00000001', 'TRK00000002', 'TRK00000003', 'TRK00000004', 'TRK00000005']) {
        results.push(await client.callTool('track_shipment', { tracking_number: number }));
        results.push(
          await client.callTool('track_shipment', { tracking_url: `${carrierUrl}/track/${number}` }),
        );
      }
      for (const result of results) expect(result.isError, JSON.stringify(result)).toBe(true);
      const seen = JSON.stringify([results, client.notifications]);
      for (const leak of [
        CLOUD_SECRET,
        'hunter2',
        '169.254',
        'meta-data',
        '/srv/',
        carrierUrl.slice(7),
        'teapot',
      ]) {
        expect(seen, leak).not.toContain(leak);
      }
    } finally {
      await client.close();
    }
  });
});
