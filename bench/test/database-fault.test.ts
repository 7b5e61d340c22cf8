import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BreakerStats } from '@toolgate/circuit-breaker';
import {
  connectTestClient,
  type FaultProxy,
  type LogEntry,
  recordingLogger,
  startFaultProxy,
  type TestClient,
} from '@toolgate/core/testing';
import { createOrderService, type OrderService } from '@toolgate/order-service/service';
import { afterEach, describe, expect, it } from 'vitest';
import { envelopeOf, outcomeCode } from '../src/result-contract.js';
import { outageDatabaseUrl, prepareTestSchema } from '../src/test-database.js';

// How fast the orders-db breaker cuts off a dead database, measured through loopback TCP faults
// between the app and a real PostgreSQL (a network fault has no PGlite equivalent): a hard outage
// (port closed: ECONNREFUSED, live connections reset) and a silent partition (connections stay open,
// nothing is forwarded, nothing answers). The figures are printed; the assertions are bounds.

const RESET_MS = 500;
const BREAKER_TIMEOUT_MS = 5000;
const WORKERS = 32;
// Issue 13 measures the breaker at about 200 calls/s: each worker paces itself to WORKERS/RATE s a call.
const RATE = 200;

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

async function startService(): Promise<{
  proxy: FaultProxy;
  service: OrderService;
  clients: TestClient[];
  log: LogEntry[];
}> {
  const log: LogEntry[] = [];
  const dir = await mkdtemp(join(tmpdir(), 'toolgate-bench-dbfault-'));
  cleanup.push(() => rm(dir, { recursive: true, force: true }));
  const scoped = new URL(await prepareTestSchema(outageDatabaseUrl()));
  const proxy = await startFaultProxy({ host: scoped.hostname, port: Number(scoped.port || 5432) });
  scoped.hostname = '127.0.0.1';
  scoped.port = String(proxy.port);
  const service = await createOrderService(
    {
      databaseUrl: scoped.href,
      carrierUrl: 'http://127.0.0.1:9',
      transport: 'pipe',
      auditFile: join(dir, 'audit.jsonl'),
      breakerResetMs: RESET_MS,
    },
    recordingLogger(log),
  );
  cleanup.push(() => proxy.close());
  cleanup.push(() => service.close());
  // One caller per worker: the service's per-caller rate limit (120 calls a minute) is not under test.
  const clients: TestClient[] = [];
  for (let worker = 0; worker < WORKERS; worker += 1) {
    const client = await connectTestClient(service.createServer(), {
      sessionId: `db-fault-${worker}`,
      authInfo: { token: `worker-${worker}`, clientId: `worker-${worker}`, scopes: ['orders:read'] },
    });
    cleanup.push(() => client.close());
    clients.push(client);
  }
  return { proxy, service, clients, log };
}

// Calls that met the dead database: those that failed, plus those still in flight (they will).
const metDatabase = (stats: BreakerStats): number => stats.totals.failures + stats.inFlight;

