import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { createSilentLogger } from '@toolgate/core';
import {
  connectTestClient,
  expectFailure,
  parseResultText,
  reportMissingService,
  type TestClient,
} from '@toolgate/core/testing';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/db.js';
import { createOrderService, type OrderService } from '../src/service.js';
import { createScratchDatabase, PAID, type ScratchDatabase, TEST_DATABASE_URL } from './fleet-harness.js';

// Two different changes of one order sent together, on real PostgreSQL: each must see what the other
// did once it holds the order's lock (the refund bound is what was paid less every earlier refund).

const desk: AuthInfo = {
  token: 'desk-token-0123456789abcdef',
  clientId: 'support-desk',
  scopes: ['orders:read', 'orders:write', 'docs:read'],
  extra: { sub: 'agent-1' },
};

if (!TEST_DATABASE_URL) {
  reportMissingService(
    it,
    'the concurrent write tests',
    'TEST_DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/test',
  );
}

describe.runIf(TEST_DATABASE_URL)('order-service: two changes of one order at once (PostgreSQL)', () => {
  let database: ScratchDatabase | undefined;
  let service: OrderService | undefined;
  let client: TestClient | undefined;
  let holder: pg.Client | undefined;
  let scratch: string | undefined;
  afterEach(async () => {
    await holder?.end().catch(() => undefined);
    await client?.close();
    await service?.close();
    await database?.drop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
    holder = client = service = database = scratch = undefined;
  });

  async function start(): Promise<TestClient> {
    scratch = mkdtempSync(join(tmpdir(), 'order-service-concurrent-'));
    database = await createScratchDatabase(TEST_DATABASE_URL!);
    const direct = await openDatabase({ url: database.url, setup: true });
    await direct.close();
    service = await createOrderService(
      {
        databaseUrl: database.url,
        carrierUrl: 'http://127.0.0.1:9',
        auditFile: join(scratch, 'audit.jsonl'),
        transport: 'tcp',
      },
      createSilentLogger(),
    );
    client = await connectTestClient(service.createServer(), {
      authInfo: desk,
      onElicit: () => ({ action: 'accept' }),
    });
    return client;
  }

  /** Holds the order's row lock on a connection of the test's own until `release()`. */
  async function holdOrder(orderId: string): Promise<{ release(): Promise<void> }> {
    holder = new pg.Client({ connectionString: database!.url });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM orders WHERE order_id = $1 FOR UPDATE', [orderId]);
    return { release: async () => void (await holder!.query('COMMIT')) };
  }

  /** Polls (at most 10 s) until `count` of the service's statements wait for a row lock. */
  async function waitingForLock(count: number): Promise<void> {
    for (let poll = 0; poll < 500; poll += 1) {
      const [row] = await database!.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE OF o%'`,
      );
      if (row!.n >= count) return;
      await new Promise((done) => setTimeout(done, 20));
    }
    throw new Error(`timed out waiting for ${count} writes to wait for the order's lock`);
  }

  it('two different refunds sent together never refund more than was paid: the second sees the first once it holds the lock', async () => {
    const desk = await start();
    const [order] = await database!.query<{ total_cents: number }>(
      'SELECT total_cents FROM orders WHERE order_id = $1',
      [PAID],
    );
    const total = order!.total_cents;
    const amount = Math.ceil(total * 0.6);
    const lock = await holdOrder(PAID);
    const calls = [
      desk.callTool('request_refund', { order_id: PAID, amount_cents: amount, reason: 'arrived damaged' }),
      desk.callTool('request_refund', { order_id: PAID, amount_cents: amount, reason: 'item missing' }),
    ];
    await waitingForLock(2);
    await lock.release();
    const answers = await Promise.all(calls);
    const refunded = await database!.query<{ sum: number }>(
      'SELECT coalesce(sum(amount_cents), 0)::int AS sum FROM refunds WHERE order_id = $1',
      [PAID],
    );
    expect(refunded[0]!.sum).toBe(amount);
    const made = answers.filter((answer) => answer.isError !== true);
    const refused = answers.filter((answer) => answer.isError === true);
    expect(made).toHaveLength(1);
    expect(parseResultText(made[0]!)).toMatchObject({
      ok: true,
      amount_cents: amount,
      refunded_cents: amount,
    });
    expect(expectFailure(refused[0]!)).toMatchObject({
      error: 'invalid_argument',
      message: `At most ${total - amount} cents of order ${PAID} can still be refunded.`,
    });
  }, 60_000);
});
