import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  connectTestClient,
  type LogEntry,
  recordingLogger,
  reportMissingService,
  startFaultProxy,
  type TestClient,
} from '@toolgate/core/testing';
import { createOrderService } from '@toolgate/order-service/service';
import { afterEach, describe, expect, it } from 'vitest';
import { outcomeCode } from '../src/result-contract.js';

import { testDatabase } from '../src/test-database.js';

// Issue 13, case 10 (and 7 end to end): Redis goes away under the order-service (repeat cache, rate
// limits, idempotency and confirmations live there). Read calls go on; the log gets a few lines per
// incident, not one per call. The proxy in front of Redis closes its port and resets every
// connection, then comes back. Figures to stderr.

const CLIENTS = 20;
const CALLS_EACH = 10;
const redisUrl = process.env.TEST_REDIS_URL;

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

async function waitFor(predicate: () => Promise<boolean>, limitMs: number, what: string): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

if (!redisUrl) {
  reportMissingService(
    it,
    'the order-service Redis outage measurement',
    'TEST_REDIS_URL',
    'redis://127.0.0.1:6379',
  );
} else {
  describe('order-service with Redis down (port closed, connections reset)', () => {
    it('every read call is answered, none hangs; a few log lines per outage, not one per call', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'toolgate-bench-redis-'));
      cleanup.push(() => rm(dir, { recursive: true, force: true }));
      const target = new URL(redisUrl);
      const proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port || 6379) });
      cleanup.push(() => proxy.close());
      const database = await testDatabase();
      const log: LogEntry[] = [];
      const service = await createOrderService(
        {
          databaseUrl: database.url,
          carrierUrl: 'http://127.0.0.1:9',
          transport: 'pipe',
          auditFile: join(dir, 'audit.jsonl'),
          redisUrl: `redis://127.0.0.1:${proxy.port}`,
        },
        recordingLogger(log),
      );
      cleanup.push(() => service.close());
      const clients: TestClient[] = [];
      for (let index = 0; index < CLIENTS; index += 1) {
        const client = await connectTestClient(service.createServer(), {
          authInfo: { token: `redis-${index}`, clientId: `redis-fault-${index}`, scopes: ['orders:read'] },
        });
        cleanup.push(() => client.close());
        clients.push(client);
      }
      let counter = 0;
      const search = async (client: TestClient) => {
        counter += 1;
        const startedAt = performance.now();
        const result = await client.callTool(
          'search_orders',
          {
            customer_email: `customer${String(1 + (counter % 200)).padStart(3, '0')}@`,
            days: 1 + (counter % 90),
          },
          { timeoutMs: 30_000 },
        );
        return { outcome: outcomeCode(result), ms: performance.now() - startedAt };
      };
      const healthy = await Promise.all(clients.map(search));
      expect(healthy.map((call) => call.outcome)).toEqual(Array(CLIENTS).fill('ok'));

      const linesBefore = log.length;
      await proxy.down();
      const calls = (
        await Promise.all(
          clients.map(async (client) => {
            const mine = [];
            for (let index = 0; index < CALLS_EACH; index += 1) mine.push(await search(client));
            return mine;
          }),
        )
      ).flat();
      const outageLines = log.slice(linesBefore);
      await proxy.up();
      await waitFor(
        async () =>
          (await search(clients[0]!)).outcome === 'ok' && log.length > linesBefore + outageLines.length,
        15_000,
        'Redis to answer again',
      );
      const recoveryLines = log.slice(linesBefore + outageLines.length);

      const messages = new Map<string, number>();
      for (const entry of outageLines) {
        const message = entry.message ?? '';
        messages.set(message, (messages.get(message) ?? 0) + 1);
      }
      const outcomes = new Map<string, number>();
      for (const call of calls) outcomes.set(call.outcome, (outcomes.get(call.outcome) ?? 0) + 1);
      const slowest = Math.max(...calls.map((call) => call.ms));
      process.stderr.write(
        `redis fault: ${calls.length} search_orders calls with Redis down: ${JSON.stringify(Object.fromEntries(outcomes))}, slowest ${Math.round(slowest)} ms; ` +
          `${outageLines.length} log lines (${(outageLines.length / calls.length).toFixed(3)} per call): ${JSON.stringify(Object.fromEntries(messages))}; ` +
          `${recoveryLines.length} lines on recovery\n`,
      );
      expect(calls.map((call) => call.outcome)).toEqual(Array(calls.length).fill('ok'));
      // Store calls are bounded by short time limits: no call waits on a dead Redis.
      expect(slowest).toBeLessThan(2000);
      // One line per failing component and incident, not per call.
      expect(outageLines.length).toBeLessThanOrEqual(10);
    }, 90_000);
  });
}
