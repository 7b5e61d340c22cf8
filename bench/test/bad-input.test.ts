import { realpathSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { verifyAuditFile } from '@toolgate/audit';
import { createSilentLogger } from '@toolgate/core';
import { connectTestClient, type TestClient } from '@toolgate/core/testing';
import { type FakeCarrier, startFakeCarrier } from '@toolgate/order-service/fake-carrier';
import { createOrderService, type OrderService } from '@toolgate/order-service/service';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outcomeCode, resultContractProblems } from '../src/result-contract.js';
import { testDatabase } from '../src/test-database.js';

const SECRET_TOKEN = 'sk_live_bench_fuzz_0123456789abcdefABCDEF';
const APP_DIR = realpathSync(
  dirname(createRequire(import.meta.url).resolve('@toolgate/order-service/package.json')),
);

// What an attacker (or a confused model) sends: injections, traversals, SSRF targets, option-looking
// values, NULs, template syntax, prototype keys, huge and exotic strings.
const HOSTILE = [
  "' OR 1=1; --",
  "paid'; DROP TABLE orders; --",
  "'; UPDATE orders SET status = 'refunded'; --",
  '4000000000007919 OR 1=1',
  '%',
  '_',
  '\\',
  '../../../../etc/passwd',
  '..%2f..%2fetc%2fpasswd',
  '/etc/shadow',
  'docs/../../package.json',
  'C:\\Windows\\system32',
  '\u0000',
  'refund\u0000.md',
  '--help',
  '-rf',
  '--output=/tmp/x',
  '$' + '{process.env.DATABASE_URL}',
  '{{7*7}}',
  '<script>alert(1)</script>',
  'http://169.254.169.254/latest/meta-data/',
  'http://127.0.0.1:5432/',
  'file:///etc/passwd',
  'http://[::1]/',
  'javascript:alert(1)',
  'TRK00000042',
  'TRK00000042/../../admin',
  '4000000000007919',
  'customer001@',
  'refund days',
  '\u202Eevil',
  '🙂'.repeat(50),
  'A'.repeat(5000),
  '__proto__',
  'constructor',
];

const hostileString = fc.oneof(
  fc.constantFrom(...HOSTILE),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
);
const leaf = fc.oneof(
  hostileString,
  fc.integer(),
  fc.constantFrom(-1, 0, 1, 90, 91, 1e308, -1e308, Number.MAX_SAFE_INTEGER, 0.5),
  fc.boolean(),
  fc.constant(null),
);
// Per argument, values that pass the schema, so hostile neighbours reach the handlers and the database.
const PLAUSIBLE: Record<string, readonly unknown[]> = {
  status: ['pending', 'shipped', 'refunded'],
  days: [1, 30, 90],
  customer_email: ['customer001@', "' OR 1=1; --", '%', '_', '\\'],
  sort: ['created_at_desc', 'total_asc'],
  limit: [1, 10, 50],
  order_id: ['4000000000007919', '4000000000015838', '9999999999999999'],
  query: ['refund days', 'shipping', "'; DROP TABLE orders; --", '../../etc/passwd'],
  top_k: [1, 3, 7],
  path: ['refund-policy.md', '.', '../', '../../../../etc/passwd', 'refund-policy.md/../../package.json'],
  tracking_number: ['TRK00000042', 'TRK99999999'],
  tracking_url: ['http://169.254.169.254/latest/meta-data/', 'file:///etc/passwd', 'http://[::1]/'],
};
const value = fc.oneof(
  { weight: 6, arbitrary: leaf },
  { weight: 1, arbitrary: fc.array(leaf, { maxLength: 4 }) },
  {
    weight: 1,
    arbitrary: fc.dictionary(fc.constantFrom('$gt', '__proto__', 'a', 'toString'), leaf, { maxKeys: 3 }),
  },
);

interface ToolShape {
  name: string;
  keys: string[];
}

