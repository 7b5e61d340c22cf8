// Staging and production sharing one Redis (the README allows it: each its own
// TOOLGATE_CONFIRM_AUDIENCE). Session 37's red team: only the confirmation keys named the deployment,
// so production answered staging's cached results ("Repeated call"), replayed staging's idempotent
// refund without running or confirming it, and shared each caller's rate budget.
import { randomBytes } from 'node:crypto';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import {
  connectTestClient,
  expectFailure,
  parseResultText,
  reportMissingService,
  type TestClient,
} from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_REDIS_URL } from './fleet-harness.js';
import { type Running, startService } from './harness.js';

if (!TEST_REDIS_URL) {
  reportMissingService(it, 'the shared-Redis deployments test', 'TEST_REDIS_URL', 'redis://127.0.0.1:6379');
}

describe.runIf(TEST_REDIS_URL)('two deployments on one Redis', () => {
  const run = randomBytes(4).toString('hex');
  let staging: Running;
  let production: Running;
  beforeAll(async () => {
    const shared = { transport: 'tcp' as const, redisUrl: TEST_REDIS_URL, callsPerMinute: 3 };
    staging = await startService({ ...shared, confirmAudience: `staging-${run}` });
    production = await startService({ ...shared, confirmAudience: `production-${run}` });
  }, 120_000);
  afterAll(async () => {
    await staging?.stop();
    await production?.stop();
  });

  const connect = (running: Running): Promise<TestClient> =>
    connectTestClient(running.service.createServer(), {
      authInfo: {
        token: `shared-${run}-token-0123456789`,
        clientId: 'support-desk',
        scopes: ['orders:read', 'orders:write', 'docs:read'],
        extra: { sub: `agent-${run}` },
      },
    });

  it('share no cached answer and no rate budget', async () => {
    const onStaging = await connect(staging);
    const onProduction = await connect(production);
    try {
      const args = { query: `refund days ${run}` };
      const first = parseResultText(await onStaging.callTool('search_docs', args)) as Record<string, unknown>;
      expect(first.ok).toBe(true);
      // The same caller and call on production: its own answer, not staging's cached one.
      const there = parseResultText(await onProduction.callTool('search_docs', args)) as Record<
        string,
        unknown
      >;
      expect(there.ok).toBe(true);
      expect(String(there.note)).not.toContain('Repeated call');
      // Staging's budget of 3 calls a minute is spent (the calls differ, so no repeat answers them) ...
      await onStaging.callTool('search_docs', { query: `shipping ${run}` });
      await onStaging.callTool('search_docs', { query: `returns ${run}` });
      const over = (await onStaging.callTool('search_docs', { query: `invoice ${run}` })) as CallToolResult;
      expect(expectFailure(over).error).toBe('rate_limited');
      // ... production's is not: it has had one call.
      const fresh = parseResultText(
        await onProduction.callTool('search_docs', { query: `shipping ${run}` }),
      ) as Record<string, unknown>;
      expect(fresh.ok).toBe(true);
    } finally {
      await onStaging.close();
      await onProduction.close();
    }
  });
});
