import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { verifyAuditFile } from '@toolgate/audit';
import type { CircuitEventType } from '@toolgate/circuit-breaker';
import { createSilentLogger } from '@toolgate/core';
import { connectTestClient, type FaultProxy, startFaultProxy, type TestClient } from '@toolgate/core/testing';
import { createOrderService, type OrderService } from '@toolgate/order-service/service';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelopeOf, outcomeCode, resultContractProblems } from '../src/result-contract.js';

import { outageDatabaseUrl, prepareTestSchema } from '../src/test-database.js';

const RESET_MS = 400;
// The orders-db breaker's deadline in the order-service; no call may take longer (plus scheduling slack).
const BREAKER_TIMEOUT_MS = 5000;

interface Call {
  phase: 'up' | 'down' | 'recovering' | 'recovered' | 'straddling';
  outcome: string;
  ms: number;
  retryAfterMs: unknown;
  result: CallToolResult;
}

describe('database down: PostgreSQL goes away while a client loads search_orders', () => {
  let proxy: FaultProxy;
  let service: OrderService;
  let client: TestClient;
  let dir: string;
  const events: { type: CircuitEventType; breaker: string; at: number }[] = [];

  beforeAll(async () => {
    const base = outageDatabaseUrl();
    const scoped = new URL(await prepareTestSchema(base));
    proxy = await startFaultProxy({ host: scoped.hostname, port: Number(scoped.port || 5432) });
    scoped.hostname = '127.0.0.1';
    scoped.port = String(proxy.port);
    dir = await mkdtemp(join(tmpdir(), 'toolgate-bench-dbdown-'));
    service = await createOrderService(
      {
        databaseUrl: scoped.href,
        carrierUrl: 'http://127.0.0.1:9',
        auditFile: join(dir, 'audit.jsonl'),
        transport: 'pipe',
        // This suite loads one caller far past the app's 120 calls a minute: it tests the stack, not the limit.
        callsPerMinute: 1_000_000,
        breakerResetMs: RESET_MS,
      },
      createSilentLogger(),
    );
    for (const type of ['open', 'half-open', 'close'] as const) {
      service.breakers.on(type, (event) => events.push({ type, breaker: event.breaker, at: Date.now() }));
    }
    client = await connectTestClient(service.createServer(), { sessionId: 'db-down' });
  });

  afterAll(async () => {
    await client?.close();
    await proxy?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('calls turn unavailable, short-circuit fast while open, recover when the database returns; one audit record each, chain intact', async () => {
    const calls: Call[] = [];
    let phase: Exclude<Call['phase'], 'straddling'> = 'up';
    let stop = false;
    let counter = 0;
    const worker = async (): Promise<void> => {
      while (!stop) {
        counter += 1;
        // Distinct arguments: repeat-guard must not answer any of them.
        const args = {
          customer_email: `customer${String(1 + (counter % 200)).padStart(3, '0')}@`,
          days: 1 + (counter % 90),
        };
        const callPhase = phase;
        const started = performance.now();
        const result = await client.callTool('search_orders', args, { timeoutMs: 30_000 });
        const ms = performance.now() - started;
        // A call that straddles a change of phase belongs to neither side.
        calls.push({
          phase: phase === callPhase ? callPhase : 'straddling',
          outcome: outcomeCode(result),
          ms,
          retryAfterMs: envelopeOf(result).retryAfterMs,
          result,
        });
        // A short pause while the breaker is open, so the test does not spin on instant answers.
        if (result.isError) await new Promise((resolveWait) => setTimeout(resolveWait, 5));
      }
    };
    const waitFor = async (predicate: () => boolean, limitMs: number, what: string): Promise<void> => {
      const deadline = Date.now() + limitMs;
      while (!predicate()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((resolveWait) => setTimeout(resolveWait, 10));
      }
    };
    const workers = Array.from({ length: 4 }, worker);

    await waitFor(
      () => calls.filter((call) => call.phase === 'up').length >= 40,
      10_000,
      '40 calls with the database up',
    );
    phase = 'down';
    await proxy.down();
    await waitFor(() => events.some((event) => event.type === 'open'), 10_000, 'the breaker to open');
    const openedAt = Date.now();
    await waitFor(() => Date.now() - openedAt > 3 * RESET_MS, 10_000, 'a few half-open probes');
    phase = 'recovering';
    await proxy.up();
    await waitFor(() => events.at(-1)?.type === 'close', 10_000, 'the breaker to close');
    phase = 'recovered';
    await waitFor(
      () => calls.filter((call) => call.phase === 'recovered').length >= 40,
      10_000,
      '40 calls after recovery',
    );
    stop = true;
    await Promise.all(workers);

    // Every result keeps the contract; the database's failure reaches the model as `unavailable` only.
    expect(calls.flatMap((call) => resultContractProblems(call.result))).toEqual([]);
    expect(new Set(calls.map((call) => call.outcome))).toEqual(new Set(['ok', 'unavailable']));
    expect(calls.filter((call) => call.phase === 'up').every((call) => call.outcome === 'ok')).toBe(true);
    expect(calls.filter((call) => call.phase === 'recovered').every((call) => call.outcome === 'ok')).toBe(
      true,
    );
    const down = calls.filter((call) => call.phase === 'down');
    expect(down.length).toBeGreaterThan(10);
    expect(down.every((call) => call.outcome === 'unavailable')).toBe(true);
    // No call hangs past the breaker's deadline.
    expect(Math.max(...calls.map((call) => call.ms))).toBeLessThan(BREAKER_TIMEOUT_MS + 1000);
    // While open, the breaker answers without touching the pool: fast, with a retry time.
    const shortCircuited = down.filter((call) => typeof call.retryAfterMs === 'number');
    expect(shortCircuited.length).toBeGreaterThan(5);
    expect(shortCircuited.every((call) => (call.retryAfterMs as number) <= RESET_MS)).toBe(true);
    expect(Math.max(...shortCircuited.map((call) => call.ms))).toBeLessThan(250);
    // The breaker went open, probed half-open (and re-opened while the database stayed away), then closed.
    const kinds = events.filter((event) => event.breaker === 'orders-db').map((event) => event.type);
    expect(kinds[0]).toBe('open');
    expect(kinds).toContain('half-open');
    expect(kinds.at(-1)).toBe('close');
    expect(kinds.filter((kind) => kind === 'open').length).toBeGreaterThanOrEqual(2);
    expect(service.breakers.stats()['orders-db']?.state).toBe('closed');
    expect(service.breakers.stats()['orders-db']?.inFlight).toBe(0);

    // Exactly one audit record per call, in a chain that verifies.
    await service.close();
    const lines = (await readFile(join(dir, 'audit.jsonl'), 'utf8')).trim().split('\n');
    const records = lines.map(
      (line) => JSON.parse(line) as { requestId: unknown; outcome: string; tool: string },
    );
    expect(records).toHaveLength(calls.length);
    expect(new Set(records.map((record) => record.requestId)).size).toBe(calls.length);
    expect(records.every((record) => record.tool === 'search_orders')).toBe(true);
    expect(records.filter((record) => record.outcome === 'unavailable')).toHaveLength(
      calls.filter((call) => call.outcome === 'unavailable').length,
    );
    expect(await verifyAuditFile(join(dir, 'audit.jsonl'))).toMatchObject({
      intact: true,
      records: calls.length,
      head: (JSON.parse(lines.at(-1)!) as { hash: string }).hash,
    });
  });
});
