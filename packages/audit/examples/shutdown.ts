// The README's shutdown example, typechecked with the package (see usage.ts).
import type { Server } from 'node:http';
import type pg from 'pg';
import type { AuditMiddleware } from '../src/index.js';

declare const httpServer: Server;
declare const audit: AuditMiddleware;
declare const breakers: { close(): void };
declare const pool: pg.Pool;
declare const tracing: { shutdown(): Promise<void> };

process.once('SIGTERM', async () => {
  httpServer.close(); // 1. stop accepting
  await audit.drain(); // 2. let the calls in flight finish (or your app's own drain)
  await audit.close(); // 3. flush the audit trail (bounded by closeTimeoutMs), close its sink
  breakers.close(); // 4. then breakers, stores, the database pool, tracing
  await pool.end();
  await tracing.shutdown();
});
