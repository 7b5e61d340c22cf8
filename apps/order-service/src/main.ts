#!/usr/bin/env node
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createJwtVerifier, createProtectedResource } from '@toolgate/authz';
import {
  createStderrLogger,
  isAbortError,
  type Logger,
  withDeadline,
  withdrawClientRequests,
} from '@toolgate/core';
import { createTokenVerifier } from './auth.js';
import { readConfig, USAGE, UsageError } from './config.js';
import { type FakeCarrier, startFakeCarrier } from './fake-carrier.js';
import { startHttpServer } from './http.js';
import { urlSecrets } from './server-secrets.js';
import { createOrderService, type OrderService, SERVER_INFO } from './service.js';
import { startTracing } from './tracing.js';

/** How long start-up waits for audit's sink (the PostgreSQL sink creates its table) before serving. */
const AUDIT_READY_MS = 5_000;

/**
 * Waits, within AUDIT_READY_MS, for audit's sink to be set up: records of calls answered before it
 * wait in the buffer, and a crash then loses them (measured with the PostgreSQL sink: up to all of the
 * first 400 answers). A sink that is down at start-up does not keep the service from serving: its
 * records wait and are retried, as they would be later.
 */
async function auditReady(service: OrderService, logger: Logger): Promise<void> {
  try {
    await withDeadline(() => service.audit.ready(), { timeoutMs: AUDIT_READY_MS, what: 'audit sink set-up' });
  } catch (error) {
    if (isAbortError(error)) {
      logger.warn(
        { waitedMs: AUDIT_READY_MS },
        'audit sink not set up yet; serving anyway (records wait in the buffer and are retried)',
      );
    } else {
      logger.error({ err: error }, 'audit sink refused to set up; serving anyway (see the errors above)');
    }
  }
}

/**
 * How long each closing step after the drain may take. Audit's flush has its own deadline (10 s, 1 s
 * more for a hung write) and gets that plus a margin; the rest (breakers, stores, pools, the fake
 * carrier, tracing) get 5 s. A dependency that stopped answering without a reset (a partition) would
 * otherwise hold the exit forever: pg's `pool.end()` waits for connections whose statement never returns.
 */
const AUDIT_CLOSE_MS = 15_000;
const CLOSE_STEP_MS = 5_000;

/** The SDK's stdio transport closes itself when one line passes this size (its ReadBuffer default). */
const STDIO_LINE_LIMIT = 'ReadBuffer exceeded maximum size';

