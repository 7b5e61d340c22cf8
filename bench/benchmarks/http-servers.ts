// The server side of the HTTP benchmark, in its own process so that autocannon does not share its
// event loop: the order-service (stateless Streamable HTTP, bearer auth, full middleware stack) and the
// bare SDK server, on the same database. Arguments: the database URL, the bearer token. Prints one JSON line with both URLs, then serves until killed.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSilentLogger } from '@toolgate/core';
import { createTokenVerifier } from '@toolgate/order-service/auth';
import { startHttpServer } from '@toolgate/order-service/http';
import { createOrderService } from '@toolgate/order-service/service';
import pg from 'pg';
import { startBareHttpServer } from '../src/bare-server.js';

const databaseUrl = process.argv[2]!;
const token = process.argv[3]!;
const logger = createSilentLogger();
const dir = await mkdtemp(join(tmpdir(), 'toolgate-bench-http-'));
const service = await createOrderService(
  {
    databaseUrl,
    carrierUrl: 'http://127.0.0.1:9',
    auditFile: join(dir, 'audit.jsonl'),
    transport: 'tcp',
    callsPerMinute: 1_000_000,
  },
  logger,
);
const toolgate = await startHttpServer({
  port: 0,
  verifier: createTokenVerifier({ tokens: [{ token, clientId: 'bench', scopes: ['orders:read'] }] }),
  createServer: () => service.createServer(),
  logger,
});
// The same pool size as the order-service's (openDatabase: max 10).
const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 });
const bare = await startBareHttpServer(pool);
process.stdout.write(`${JSON.stringify({ toolgate: toolgate.url, bare: bare.url })}\n`);
process.once('SIGTERM', () => {
  void Promise.all([toolgate.close(), bare.close()])
    .then(() => Promise.all([service.close(), pool.end()]))
    .then(() => rm(dir, { recursive: true, force: true }))
    .then(() => process.exit(0));
});
