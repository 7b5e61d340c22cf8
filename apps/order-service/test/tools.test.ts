import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifyAuditFile } from '@toolgate/audit';
import { connectTestClient, expectFailure, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ORDER_STATUSES, SEED_CUSTOMERS, SEED_ORDERS } from '../src/db.js';
import { INSTRUCTIONS } from '../src/service.js';
import { type Running, startService } from './harness.js';

let running: Running;
let client: TestClient;
// A second service, customer-scoped and over a docs root of its own (starting one costs a seeded
// database): the customer-scoped tests use it with tokens, the search_docs tests that need a root of
// their own with a client that has no token (search_docs binds no customer, so scoping changes
// nothing there). Each of those tests fills the root with what it needs and leaves it empty again, and
// search_docs reads the root afresh on every call.
let root: string;
let scopedWithDocs: Running;

beforeAll(async () => {
  running = await startService();
  client = await connectTestClient(running.service.createServer());
  root = mkdtempSync(join(tmpdir(), 'docs-root-'));
  scopedWithDocs = await startService({ customerScoped: true, docsRoot: root });
});
afterAll(async () => {
  await client?.close();
  await running?.stop();
  await scopedWithDocs?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

type Item = Record<string, unknown>;
const items = (result: { structuredContent?: unknown }): Item[] =>
  (result.structuredContent as { items: Item[] }).items;

describe('what the model is offered', () => {
  it('seven tools with strict, flat inputs; five read-only, two that change things and say so', async () => {
    const { tools } = await client.client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual([
      'cancel_order',
      'get_order_status',
      'render_invoice',
      'request_refund',
      'search_docs',
      'search_orders',
      'track_shipment',
    ]);
    for (const tool of tools) {
      const writes = tool.name === 'request_refund' || tool.name === 'cancel_order';
      expect(tool.inputSchema.additionalProperties).toBe(false);
      expect(tool.annotations?.readOnlyHint).toBe(!writes);
      expect(tool.annotations?.destructiveHint ?? false).toBe(writes);
      expect(tool.description!.length).toBeGreaterThan(60);
      for (const property of Object.values(tool.inputSchema.properties ?? {})) {
        expect((property as { type?: string }).type).not.toBe('object');
      }
    }
    const search = tools.find((tool) => tool.name === 'search_orders')!;
    expect(search.inputSchema.properties).toMatchObject({
      status: { enum: [...ORDER_STATUSES] },
      days: { maximum: 90, default: 30 },
      limit: { maximum: 50, default: 10 },
    });
  });

  it('instructions state the boundary; the schema resource lists fields and statuses', async () => {
    expect(client.client.getInstructions()).toBe(INSTRUCTIONS);
    expect(INSTRUCTIONS).toContain('Each asks the user to confirm the exact change first');
    expect(INSTRUCTIONS).toContain('You cannot change shipping addresses or prices');
    const resource = await client.client.readResource({ uri: 'orders://schema' });
    const body = JSON.parse((resource.contents[0] as { text: string }).text);
    expect(body.statuses).toEqual([...ORDER_STATUSES]);
    expect(Object.keys(body.fields)).toContain('tracking_number');
  });
});

describe('search_orders and get_order_status', () => {
  it('the seed holds 10,000 orders over 200 customers', async () => {
    const rows = await running.service.db.pglite!.query<{ orders: number; customers: number }>(
      'SELECT count(*)::int AS orders, count(DISTINCT customer_id)::int AS customers FROM orders',
    );
    expect(rows.rows[0]).toEqual({ orders: SEED_ORDERS, customers: SEED_CUSTOMERS });
  });

  it('searches by status within a window, newest first, cut to the default limit with a note', async () => {
    const result = await client.callTool('search_orders', { status: 'paid', days: 30 });
    const found = items(result);
    expect(found).toHaveLength(10);
    expect(found.every((order) => order.status === 'paid')).toBe(true);
    const dates = found.map((order) => Date.parse(String(order.created_at)));
    expect([...dates].sort((a, b) => b - a)).toEqual(dates);
    const content = result.structuredContent as { total: number; note: string };
    expect(content.total).toBeGreaterThan(10);
    expect(content.note).toContain(`Returned 10 of ${content.total}`);
  });

  it('refuses a status outside the enum, a window over 90 days and a limit over 50', async () => {
    const envelope = expectFailure(
      await client.callTool('search_orders', { status: 'lost', days: 91, limit: 51 }),
    );
    expect(envelope.error).toBe('invalid_argument');
    expect(envelope.fields?.map((field) => field.path)).toEqual(['status', 'days', 'limit']);
  });

  it('matches an email prefix literally (an injection string finds nothing and changes nothing)', async () => {
    const ok = items(await client.callTool('search_orders', { customer_email: 'customer042@', days: 90 }));
    expect(ok.length).toBeGreaterThan(0);
    expect(ok.every((order) => order.customer_email === 'customer042@example.com')).toBe(true);
    for (const hostile of ["x' OR '1'='1", "%'; DELETE FROM orders; --", '_%', '\\']) {
      const result = await client.callTool('search_orders', { customer_email: hostile, days: 90 });
      expect(items(result)).toEqual([]);
    }
    const count = await running.service.db.pglite!.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM orders',
    );
    expect(count.rows[0]!.n).toBe(SEED_ORDERS);
  });

  it('finds one order by id; an unknown id is not_found with a hint; a malformed id never reaches SQL', async () => {
    const found = items(await client.callTool('get_order_status', { order_id: '4000000000007919' }));
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({
      order_id: '4000000000007919',
      customer_email: expect.stringMatching(/@example\.com$/),
    });
    expect(
      expectFailure(await client.callTool('get_order_status', { order_id: '4000000000000001' })),
    ).toMatchObject({
      error: 'not_found',
      hint: 'Check the 16-digit id with the user, or find the order with search_orders.',
    });
    expect(
      expectFailure(await client.callTool('get_order_status', { order_id: "1' OR 1=1 --" })).fields,
    ).toEqual([{ path: 'order_id', expected: 'a string matching /^\\d{16}$/' }]);
  });
});

describe('customer-scoped tokens', () => {
  let scoped: Running;
  beforeAll(() => {
    scoped = scopedWithDocs;
  });

  it('binds the customer id from the token; an argument cannot override it; no claim is refused', async () => {
    const authInfo = { token: 't', clientId: 'portal', scopes: ['orders:read'], extra: { customerId: 42 } };
    const mine = await connectTestClient(scoped.service.createServer(), { authInfo });
    try {
      const found = items(await mine.callTool('search_orders', { days: 90, limit: 50 }));
      expect(found.length).toBeGreaterThan(0);
      expect(found.every((order) => order.customer_email === 'customer042@example.com')).toBe(true);
      expect(expectFailure(await mine.callTool('search_orders', { customer_id: 7 })).error).toBe(
        'invalid_argument',
      );
    } finally {
      await mine.close();
    }
    const anonymous = await connectTestClient(scoped.service.createServer());
    try {
      expect(expectFailure(await anonymous.callTool('search_orders', {})).error).toBe('permission_denied');
    } finally {
      await anonymous.close();
    }
  });

  const trackingNumberOf = async (customerId: number): Promise<string> => {
    const { rows } = await scoped.service.db.pglite!.query<{ tracking_number: string }>(
      `SELECT tracking_number FROM orders WHERE customer_id = $1 AND tracking_number IS NOT NULL
       ORDER BY order_id LIMIT 1`,
      [customerId],
    );
    return rows[0]!.tracking_number;
  };

  it('track_shipment answers for the caller’s own shipments only, by number or by link; nothing else reaches the carrier', async () => {
    const authInfo = { token: 't', clientId: 'portal', scopes: ['orders:read'], extra: { customerId: 42 } };
    const mine = await trackingNumberOf(42);
    const theirs = await trackingNumberOf(43);
    const client = await connectTestClient(scoped.service.createServer(), { authInfo });
    try {
      expect(
        (await client.callTool('track_shipment', { tracking_number: mine })).structuredContent,
      ).toMatchObject({ ok: true, trackingNumber: mine });
      expect(
        (await client.callTool('track_shipment', { tracking_url: `${scoped.carrier.url}/track/${mine}` }))
          .structuredContent,
      ).toMatchObject({ ok: true, trackingNumber: mine });
      const before = scoped.carrier.requests;
      const unknown = {
        error: 'not_found',
        message: 'The carrier does not know this tracking number.',
      };
      for (const args of [
        { tracking_number: theirs },
        { tracking_url: `${scoped.carrier.url}/track/${theirs}` },
        { tracking_url: `${scoped.carrier.url}/track/${theirs}?mine=${mine}` },
      ]) {
        const result = await client.callTool('track_shipment', args);
        expect(expectFailure(result)).toMatchObject(unknown);
        expect(JSON.stringify(result)).not.toContain('Parcelwise');
      }
      const odd = await client.callTool('track_shipment', { tracking_url: `${scoped.carrier.url}/other` });
      expect(expectFailure(odd)).toMatchObject({ error: 'invalid_argument' });
      expect(scoped.carrier.requests).toBe(before);
    } finally {
      await client.close();
    }
  });

  it('a customerId claim that is not one whole number is refused by every scoped tool, never a database error', async () => {
    const theirs = await trackingNumberOf(43);
    for (const customerId of [[42, 43], '43', { id: 43 }, 42.5, true, null, -1]) {
      const authInfo = { token: 't', clientId: 'portal', scopes: ['orders:read'], extra: { customerId } };
      const client = await connectTestClient(scoped.service.createServer(), { authInfo });
      try {
        for (const [tool, args] of [
          ['render_invoice', { order_id: '4000000000007919' }],
          ['track_shipment', { tracking_number: theirs }],
          ['search_orders', { days: 90 }],
          ['get_order_status', { order_id: '4000000000007919' }],
        ] as const) {
          const result = await client.callTool(tool, args);
          expect(expectFailure(result)).toMatchObject({
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

describe('search_docs', () => {
  // The root of its own is scopedWithDocs' (see the top of this file).
  let docs: TestClient;
  beforeAll(async () => {
    docs = await connectTestClient(scopedWithDocs.service.createServer());
  });
  afterAll(async () => {
    await docs?.close();
  });

  it('returns file, line and text of matching lines', async () => {
    const found = items(await client.callTool('search_docs', { query: 'refunded within 30 days' }));
    expect(found).toHaveLength(3);
    expect(found[0]).toEqual({
      file: 'refund-policy.md',
      line: 6,
      text: '- An order can be refunded within 30 days of delivery.',
      score: 4,
    });
  });

  it('an empty query is invalid_argument; no hit is success with an empty list', async () => {
    expect(expectFailure(await client.callTool('search_docs', { query: '  ' })).error).toBe(
      'invalid_argument',
    );
    const none = await client.callTool('search_docs', { query: 'zeppelin' });
    expect(none.isError).toBeUndefined();
    expect(items(none)).toEqual([]);
  });

  it('clamps top_k to 5 on the server and says so', async () => {
    const result = await client.callTool('search_docs', { query: 'refund order days', top_k: 100 });
    expect(items(result)).toHaveLength(5);
    expect((result.structuredContent as { note: string }).note).toContain('top_k was cut to 5');
  });

  it('never reads outside the root: traversal paths are refused, links out are skipped', async () => {
    const outside = mkdtempSync(join(tmpdir(), 'docs-outside-'));
    writeFileSync(join(outside, 'secret.md'), 'refund secret: the admin password is hunter2\n');
    writeFileSync(join(root, 'refunds.md'), '# Refunds\nrefund within 30 days\n');
    symlinkSync(join(outside, 'secret.md'), join(root, 'linked.md'));
    symlinkSync(outside, join(root, 'linked-dir'));
    mkdirSync(join(root, 'sub'));
    try {
      for (const path of [
        '../',
        '../../etc/passwd',
        '/etc/passwd',
        'sub/../../',
        'linked.md',
        'linked-dir/secret.md',
        'a\u0000b',
        '..%2f..%2fetc%2fpasswd',
        '%2e%2e/%2e%2e/etc/passwd',
        '%252e%252e%252fetc%252fpasswd',
        '..\\..\\etc\\passwd',
        '\uff0e\uff0e/\uff0e\uff0e/etc/passwd',
        '..\uff0fsecret.md',
        'linked.md.',
        'linked.md ',
        'LINKED.MD',
        'refunds.md\n../secret.md',
      ]) {
        const result = await docs.callTool('search_docs', { query: 'refund', path });
        expect(expectFailure(result).error).toBe('invalid_argument');
        expect(JSON.stringify(result)).not.toContain('hunter2');
      }
      const all = await docs.callTool('search_docs', { query: 'refund secret', top_k: 5 });
      expect(items(all).map((item) => item.file)).toEqual(['refunds.md', 'refunds.md']);
      expect(JSON.stringify(all)).not.toContain('hunter2');
    } finally {
      for (const entry of readdirSync(root)) rmSync(join(root, entry), { recursive: true, force: true });
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it('an empty docs root is success with no items', async () => {
    expect(readdirSync(root)).toEqual([]);
    const result = await docs.callTool('search_docs', { query: 'refund' });
    expect(result.structuredContent).toEqual({
      ok: true,
      items: [],
      total: 0,
      note: 'No line matches these keywords; try other words.',
    });
  });
});

describe('track_shipment', () => {
  it('asks the carrier and returns its events', async () => {
    const result = await client.callTool('track_shipment', { tracking_number: 'TRK00000042' });
    expect(result.structuredContent).toMatchObject({
      ok: true,
      trackingNumber: 'TRK00000042',
      status: 'delivered',
    });
  });

  it('refuses links that are not the carrier’s before anything is fetched', async () => {
    const before = running.carrier.requests;
    for (const url of [
      'http://169.254.169.254/latest/meta-data/',
      'http://127.0.0.1:1/track/TRK00000001',
      'file:///etc/passwd',
      'https://evil.example/track/1',
    ]) {
      expect(expectFailure(await client.callTool('track_shipment', { tracking_url: url })).error).toBe(
        'permission_denied',
      );
    }
    expect(running.carrier.requests).toBe(before);
  });

  it('a stalled carrier times out; a broken one is internal with nothing of its page leaked', async () => {
    running.carrier.mode = 'stall';
    try {
      expect(
        expectFailure(await client.callTool('track_shipment', { tracking_number: 'TRK00000100' })).error,
      ).toBe('timeout');
      running.carrier.mode = 'garbage';
      const broken = await client.callTool('track_shipment', { tracking_number: 'TRK00000102' });
      expect(expectFailure(broken)).toMatchObject({
        error: 'internal',
        incidentId: expect.stringMatching(/^inc_/),
      });
      expect(JSON.stringify(broken)).not.toMatch(/hunter2|carrier\.internal|\/srv\//);
    } finally {
      running.carrier.mode = 'ok';
    }
  });
});

describe('render_invoice', () => {
  it('renders an order through the bundled CLI, without a shell', async () => {
    const result = await client.callTool('render_invoice', { order_id: '4000000000007919' });
    const invoice = (result.structuredContent as { invoice: string }).invoice;
    expect(invoice.split('\n').slice(0, 2)).toEqual(['INVOICE', 'Order:    4000000000007919']);
    expect(invoice).toMatch(/Total: {4}\d+\.\d{2} (USD|EUR)/);
  });

  it('an unknown order is not_found and a malformed id is refused', async () => {
    expect(
      expectFailure(await client.callTool('render_invoice', { order_id: '4000000000000001' })).error,
    ).toBe('not_found');
    expect(expectFailure(await client.callTool('render_invoice', { order_id: '--help' })).error).toBe(
      'invalid_argument',
    );
  });
});

describe('audit', () => {
  it('every call so far has one record and the chain verifies', async () => {
    await running.service.audit.flush();
    const verdict = await verifyAuditFile(running.auditFile);
    expect(verdict).toMatchObject({ intact: true });
    expect(verdict.intact && verdict.records).toBeGreaterThan(20);
  });
});
