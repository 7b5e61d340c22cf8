import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSilentLogger, type Logger } from '@toolgate/core';
import { type FakeCarrier, startFakeCarrier } from '../src/fake-carrier.js';
import { createOrderService, type OrderService, type OrderServiceConfig } from '../src/service.js';

export interface Running {
  service: OrderService;
  carrier: FakeCarrier;
  auditFile: string;
  stop(): Promise<void>;
}

/** The order-service in process on embedded PGlite, with a fake carrier and an audit file. */
export async function startService(
  overrides: Partial<OrderServiceConfig> = {},
  logger: Logger = createSilentLogger(),
): Promise<Running> {
  const carrier = await startFakeCarrier();
  const dir = mkdtempSync(join(tmpdir(), 'order-service-test-'));
  const auditFile = join(dir, 'audit.jsonl');
  const service = await createOrderService(
    {
      databaseUrl: undefined,
      carrierUrl: carrier.url,
      auditFile,
      transport: 'pipe',
      breakerResetMs: 300,
      carrierTimeoutMs: 800,
      ...overrides,
    },
    logger,
  );
  return {
    service,
    carrier,
    auditFile,
    async stop() {
      await service.close();
      await carrier.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
