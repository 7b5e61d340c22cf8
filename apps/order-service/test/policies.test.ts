import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createSilentLogger } from '@toolgate/core';
import { connectTestClient, expectFailure, parseResultText } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokenVerifier } from '../src/auth.js';
import { type RunningHttpServer, startHttpServer } from '../src/http.js';
import { type Running, startService } from './harness.js';

const DESK = 'desk-token-0123456789abcdef';
const PORTAL_42 = 'portal-42-token-0123456789abcdef';
const PORTAL_43 = 'portal-43-token-0123456789abcdef';
const TOKENS = {
  tokens: [
    {
      token: DESK,
      clientId: 'support-desk',
      scopes: ['orders:read', 'orders:write', 'docs:read'],
      claims: { sub: 'agent-1' },
    },
    // One client id, two customers, no subject: only the claims tell them apart.
    {
      token: PORTAL_42,
      clientId: 'portal',
      scopes: ['orders:read', 'docs:read'],
      claims: { customerId: 42 },
    },
    {
      token: PORTAL_43,
      clientId: 'portal',
      scopes: ['orders:read', 'docs:read'],
      claims: { customerId: 43 },
    },
  ],
};

async function httpClient(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'policy-test', version: '0.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

const emailOf = (customer: number): string => `customer${String(customer).padStart(3, '0')}@example.com`;
const emails = (result: CallToolResult): string[] =>
  ((result.structuredContent as { items?: { customer_email: string }[] }).items ?? []).map(
    (item) => item.customer_email,
  );

describe('over HTTP with customer-scoped tokens of one client', () => {
  let running: Running;
  let http: RunningHttpServer;
  beforeAll(async () => {
    running = await startService({ transport: 'tcp', customerScoped: true });
    http = await startHttpServer({
      port: 0,
      verifier: createTokenVerifier(TOKENS),
      createServer: () => running.service.createServer(),
      logger: createSilentLogger(),
    });
  });
  afterAll(async () => {
    await http.close();
    await running.stop();
  });

  it('two tokens with one client id never see each other’s orders, one after the other or at once', async () => {
    const c42 = await httpClient(http.url, PORTAL_42);
    const c43 = await httpClient(http.url, PORTAL_43);
    try {
      const args = { name: 'search_orders', arguments: { days: 90, limit: 50 } };
      const sequential: [number, CallToolResult][] = [];
      for (let round = 0; round < 5; round++) {
        sequential.push([42, (await c42.callTool(args)) as CallToolResult]);
        sequential.push([43, (await c43.callTool(args)) as CallToolResult]);
      }
      const concurrent = await Promise.all(
        Array.from({ length: 40 }, async (_, index): Promise<[number, CallToolResult]> => {
          const customer = index % 2 === 0 ? 42 : 43;
          return [customer, (await (customer === 42 ? c42 : c43).callTool(args)) as CallToolResult];
        }),
      );
      let seen = 0;
      for (const [customer, result] of [...sequential, ...concurrent]) {
        const found = emails(result);
        seen += found.length;
        expect(new Set(found)).toEqual(new Set(found.length > 0 ? [emailOf(customer)] : []));
      }
      expect(seen).toBeGreaterThan(0);
      // And the audit tells the two tokens apart.
      await running.service.audit.flush();
    } finally {
      await c42.close();
      await c43.close();
    }
  });

  it('a portal token sees only the read tools; a write tool answers like an unknown tool', async () => {
    const c42 = await httpClient(http.url, PORTAL_42);
    try {
      const { tools } = await c42.listTools();
      expect(tools.map((tool) => tool.name).sort()).toEqual([
        'get_order_status',
        'render_invoice',
        'search_docs',
        'search_orders',
        'track_shipment',
      ]);
      const hidden = await c42
        .callTool({ name: 'request_refund', arguments: { order_id: '4000000000007919' } })
        .catch((error: unknown) => String(error));
      const unknown = await c42
        .callTool({ name: 'request_refnd', arguments: { order_id: '4000000000007919' } })
        .catch((error: unknown) => String(error));
      expect(hidden).toBe('McpError: MCP error -32602: Unknown tool: request_refund');
      expect(unknown).toBe('McpError: MCP error -32602: Unknown tool: request_refnd');
    } finally {
      await c42.close();
    }
  });

  it('the support desk token sees every tool, the write tools too', async () => {
    const desk = await httpClient(http.url, DESK);
    try {
      const { tools } = await desk.listTools();
      expect(tools.map((tool) => tool.name)).toContain('request_refund');
      expect(tools.map((tool) => tool.name)).toContain('cancel_order');
      expect(tools).toHaveLength(7);
    } finally {
      await desk.close();
    }
  });
});

describe('write tools: confirmed by a person, run once', () => {
  let running: Running;
  const desk: AuthInfo = {
    token: DESK,
    clientId: 'support-desk',
    scopes: ['orders:read', 'orders:write', 'docs:read'],
    extra: { sub: 'agent-1' },
  };
  beforeAll(async () => {
    running = await startService({ transport: 'pipe' });
  });
  afterAll(async () => {
    await running.stop();
  });

  const refunds = async (orderId: string): Promise<number> => {
    const { rows } = await running.service.db.pglite!.query<{ n: number }>(
      'SELECT count(*)::integer AS n FROM refunds WHERE order_id = $1',
      [orderId],
    );
    return rows[0]!.n;
  };
  // Row 1 of the seed: paid, 8407 cents; row 6: pending.
  const PAID = '4000000000007919';
  const PENDING = '4000000000047514';

  it('a declined refund changes nothing; an accepted one is recorded; the same refund retried is replayed, not paid twice', async () => {
    const answers: string[] = ['decline', 'accept'];
    const asked: string[] = [];
    const client = await connectTestClient(running.service.createServer(), {
      authInfo: desk,
      onElicit: (params) => {
        asked.push(params.message);
        return { action: answers.shift() as 'accept' | 'decline' };
      },
    });
    try {
      const refund = { order_id: PAID, amount_cents: 500, reason: 'arrived damaged' };
      const declined = await client.callTool('request_refund', refund);
      expect(expectFailure(declined)).toMatchObject({ error: 'permission_denied', retryable: false });
      expect(await refunds(PAID)).toBe(0);
      const accepted = await client.callTool('request_refund', refund);
      expect(parseResultText(accepted)).toMatchObject({
        ok: true,
        order_id: PAID,
        amount_cents: 500,
        refunded_cents: 500,
      });
      expect(await refunds(PAID)).toBe(1);
      const retried = await client.callTool('request_refund', refund);
      expect(parseResultText(retried)).toEqual(parseResultText(accepted));
      expect(retried._meta?.['toolgate/idempotency']).toMatchObject({ replayed: true });
      expect(await refunds(PAID)).toBe(1);
      expect(asked).toHaveLength(2);
      expect(asked[0]).toContain(`Refund 5.00 USD of order ${PAID} (reason: "arrived damaged").`);
    } finally {
      await client.close();
    }
  });

  it('a refund above what is left is refused after confirmation, and nothing is written', async () => {
    const client = await connectTestClient(running.service.createServer(), {
      authInfo: desk,
      onElicit: () => ({ action: 'accept' }),
    });
    try {
      const result = await client.callTool('request_refund', {
        order_id: PAID,
        amount_cents: 9_000_000,
        reason: 'too much',
      });
      expect(expectFailure(result)).toMatchObject({ error: 'invalid_argument' });
      expect(await refunds(PAID)).toBe(1);
    } finally {
      await client.close();
    }
  });

  it.each([
    ['NUL characters', '\u0000\u0000\u0000'],
    ['an unpaired surrogate', 'damaged \ud800 parcel'],
  ])(
    'a reason with %s is the model’s mistake (invalid_argument, before anyone is asked), not internal',
    async (_what, reason) => {
      // Session 36's red team: `\u0000\u0000\u0000` passed the schema, the person confirmed, and the
      // write failed in PostgreSQL (22021), answered `internal`, "Do not retry".
      let asked = 0;
      const client = await connectTestClient(running.service.createServer(), {
        authInfo: desk,
        onElicit: () => {
          asked += 1;
          return { action: 'accept' };
        },
      });
      try {
        const result = await client.callTool('request_refund', { order_id: PAID, amount_cents: 100, reason });
        expect(expectFailure(result)).toMatchObject({ error: 'invalid_argument' });
        expect(asked).toBe(0);
        expect(await refunds(PAID)).toBe(1);
      } finally {
        await client.close();
      }
    },
  );

  it('without elicitation: confirmation_required with a single-use confirmation; the second call runs once', async () => {
    const client = await connectTestClient(running.service.createServer(), { authInfo: desk });
    try {
      const cancel = { order_id: PENDING, reason: 'ordered twice' };
      const first = await client.callTool('cancel_order', cancel);
      const envelope = expectFailure(first);
      expect(envelope.error).toBe('confirmation_required');
      expect(envelope.message).toBe(
        `Confirmation required. Show the user: Cancel order ${PENDING} (reason: "ordered twice").\n` +
          `Tool: cancel_order\nArguments:\n  order_id: "${PENDING}"\n  reason: "ordered twice"`,
      );
      const { confirmation } = first._meta!['toolgate/confirm'] as { confirmation: string };
      const second = await client.callTool('cancel_order', { ...cancel, confirmation });
      expect(parseResultText(second)).toEqual({
        ok: true,
        order_id: PENDING,
        previous_status: 'pending',
        status: 'cancelled',
      });
      const other = await client.callTool('cancel_order', {
        order_id: PAID,
        reason: 'ordered twice',
        confirmation,
      });
      expect(expectFailure(other).error).toBe('permission_denied');
      const { rows } = await running.service.db.pglite!.query<{ status: string }>(
        'SELECT status FROM orders WHERE order_id = $1',
        [PAID],
      );
      expect(rows[0]!.status).toBe('paid');
    } finally {
      await client.close();
    }
  });
});