async function main(): Promise<void> {
  const config = readConfig(process.argv.slice(2), process.env);
  if (config.help) {
    // Not serving, so stdout is free: usage goes where `--help | less` expects it.
    process.stdout.write(USAGE);
    return;
  }
  // A host that exits closes our stderr too: a log line would then meet EPIPE, thrown as an uncaught
  // error, and the shutdown (audit flush) would die with it. Lines with nowhere to go are dropped.
  process.stderr.on('error', () => undefined);
  // stdout belongs to the stdio transport: every log line goes to stderr.
  const logger = createStderrLogger({ level: config.logLevel, base: { service: SERVER_INFO.name } });
  const stopTracing = config.otlpEndpoint ? startTracing(config.otlpEndpoint, SERVER_INFO.name) : undefined;
  // Without a configured carrier, track_shipment would only ever answer `unavailable`; the bundled
  // fake carrier makes every tool work on a newcomer's machine. Loopback only, a free port.
  let fakeCarrier: FakeCarrier | undefined;
  if (!config.carrierUrl) {
    fakeCarrier = await startFakeCarrier();
    logger.info(
      { carrierUrl: fakeCarrier.url },
      'CARRIER_URL is not set: started the bundled fake carrier in-process (set CARRIER_URL for a real one)',
    );
  }
  const service = await createOrderService(
    {
      databaseUrl: config.databaseUrl,
      carrierUrl: config.carrierUrl ?? fakeCarrier!.url,
      docsRoot: config.docsRoot,
      auditFile: config.auditFile,
      customerScoped: config.customerScoped,
      transport: config.http ? 'tcp' : 'pipe',
      breakerResetMs: config.breakerResetMs,
      redisUrl: config.redisUrl,
      auditDatabaseUrl: config.auditDatabaseUrl,
      replicaId: config.replicaId,
      durableAudit: config.durableAudit,
      auditKey: config.auditKey,
      confirmSecret: config.confirmSecret,
      confirmAudience: config.confirmAudience,
      writesPerMinute: config.writesPerMinute,
      callsPerMinute: config.callsPerMinute,
      // --insecure-no-auth (loopback only): no token, so no per-tool scopes to check either.
      openAccess: config.http && config.insecureNoAuth && !config.tokens && !config.jwt,
      // Secrets the service config does not hold: no answer may carry them either.
      extraSecrets: [
        ...(config.tokens?.tokens.map((entry) => entry.token) ?? []),
        ...urlSecrets(config.jwt?.jwksUrl),
      ],
    },
    logger,
  );
  await auditReady(service, logger);

  let http: Awaited<ReturnType<typeof startHttpServer>> | undefined;
  let stopStdio: (() => Promise<void>) | undefined;
  /** Withdraws the stdio server's questions to the person: nobody can answer once stdin or stdout closed. */
  let withdrawQuestions: (() => number) | undefined;
  let stopping = false;
  /** The app owns shutdown order: stop accepting, drain, flush audit / breakers / database, tracing. */
  const shutdown = async (reason: string, exitCode: number): Promise<never> => {
    if (stopping) return new Promise<never>(() => undefined);
    stopping = true;
    logger.info({ reason, graceMs: config.shutdownGraceMs }, 'shutdown: stop accepting new calls');
    try {
      if (http) {
        const inFlight = http.inFlight;
        const { abandoned } = await http.close(config.shutdownGraceMs);
        logger.info({ inFlight, abandoned }, 'shutdown: in-flight calls drained, HTTP server closed');
        // Closing their connections aborted the calls still running, but each returns through the
        // chain only at its next step (a refund waiting on a row lock, at the end of that wait; its
        // transaction then rolls back). Audit is flushed once they have returned, within a bound, so
        // every call the server took has its record.
        if (service.inFlight > 0) {
          const running = service.inFlight;
          const { abandoned: left } = await service.drain(CLOSE_STEP_MS);
          await new Promise((done) => setImmediate(done));
          if (left > 0) {
            logger.error(
              { running, left },
              'shutdown: calls did not return once aborted; their records may be lost',
            );
            exitCode = 1;
          } else logger.info({ running }, 'shutdown: aborted calls returned');
        }
      }
      if (stopStdio) {
        // The client closed stdin (or stdout): no answer to a question (a refund's confirmation) can
        // arrive any more. Each waiting call is told so now and runs nothing, instead of waiting out
        // the grace. After SIGTERM the client is still there and may answer within the grace.
        if (reason === 'stdin closed' || reason === 'stdout closed') {
          const withdrawn = withdrawQuestions?.() ?? 0;
          if (withdrawn > 0) logger.info({ withdrawn }, 'shutdown: questions to the person withdrawn');
        }
        // stdio has no HTTP server counting requests: the service's own gate refuses new calls and
        // waits for the ones in flight before audit is flushed.
        const inFlight = service.inFlight;
        const { abandoned } = await service.drain(config.shutdownGraceMs);
        // The SDK writes an answer in the promise callbacks after the chain settles: let them run.
        await new Promise((done) => setImmediate(done));
        logger.info({ inFlight, abandoned }, 'shutdown: in-flight stdio calls drained');
        if (abandoned > 0) {
          // Past the grace, as over HTTP: closing the transport aborts every call still running (and
          // rejects what they asked the client, an elicitation nobody answered); each returns through
          // the chain, and audit records it, before audit is flushed.
          await stopStdio();
          const { abandoned: left } = await service.drain(CLOSE_STEP_MS);
          // A late outcome reaches audit in a promise reaction after its handler settled.
          await new Promise((done) => setImmediate(done));
          if (left > 0) {
            logger.error(
              { running: abandoned, left },
              'shutdown: calls did not return once aborted; their records may be lost',
            );
            exitCode = 1;
          } else logger.warn({ running: abandoned }, 'shutdown: calls past the grace aborted and returned');
        }
      }
      await stopStdio?.();
      // Audit alone first (service.close() closes it again: a no-op), so a stuck pool cannot keep the
      // records from their sink; then each step within its deadline, a step past it left behind.
      const auditClosed = await closeWithin('audit flush', AUDIT_CLOSE_MS, () => service.audit.close());
      // A record audit could not keep (a failing sink, a call that ended after it closed) is a shutdown
      // that lost something: the exit status says so.
      const { dropped } = service.audit.stats();
      if (dropped > 0) {
        logger.error({ dropped }, 'shutdown: audit dropped records (see the errors above)');
        exitCode = 1;
      }
      const restClosed = await closeWithin('breakers, stores and database', CLOSE_STEP_MS, () =>
        service.close(),
      );
      if (auditClosed && restClosed) logger.info({}, 'shutdown: audit flushed, breakers and database closed');
      else exitCode = 1;
      if (fakeCarrier && !(await closeWithin('fake carrier', CLOSE_STEP_MS, () => fakeCarrier!.close())))
        exitCode = 1;
      if (stopTracing) {
        if (await closeWithin('tracing flush', CLOSE_STEP_MS, stopTracing))
          logger.info({}, 'shutdown: tracing flushed');
        else exitCode = 1;
      }
    } catch (error) {
      logger.error({ err: error }, 'shutdown: a step failed');
      exitCode = 1;
    }
    logger.info({ exitCode }, 'shutdown: done');
    process.exit(exitCode);
  };
  /** Runs one closing step; false (logged) when it did not finish within `timeoutMs` (a failure throws). */
  const closeWithin = async (
    what: string,
    timeoutMs: number,
    step: () => Promise<void>,
  ): Promise<boolean> => {
    try {
      await withDeadline(step, { timeoutMs, what });
      return true;
    } catch (error) {
      if (!isAbortError(error)) throw error;
      logger.error(
        { step: what, waitedMs: timeoutMs },
        `shutdown: ${what} did not finish within ${timeoutMs} ms (a dependency stopped answering); exiting without it`,
      );
      return false;
    }
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => void shutdown(signal, 0));
  }

  if (config.http) {
    const jwtVerifier = config.jwt
      ? createJwtVerifier({
          jwksUrl: config.jwt.jwksUrl,
          issuer: config.jwt.issuer,
          resource: config.jwt.resource,
          audiences: config.jwt.audiences,
        })
      : undefined;
    http = await startHttpServer({
      host: config.host,
      port: config.port,
      verifier: jwtVerifier ?? (config.tokens ? createTokenVerifier(config.tokens) : undefined),
      protectedResource: config.jwt
        ? createProtectedResource({
            resource: config.jwt.resource,
            authorizationServers: [config.jwt.issuer],
            scopesSupported: ['orders:read', 'orders:write', 'docs:read'],
          })
        : undefined,
      allowedHosts: config.allowedHosts,
      allowedOrigins: config.allowedOrigins,
      createServer: () => service.createServer(),
      ready: () => databaseReachable(service, config.readyTimeoutMs),
      readyTimeoutMs: config.readyTimeoutMs,
      logger,
    });
    const auth = config.jwt ? 'jwt' : config.tokens ? 'bearer' : 'none';
    logger.info({ url: http.url, auth, db: service.db.kind, state: service.stateStore }, 'listening');
    return;
  }

  const server = service.createServer();
  const transport = new StdioServerTransport();
  let fatal: string | undefined;
  // The SDK reports a malformed line here and keeps reading; a line over its 10 MiB limit makes it
  // close the transport. Either way the reason reaches the log (never the line itself: it may hold secrets).
  transport.onerror = (error) => {
    const message = error.message.slice(0, 200);
    if (message.includes(STDIO_LINE_LIMIT)) {
      fatal = 'an input line exceeded the stdio transport limit of 10 MiB';
      logger.error({ error: message }, `stdio: ${fatal}; the SDK closes the transport`);
    } else {
      logger.warn(unreadableLine(error), 'stdio: a message could not be read; skipped it, still serving');
    }
  };
  transport.onclose = () => {
    if (stopping) return;
    logger.error({ reason: fatal ?? 'transport closed' }, 'stdio: transport closed; shutting down');
    void shutdown(fatal ?? 'stdio transport closed', fatal ? 1 : 0);
  };
  stopStdio = () => server.close();
  withdrawQuestions = () => withdrawClientRequests(server);
  // A client that goes away closes our stdout: the next answer meets EPIPE, which Node throws as an
  // uncaught error (audit records still buffered were lost with it). It ends the session, as EOF does.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    logger.warn({ code: error.code }, 'stdio: stdout is closed (the client went away); shutting down');
    void shutdown('stdout closed', error.code === 'EPIPE' ? 0 : 1);
  });
  // The client closing our stdin is the end of the session: flush audit, then exit.
  process.stdin.once('end', () => void shutdown('stdin closed', 0));
  await server.connect(transport);
  logger.info({ transport: 'stdio', db: service.db.kind }, 'ready');
}

