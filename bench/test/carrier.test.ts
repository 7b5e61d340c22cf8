import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { verifyAuditFile } from '@toolgate/audit';
import type { CircuitEventType } from '@toolgate/circuit-breaker';
import { createSilentLogger } from '@toolgate/core';
import { connectTestClient, type TestClient } from '@toolgate/core/testing';
import { type FakeCarrier, startFakeCarrier } from '@toolgate/order-service/fake-carrier';
import { createOrderService, type OrderService } from '@toolgate/order-service/service';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelopeOf, outcomeCode, resultContractProblems } from '../src/result-contract.js';

const CARRIER_TIMEOUT_MS = 300;
const RESET_MS = 500;

describe('carrier slow and failing: timeouts fire, the breaker opens and half-opens, nothing leaks', () => {
  let carrier: FakeCarrier;
  let service: OrderService;
  let client: TestClient;
  let dir: string;
  let serial = 0;
  const results: CallToolResult[] = [];
  const events: CircuitEventType[] = [];

  // Distinct tracking numbers, so repeat-guard never answers instead of the carrier.
  const track = async (): Promise<{ result: CallToolResult; ms: number }> => {
    serial += 1;
    const started = performance.now();
    const result = await client.callTool('track_shipment', {
      tracking_number: `TRK${String(serial).padStart(8, '0')}`,
    });
    results.push(result);
    return { result, ms: performance.now() - started };
  };
  const waitForEvent = async (type: CircuitEventType, after: number): Promise<void> => {
    const deadline = Date.now() + 5000;
    while (events.lastIndexOf(type) < after) {
      if (Date.now() > deadline) throw new Error(`no ${type} event`);
      await new Promise((resolveWait) => setTimeout(resolveWait, 10));
    }
  };

  beforeAll(async () => {
    carrier = await startFakeCarrier({ mode: 'stall' });
    dir = await mkdtemp(join(tmpdir(), 'toolgate-bench-carrier-'));
    service = await createOrderService(
      {
        databaseUrl: undefined,
        carrierUrl: carrier.url,
        auditFile: join(dir, 'audit.jsonl'),
        transport: 'pipe',
        // This suite loads one caller far past the app's 120 calls a minute: it tests the stack, not the limit.
        callsPerMinute: 1_000_000,
        breakerResetMs: RESET_MS,
        carrierTimeoutMs: CARRIER_TIMEOUT_MS,
      },
      createSilentLogger(),
    );
    for (const type of ['open', 'half-open', 'close'] as const) {
      service.breakers.on(type, (event) => {
        if (event.breaker === 'carrier-api') events.push(type);
      });
    }
    client = await connectTestClient(service.createServer(), { sessionId: 'carrier' });
  });

  afterAll(async () => {
    await client?.close();
    await service?.close();
    await carrier?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('a stalled carrier: each call answers `timeout` at the carrier deadline; after 3 the breaker opens and answers at once', async () => {
    for (let i = 0; i < 3; i += 1) {
      const { result, ms } = await track();
      expect(outcomeCode(result)).toBe('timeout');
      expect(ms).toBeGreaterThanOrEqual(CARRIER_TIMEOUT_MS - 20);
      expect(ms).toBeLessThan(CARRIER_TIMEOUT_MS + 500 + 500);
    }
    expect(events).toEqual(['open']);
    const requestsBefore = carrier.requests;
    const { result, ms } = await track();
    expect(envelopeOf(result)).toMatchObject({ ok: false, error: 'unavailable', retryable: true });
    expect(envelopeOf(result).retryAfterMs).toBeGreaterThan(0);
    expect(envelopeOf(result).retryAfterMs).toBeLessThanOrEqual(RESET_MS);
    expect(ms).toBeLessThan(100);
    expect(carrier.requests).toBe(requestsBefore); // short-circuited: the carrier never saw it
  });

  it('half-open: a probe to a failing (503) carrier re-opens; to one that answers garbage too, with an incident id and no internals', async () => {
    carrier.mode = 'fail';
    await waitForEvent('half-open', 0);
    const failed = await track();
    expect(envelopeOf(failed.result)).toMatchObject({ ok: false, error: 'unavailable', retryable: true });
    expect(events.slice(-2)).toEqual(['half-open', 'open']);

    carrier.mode = 'garbage';
    await waitForEvent('half-open', 2);
    const garbage = await track();
    const envelope = envelopeOf(garbage.result);
    expect(envelope).toMatchObject({ ok: false, error: 'internal', retryable: false });
    expect(envelope.incidentId).toMatch(/^inc_/);
    expect(events.slice(-2)).toEqual(['half-open', 'open']);
  });

  it('half-open: a probe to a healthy carrier closes the breaker and calls answer normally again', async () => {
    carrier.mode = 'ok';
    await waitForEvent('half-open', 4);
    const probe = await track();
    expect(probe.result.structuredContent).toMatchObject({
      ok: true,
      carrier: 'Parcelwise',
      trackingNumber: `TRK${String(serial).padStart(8, '0')}`,
    });
    expect(events.at(-1)).toBe('close');
    for (let i = 0; i < 5; i += 1) expect(outcomeCode((await track()).result)).toBe('ok');
    expect(service.breakers.stats()['carrier-api']).toMatchObject({ state: 'closed', inFlight: 0 });
  });

  it('nothing internal leaked into any result; every result kept the contract; one audit record per call', async () => {
    const carrierAddress = new URL(carrier.url).host;
    for (const result of results) {
      expect(resultContractProblems(result)).toEqual([]);
      const text = JSON.stringify(result);
      for (const internal of [
        carrierAddress,
        '127.0.0.1',
        'carrier maintenance',
        'db-7.carrier.internal',
        'hunter2',
        '/srv/carrier',
        'app.js',
        '<html>',
      ]) {
        expect(text).not.toContain(internal);
      }
      expect(text).not.toMatch(/\bat .+:\d+:\d+/);
    }
    await service.audit.flush();
    expect(await verifyAuditFile(join(dir, 'audit.jsonl'))).toMatchObject({
      intact: true,
      records: results.length,
    });
  });
});