describe('bad input: random and hostile arguments at every tool of the order-service', () => {
  let carrier: FakeCarrier;
  let service: OrderService;
  let client: TestClient;
  let dir: string;
  let tools: ToolShape[];
  let checksum: () => Promise<unknown>;

  beforeAll(async () => {
    const database = await testDatabase();
    carrier = await startFakeCarrier({ mode: 'ok' });
    dir = await mkdtemp(join(tmpdir(), 'toolgate-bench-fuzz-'));
    service = await createOrderService(
      {
        databaseUrl: database.url,
        carrierUrl: carrier.url,
        auditFile: join(dir, 'audit.jsonl'),
        transport: 'pipe',
        // This suite loads one caller far past the app's 120 calls a minute: it tests the stack, not the limit.
        callsPerMinute: 1_000_000,
      },
      createSilentLogger(),
    );
    client = await connectTestClient(service.createServer(), {
      authInfo: { token: SECRET_TOKEN, clientId: 'fuzzer', scopes: ['orders:read'] },
      sessionId: 'fuzz',
    });
    tools = (await client.client.listTools()).tools.map((tool) => ({
      name: tool.name,
      keys: Object.keys(tool.inputSchema.properties ?? {}),
    }));
    const db: { query(text: string): Promise<{ rows: unknown[] }> } = (service.db.pool ?? service.db.pglite)!;
    checksum = async () =>
      (
        await db.query(
          `SELECT (SELECT count(*)::text FROM orders) AS orders, (SELECT count(*)::text FROM customers) AS customers,
             (SELECT md5(string_agg(o::text, ',' ORDER BY order_id)) FROM orders o) AS orders_md5,
             (SELECT md5(string_agg(c::text, ',' ORDER BY id)) FROM customers c) AS customers_md5`,
        )
      ).rows[0];
  });

  afterAll(async () => {
    await client?.close();
    await service?.close();
    await carrier?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('every result keeps the result contract and carries no stack, path, SQL, host or secret; the database is unchanged', async () => {
    expect(tools.map((tool) => tool.name).sort()).toEqual([
      'get_order_status',
      'render_invoice',
      'search_docs',
      'search_orders',
      'track_shipment',
    ]);
    const before = await checksum();
    const carrierHost = new URL(carrier.url).host;
    // Internal facts that no result may carry unless the caller sent them itself.
    const internals = [
      APP_DIR,
      realpathSync(tmpdir()),
      'node_modules',
      'file://',
      carrierHost,
      'postgres://',
      process.env.TEST_DATABASE_URL ? new URL(process.env.TEST_DATABASE_URL).host : '5432',
      SECRET_TOKEN,
      'SELECT ',
      ' FROM "',
      '_toolgate_total',
      'statement_timeout',
      'BEGIN READ ONLY',
      'make_interval',
      'ZodError',
      'TypeError',
      'ECONNREFUSED',
    ];
    let calls = 0;
    const outcomes = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...tools).chain((tool) =>
          fc.record({
            tool: fc.constant(tool),
            // The tool's own keys, so most calls get past the schema and reach the handlers ...
            own: fc.record(
              Object.fromEntries(
                tool.keys.map((key) => [
                  key,
                  fc.oneof(
                    { weight: 4, arbitrary: fc.constantFrom(...(PLAUSIBLE[key] ?? [null])) },
                    { weight: 1, arbitrary: value },
                  ),
                ]),
              ),
              { requiredKeys: [] },
            ),
            // ... and sometimes keys it does not have, prototype keys among them.
            extra: fc.option(
              fc.dictionary(
                fc.oneof(
                  fc.constantFrom('__proto__', 'constructor', 'sql', 'where', 'customer_id'),
                  fc.string({ maxLength: 10 }),
                ),
                value,
                { maxKeys: 3 },
              ),
            ),
          }),
        ),
        async ({ tool, own, extra }) => {
          // Through JSON, as on the wire (the in-memory transport would otherwise pass live objects).
          const args = JSON.parse(JSON.stringify({ ...own, ...(extra ?? {}) })) as Record<string, unknown>;
          calls += 1;
          const result = await client.callTool(tool.name, args);
          expect(resultContractProblems(result)).toEqual([]);
          outcomes.set(
            `${tool.name}:${outcomeCode(result)}`,
            (outcomes.get(`${tool.name}:${outcomeCode(result)}`) ?? 0) + 1,
          );
          const text = JSON.stringify(result);
          const sent = JSON.stringify(args);
          for (const internal of internals)
            if (!sent.includes(internal)) expect(text).not.toContain(internal);
          expect(text).not.toMatch(/\bat [^"]*:\d+:\d+/);
        },
      ),
      { numRuns: 400, seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31) },
    );
    expect(await checksum()).toEqual(before);
    // The fuzz reached the handlers too, not only the schema: every tool answered at least one call
    // with success or a handler's own verdict.
    for (const tool of tools) {
      const reached = [...outcomes].filter(
        ([key]) => key.startsWith(`${tool.name}:`) && !key.endsWith(':invalid_argument'),
      );
      expect(reached.length, `${tool.name}: ${JSON.stringify([...outcomes])}`).toBeGreaterThan(0);
    }

    // An unknown tool is a JSON-RPC error, never a crash; also with hostile names.
    for (const name of ['drop_table', '../search_orders', 'search_orders\u0000', '__proto__']) {
      calls += 1;
      await expect(client.callTool(name, {})).rejects.toThrow(McpError);
    }
    await service.audit.flush();
    expect(await verifyAuditFile(join(dir, 'audit.jsonl'))).toMatchObject({ intact: true, records: calls });
  }, 120_000);
});
