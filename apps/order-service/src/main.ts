#!/usr/bin/env node
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createStderrLogger } from '@toolgate/core';
import { createTokenVerifier } from './auth.js';
import { readConfig, UsageError } from './config.js';
import { startHttpServer } from './http.js';
import { createOrderService, SERVER_INFO } from './service.js';
import { startTracing } from './tracing.js';

async function main(): Promise<void> {
  const config = readConfig(process.argv.slice(2), process.env);
  // stdout belongs to the stdio transport: every log line goes to stderr.
  const logger = createStderrLogger({ level: config.logLevel, base: { service: SERVER_INFO.name } });
  const stopTracing = config.otlpEndpoint ? startTracing(config.otlpEndpoint, SERVER_INFO.name) : undefined;
  const service = await createOrderService(
    {
      databaseUrl: config.databaseUrl,
      carrierUrl: config.carrierUrl,
      docsRoot: config.docsRoot,
      auditFile: config.auditFile,
      customerScoped: config.customerScoped,
      transport: config.http ? 'tcp' : 'pipe',
      breakerResetMs: config.breakerResetMs,
    },
    logger,
  );
  let stopping = false;
  const shutdown = async (reason: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    logger.info({ reason }, 'shutting down');
    await http?.close();
    await service.close();
    await stopTracing?.();
  };
  let http: Awaited<ReturnType<typeof startHttpServer>> | undefined;
  if (config.http) {
    http = await startHttpServer({
      host: config.host,
      port: config.port,
      verifier: config.tokens ? createTokenVerifier(config.tokens) : undefined,
      allowedHosts: config.allowedHosts,
      allowedOrigins: config.allowedOrigins,
      createServer: () => service.createServer(),
      logger,
    });
    logger.info({ url: http.url, auth: config.tokens ? 'bearer' : 'none', db: service.db.kind }, 'listening');
  } else {
    const server = service.createServer();
    const transport = new StdioServerTransport();
    // The client closing our stdin is the end of the session: flush audit, then exit.
    process.stdin.once('end', () => void shutdown('stdin closed').then(() => process.exit(0)));
    await server.connect(transport);
    logger.info({ transport: 'stdio', db: service.db.kind }, 'ready');
  }
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => void shutdown(signal).then(() => process.exit(0)));
  }
}

main().catch((error: unknown) => {
  if (error instanceof UsageError) {
    process.stderr.write(`${error.message}\n`);
    process.exit(2);
  }
  process.stderr.write(
    `order-service failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