/** Runs one worker per client calling search_orders at RATE calls/s in all until stopped; records each call. */
function load(clients: readonly TestClient[]) {
  const calls: { outcome: string; ms: number; hint: unknown; startedAt: number }[] = [];
  let stop = false;
  let counter = 0;
  const interval = (clients.length / RATE) * 1000;
  const worker = async (client: TestClient): Promise<void> => {
    while (!stop) {
      counter += 1;
      const args = {
        customer_email: `customer${String(1 + (counter % 200)).padStart(3, '0')}@`,
        days: 1 + (counter % 90),
      };
      const startedAt = performance.now();
      const result = await client.callTool('search_orders', args, { timeoutMs: 30_000 });
      calls.push({
        outcome: outcomeCode(result),
        ms: performance.now() - startedAt,
        hint: envelopeOf(result).hint,
        startedAt,
      });
      const wait = interval - (performance.now() - startedAt);
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
  };
  const workers = clients.map(worker);
  return {
    calls,
    async stop() {
      stop = true;
      await Promise.all(workers);
    },
  };
}

async function waitFor(predicate: () => boolean, limitMs: number, what: string): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe.each([
  { fault: 'hard outage (port closed, connections reset)', silent: false },
  { fault: 'silent partition (nothing forwarded, nothing answered)', silent: true },
])('orders-db breaker under a $fault', ({ fault, silent }) => {
  it('opens within the call deadline after healthy traffic, answers unavailable with retryAfterMs while open, recovers through half-open', async () => {
    const { proxy, service, clients, log } = await startService();
    const stats = () => service.breakers.stats()['orders-db']!;
    const opened: { at: number; admitted: number }[] = [];
    let closedAt = 0;
    service.breakers.on('open', () => opened.push({ at: performance.now(), admitted: metDatabase(stats()) }));
    service.breakers.on('close', () => {
      closedAt = performance.now();
    });
    const traffic = load(clients);
    // A healthy stretch first: the window fills with successes (the case the rate rule alone fails).
    await waitFor(() => traffic.calls.length >= 300, 30_000, '300 healthy calls');
    expect(traffic.calls.every((call) => call.outcome === 'ok')).toBe(true);

    const faultAt = performance.now();
    const linesBefore = log.length;
    const before = stats().totals.failures;
    if (silent) proxy.blackhole();
    else await proxy.down();
    await waitFor(() => opened.length > 0, BREAKER_TIMEOUT_MS + 5000, 'the breaker to open');
    const msToOpen = opened[0]!.at - faultAt;
    const reachedDeadDatabase = opened[0]!.admitted - before;
    const rate = 300 / ((faultAt - traffic.calls[0]!.startedAt) / 1000);
    process.stderr.write(
      `database fault (${fault}): breaker open ${Math.round(msToOpen)} ms after the fault; ${reachedDeadDatabase} calls reached the dead database; healthy load ${Math.round(rate)} calls/s over ${WORKERS} clients\n`,
    );

    // Short-circuits while open: unavailable with a retry time, never "do not send calls in parallel".
    await waitFor(
      () =>
        traffic.calls.filter((call) => call.startedAt > opened[0]!.at && call.outcome === 'unavailable')
          .length >= 20,
      5000,
      '20 short-circuited calls',
    );
    const restoreAt = performance.now();
    const outageLines = log.slice(linesBefore);
    // Connections that lived through a partition are reset, as a client's keepalive would find.
    if (silent) proxy.cut();
    proxy.heal();
    await proxy.up();
    await waitFor(() => closedAt > 0 && stats().state === 'closed', 15_000, 'the breaker to close');
    const recoveredAt = performance.now();
    await waitFor(
      () =>
        traffic.calls.filter((call) => call.startedAt > recoveredAt && call.outcome === 'ok').length >= 50,
      15_000,
      '50 calls after recovery',
    );
    await traffic.stop();

    const during = traffic.calls.filter((call) => call.startedAt >= faultAt && call.startedAt < closedAt);
    const outage = traffic.calls.filter((call) => call.startedAt >= faultAt && call.startedAt < restoreAt);
    const failed = outage.filter((call) => call.outcome !== 'ok').length;
    const sorted = outage.map((call) => call.ms).sort((a, b) => a - b);
    const p99 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))]!;
    const hung = traffic.calls.filter((call) => call.ms >= BREAKER_TIMEOUT_MS + 1500).length;
    const messages = new Map<string, number>();
    for (const entry of outageLines) {
      const message = entry.message ?? '';
      messages.set(message, (messages.get(message) ?? 0) + 1);
    }
    process.stderr.write(
      `database fault (${fault}): during the outage ${outage.length} calls (${failed} failed), p99 ${Math.round(p99)} ms, slowest ${Math.round(sorted.at(-1)!)} ms, ${hung} hung past ${BREAKER_TIMEOUT_MS + 1500} ms; ` +
        `${outageLines.length} log lines (${(outageLines.length / Math.max(1, failed)).toFixed(3)} per failed call): ${JSON.stringify(Object.fromEntries(messages))}\n`,
    );
    expect(hung).toBe(0);
    // Log volume: core logs each call that met the dead database (one 'tool error with a cause' line,
    // not throttled yet); a short-circuit logs nothing, so the outage's length adds no lines: the
    // same bound as the calls that reach the dead database, plus the breaker's state changes.
    // A call in flight that the database still answered (taking it away is not instant) resets the
    // breaker's consecutive count, and its client's next call meets the dead database: each such late
    // success allows one more call (and line) below.
    const lateSuccesses = traffic.calls.filter(
      (call) => call.outcome === 'ok' && call.startedAt < faultAt && call.startedAt + call.ms > faultAt,
    ).length;
    const causeLines = outageLines.filter((entry) => entry.message === 'tool error with a cause').length;
    expect(causeLines).toBeLessThanOrEqual(WORKERS + 5 + lateSuccesses);
    expect(outageLines.length - causeLines).toBeLessThanOrEqual(3);
    expect(during.filter((call) => !['ok', 'unavailable', 'timeout'].includes(call.outcome))).toEqual([]);
    expect(during.some((call) => call.outcome === 'rate_limited')).toBe(false);
    expect(traffic.calls.some((call) => typeof call.hint === 'string' && /parallel/.test(call.hint))).toBe(
      false,
    );
    // No call waits past the breaker's deadline (plus scheduling slack on a shared machine).
    expect(Math.max(...traffic.calls.map((call) => call.ms))).toBeLessThan(BREAKER_TIMEOUT_MS + 1500);
    // Bounded: the breaker opens within the deadline of the first calls to fail (a hard outage fails
    // at once; a partition at the pool's connect timeout or the call deadline).
    expect(msToOpen).toBeLessThan(silent ? BREAKER_TIMEOUT_MS + 1500 : 1000);
    // Only calls already in flight when the database went away, plus the few that tripped it (and one
    // per late success, as above).
    expect(reachedDeadDatabase).toBeLessThanOrEqual(WORKERS + 5 + lateSuccesses);
    const kinds = stats().totals;
    expect(kinds.closed).toBeGreaterThanOrEqual(1);
    expect(stats().inFlight).toBe(0);
  }, 90_000);
});
