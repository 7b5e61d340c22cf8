#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { createStderrLogger } from '@toolgate/core';
import { startSessionHttp } from './http.js';
import { createReferenceServer } from './reference-server.js';
import { createStack } from './stack.js';
import { referenceTools } from './tools.js';

const USAGE = `Usage: conformance-server --port N [--audit-file PATH]
Serves the MCP conformance suite's reference tools through the full toolgate stack at
http://127.0.0.1:N/mcp (Streamable HTTP with sessions). Audit records go to stderr unless
--audit-file is given.`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      port: { type: 'string' },
      'audit-file': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    process.stderr.write(`${USAGE}\n`);
    return;
  }
  const port = Number(values.port);
  if (values.port === undefined || !Number.isInteger(port) || port < 0 || port > 65_535) {
    process.stderr.write(`--port must be a port number\n${USAGE}\n`);
    process.exitCode = 2;
    return;
  }
  const logger = createStderrLogger();
  const stack = createStack({ auditFile: values['audit-file'], logger });
  const tools = referenceTools();
  const http = await startSessionHttp({
    port,
    logger,
    createServer: () => createReferenceServer({ tools, middleware: stack.middleware, logger }),
  });
  logger.info({ url: http.url }, 'conformance server listening');

  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    // Stop taking calls first, then flush what audit still holds and stop the breakers.
    await http.close();
    await stack.close();
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      stop(signal).then(
        () => process.exit(0),
        (error: unknown) => {
          logger.error({ err: error }, 'shutdown failed');
          process.exit(1);
        },
      );
    });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`conformance-server failed to start: ${String(error)}\n`);
  process.exit(1);
});
