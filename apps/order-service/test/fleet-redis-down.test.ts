// Redis goes away under a running fleet: each policy keeps its documented failure mode, and no call
// waits for a Redis that is not there.
import { randomBytes } from 'node:crypto';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { expectFailure, parseResultText, reportMissingService } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Fleet, haproxyAvailable, startFleet } from '../src/fleet.js';
import {
  type CuttableProxy,
  createScratchDatabase,
  fleetCaller,
  fleetClient,
  type NotingClient,
  PAID,
  PENDING,
  type ScratchDatabase,
  startCuttableProxy,
  TEST_DATABASE_URL,
  TEST_REDIS_URL,
} from './fleet-harness.js';

const WRITES_PER_MINUTE = 5;
/** Every call must be answered within this (the SDK client gives up and the test fails otherwise). */
const BOUND_MS = 5000;
const run = randomBytes(4).toString('hex');
const desk = fleetCaller('down-desk', run, ['orders:read', 'orders:write', 'docs:read']);
const ready = TEST_DATABASE_URL && TEST_REDIS_URL && haproxyAvailable();

if (!TEST_DATABASE_URL) {
  reportMissingService(
    it,
    'the Redis-down fleet tests',
    'TEST_DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/test',
  );
}
if (!TEST_REDIS_URL) {
  reportMissingService(it, 'the Redis-down fleet tests', 'TEST_REDIS_URL', 'redis://127.0.0.1:6379');
}
if (!haproxyAvailable()) {
  reportMissingService(it, 'the Redis-down fleet tests', 'haproxy on PATH', 'apt-get install -y haproxy');
}

describe.runIf(ready)('a fleet whose Redis went away', () => {
  let database: ScratchDatabase;
  let proxy: CuttableProxy;
  let fleet: Fleet;
  let client: NotingClient;
  const call = async (name: string, args: Record<string, unknown>): Promise<CallToolResult> =>
    (await client.client.callTool({ name, arguments: args }, undefined, {
      timeout: BOUND_MS,
    })) as CallToolResult;

  beforeAll(async () => {
    database = await createScratchDatabase(TEST_DATABASE_URL!);
    // A replica refuses to start without Redis (redisReady), so Redis is cut once the fleet runs.
    proxy = await startCuttableProxy(TEST_REDIS_URL!);
    fleet = await startFleet({
      replicas: 2,
      databaseUrl: database.url,
      redisUrl: proxy.url,
      tokens: JSON.stringify({ tokens: [desk.entry] }),
      env: { TOOLGATE_WRITES_PER_MINUTE: String(WRITES_PER_MINUTE) },
    });
    await proxy.cut();
    // In-process limits are per replica: call one replica directly so the count is exact.
    client = await fleetClient(fleet.replicas[0]!.url, desk.token);
  }, 90_000);
  afterAll(async () => {
    await client?.close();
    await fleet?.stop();
    await database?.drop();
  }, 60_000);

  it('repeat-guard fails open: an identical read runs again and is answered fresh', async () => {
    const args = { query: `return window ${run}` };
    const first = parseResultText(await call('search_docs', args)) as { ok: boolean; note?: string };
    const again = parseResultText(await call('search_docs', args)) as { ok: boolean; note?: string };
    expect(first.ok).toBe(true);
    expect(again).toEqual(first);
    expect(String(again.note)).not.toContain('Repeated call');
  });

  it('rate limits fail open to in-process limits; idempotency fails closed with unavailable, nothing written', async () => {
    const codes: string[] = [];
    for (let index = 0; index < WRITES_PER_MINUTE + 2; index++) {
      const answer = await call('cancel_order', { order_id: PENDING, reason: `ordered twice ${index}` });
      codes.push(expectFailure(answer).error);
    }
    expect(codes).toEqual([
      ...Array.from({ length: WRITES_PER_MINUTE }, () => 'unavailable'),
      'rate_limited',
      'rate_limited',
    ]);
    const [order] = await database.query<{ status: string }>(
      'SELECT status FROM orders WHERE order_id = $1',
      [PENDING],
    );
    expect(order!.status).toBe('pending');
  });

  it('a refund is refused with a retryable unavailable (idempotency and confirm fail closed); reads still work', async () => {
    const refund = await call('request_refund', {
      order_id: PAID,
      amount_cents: 500,
      reason: 'arrived damaged',
    });
    expect(expectFailure(refund)).toMatchObject({ error: 'unavailable', retryable: true });
    const [refunds] = await database.query<{ n: number }>('SELECT count(*)::integer AS n FROM refunds', []);
    expect(refunds!.n).toBe(0);
    const status = parseResultText(await call('get_order_status', { order_id: PAID })) as {
      ok: boolean;
      items: { order_id: string; status: string }[];
    };
    expect(status.ok).toBe(true);
    expect(status.items.map((item) => [item.order_id, item.status])).toEqual([[PAID, 'paid']]);
  });
});
