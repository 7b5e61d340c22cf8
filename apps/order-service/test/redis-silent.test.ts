// Redis behind a network that goes silent (a partition, a NAT or firewall that forgot the flow): no
// reset, no answer. The writes, which need Redis (idempotency and confirmation fail closed), must be
// refused within their bound while it lasts and work again once Redis can be reached, without a restart.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createSilentLogger } from '@toolgate/core';
import {
  connectTestClient,
  expectFailure,
  type FaultProxy,
  parseResultText,
  reportMissingService,
  startFaultProxy,
  type TestClient,
} from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { type FakeCarrier, startFakeCarrier } from '../src/fake-carrier.js';
import { createOrderService, type OrderService } from '../src/service.js';
import { PAID, TEST_REDIS_URL } from './fleet-harness.js';

if (!TEST_REDIS_URL) {
  reportMissingService(it, 'the silent-Redis test', 'TEST_REDIS_URL', 'redis://127.0.0.1:6379');
}

describe.runIf(TEST_REDIS_URL)('order-service with Redis behind a network that goes silent', () => {
  let proxy: FaultProxy | undefined;
  let service: OrderService | undefined;
  let carrier: FakeCarrier | undefined;
  let client: TestClient | undefined;
  let scratch: string | undefined;
  afterEach(async () => {
    await client?.close();
    await service?.close();
    await carrier?.close();
    await proxy?.close();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('refunds are refused unavailable while the connection is silent and go through again once Redis answers new connections', async () => {
    const target = new URL(TEST_REDIS_URL!);
    proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port || 6379) });
    carrier = await startFakeCarrier();
    scratch = mkdtempSync(join(tmpdir(), 'order-service-redis-silent-'));
    service = await createOrderService(
      {
        databaseUrl: undefined,
        carrierUrl: carrier.url,
        auditFile: join(scratch, 'audit.jsonl'),
        transport: 'tcp',
        redisUrl: `redis://127.0.0.1:${proxy.port}`,
      },
      createSilentLogger(),
    );
    // A caller of this run only: Redis outlives test runs.
    const sub = `silent-redis-${randomBytes(4).toString('hex')}`;
    client = await connectTestClient(service.createServer(), {
      authInfo: {
        token: `${sub}-token-0123456789`,
        clientId: 'support-desk',
        scopes: ['orders:read', 'orders:write', 'docs:read'],
        extra: { sub },
      },
      onElicit: () => ({ action: 'accept' }),
    });
    const refund = (cents: number): Promise<CallToolResult> =>
      client!.callTool('request_refund', { order_id: PAID, amount_cents: cents, reason: 'arrived damaged' });
    expect(parseResultText(await refund(100))).toMatchObject({ ok: true, refunded_cents: 100 });

    proxy.silenceLive();
    expect(expectFailure(await refund(200))).toMatchObject({ error: 'unavailable', retryable: true });

    // New connections reach Redis; the silent one must not stay the only way there.
    let answer: CallToolResult | undefined;
    for (let attempt = 0; attempt < 40 && (answer === undefined || answer.isError === true); attempt += 1) {
      await new Promise((done) => setTimeout(done, 250));
      answer = await refund(300 + attempt);
    }
    expect(parseResultText(answer!)).toMatchObject({ ok: true });
  }, 60_000);
});