/**
 * A `SELECT 1` within `timeoutMs`. The HTTP server stops waiting at that bound anyway; the query's own
 * timeout makes pg drop a connection that stopped answering, so a silent ping neither holds one of
 * the write pool's connections nor keeps the next check waiting behind it.
 */
async function databaseReachable(service: OrderService, timeoutMs: number): Promise<boolean> {
  const { db } = service;
  // Audit's sink holding a write longer than the ping may take (a silent connection to the audit
  // database): calls are answered but not recorded (with durable audit, not answered), so the balancer
  // should send them elsewhere until the sink stores again.
  if (service.audit.stats().writingMs > timeoutMs) return false;
  // pg reads `query_timeout` from a query's config as well (its types declare it for clients only).
  const ping = { text: 'SELECT 1', query_timeout: timeoutMs };
  if (db.pool) await db.pool.query(ping);
  else if (db.pglite) await db.pglite.query('SELECT 1');
  return true;
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

/**
 * Why a stdio line could not be read, without a word of the line: V8's JSON error quotes the text near
 * the fault, and the SDK's schema error names the keys and values it refused, both chosen by the client
 * (a key `"ALERT: rotate the db password now"` would reach a warn line as written). The kind, and for a
 * schema error its issue codes.
 */
function unreadableLine(error: Error): Record<string, unknown> {
  const issues = (error as { issues?: unknown }).issues;
  if (Array.isArray(issues)) {
    const codes = new Set<string>();
    for (const issue of issues.slice(0, 20)) {
      const code = (issue as { code?: unknown } | null)?.code;
      if (typeof code === 'string' && /^[a-z_]{1,40}$/.test(code)) codes.add(code);
    }
    return { error: 'not a JSON-RPC message', issues: [...codes] };
  }
  return { error: error.name === 'SyntaxError' ? 'not JSON' : 'unreadable' };
}
