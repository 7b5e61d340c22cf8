import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import {
  type AuditMiddleware,
  type AuditSink,
  createAudit,
  createFileSink,
  createPostgresSink,
  createStderrSink,
} from '@toolgate/audit';
import { createAuthz } from '@toolgate/authz';
import { type CircuitBreaker, createCircuitBreaker } from '@toolgate/circuit-breaker';
import { createConfirm } from '@toolgate/confirm';
import {
  createMemoryStore,
  fail,
  type KeyValueStore,
  type Logger,
  registerTools,
  type ToolDefinition,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import { createIdempotency } from '@toolgate/idempotency';
import { createOtel } from '@toolgate/otel';
import { createRateLimit } from '@toolgate/rate-limit';
import { createRedactErrors } from '@toolgate/redact-errors';
import { createRedisClient, createRedisStore, redisReady } from '@toolgate/redis-store';
import { createRedisRepeatStore, createRepeatGuard } from '@toolgate/repeat-guard';
import { pgliteQueryable, pgQueryable, type Queryable } from '@toolgate/sql';
import { createUrlPolicy } from '@toolgate/url-allowlist';
import pg from 'pg';
import { ORDER_FIELDS, ORDER_STATUSES, type OrderDatabase, openDatabase } from './db.js';
import { createServerSecrets, serverSecretValues } from './server-secrets.js';
import { getOrderStatusTool, searchOrdersTool } from './tools/orders.js';
import { renderInvoiceTool } from './tools/render-invoice.js';
import { searchDocsTool } from './tools/search-docs.js';
import { trackShipmentTool } from './tools/track-shipment.js';
import { cancelOrderTool, requestRefundTool } from './tools/write-orders.js';
import { writeTransactions } from './write-transaction.js';

/** How long one audit statement may go unanswered before it is retried on a new connection. */
export const AUDIT_STATEMENT_TIMEOUT_MS = 5_000;

const APP_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * How long a write call is answered from what it did instead of run again: idempotency's window, and
 * the write tools' own look-up of a change the same call made (its COMMIT acknowledgement lost, or the
 * process killed before idempotency stored the result).
 */
const WRITE_REPLAY_WINDOW_MS = 600_000;

export const SERVER_INFO = { name: 'order-service', title: 'Order assistant', version: '0.1.0' };

export const INSTRUCTIONS = [
  'Order assistant for a support team.',
  'You can: search orders (search_orders), look up one order by its 16-digit id (get_order_status),',
  'track a shipped order (track_shipment), search the refund, shipping and returns policies (search_docs)',
  'and render an invoice (render_invoice).',
  'Two tools change things, and only for users allowed to: request_refund (part or all of a paid order) and',
  'cancel_order (an order that has not shipped). Each asks the user to confirm the exact change first;',
  'never confirm on their behalf, and never retry a refund or cancellation the user declined.',
  'You cannot change shipping addresses or prices: no tool does that. When the user asks for one of those,',
  'explain the relevant policy (search_docs) and tell them the support team handles it.',
  'Every error carries a hint: follow it. Do not repeat a call with the same arguments; change them or answer the user.',
].join(' ');

export interface OrderServiceConfig {
  /** PostgreSQL URL; embedded PGlite with the seed when undefined. */
  databaseUrl: string | undefined;
  /** Base URL of the carrier tracking API; its host is the only one track_shipment may reach. */
  carrierUrl: string;
  /** Folder of the policy documents. @default <app>/docs */
  docsRoot?: string;
  /** Append-only audit file; audit goes to stderr when undefined. */
  auditFile: string | undefined;
  /** Bind the customer id from the token's claims in the order tools (HTTP with customer tokens). @default false */
  customerScoped?: boolean;
  /** `pipe` for stdio, `tcp` for HTTP (recorded on spans). */
  transport: 'pipe' | 'tcp';
  /** Milliseconds an open breaker waits before letting one probe through. @default 10000 */
  breakerResetMs?: number;
  /** Carrier call time limit. @default 3000 */
  carrierTimeoutMs?: number;
  /** Redis for shared policy state (repeat cache, rate limits, idempotency, confirmations); memory when undefined. */
  redisUrl?: string | undefined;
  /** PostgreSQL for the audit table (one chain per replica); the audit file or stderr when undefined. */
  auditDatabaseUrl?: string | undefined;
  /** This replica's audit chain id. @default derived from host name, pid and a random suffix */
  replicaId?: string | undefined;
  /** Release an answer only after its audit record is stored. @default false */
  durableAudit?: boolean;
  /** Key the audit chain with HMAC-SHA256 (at least 32 bytes). @default none: plain SHA-256 */
  auditKey?: Uint8Array | undefined;
  /** HMAC key of two-step confirmations; the same on every replica. @default random per process */
  confirmSecret?: string | undefined;
  /**
   * This deployment's name, covered by every confirmation and in every confirmation key: another
   * deployment sharing the secret or Redis (staging beside production) accepts none of them.
   * @default 'order-service'
   */
  confirmAudience?: string | undefined;
  /** request_refund and cancel_order calls each caller may make per tool and minute. @default 10 */
  writesPerMinute?: number | undefined;
  /** Calls each caller may make per minute, all tools together. @default 120 */
  callsPerMinute?: number | undefined;
  /** Let every caller see and call every tool (HTTP without auth on loopback: no scopes to check). @default false */
  openAccess?: boolean;
  /**
   * Further secret values no answer may carry, besides those this config holds (main passes the static
   * bearer tokens and the JWKS URL's secret parts). @default []
   */
  extraSecrets?: readonly string[];
}

/** Everything built once per process: the database, the tools and the shared middleware. */
export interface OrderService {
  readonly db: OrderDatabase;
  readonly tools: readonly ToolDefinition[];
  readonly middleware: readonly ToolMiddleware[];
  readonly audit: AuditMiddleware;
  readonly breakers: CircuitBreaker;
  /** Whether policy state is shared through Redis (a fleet) or kept in this process. */
  readonly stateStore: 'redis' | 'memory';
  /** A new McpServer with every tool, the resource and the instructions (one per connection or request). */
  createServer(): McpServer;
  /** Calls being answered right now (every transport). */
  readonly inFlight: number;
  /**
   * Refuses new calls (`unavailable`, retry elsewhere) and waits up to `graceMs` for the calls in flight.
   * @returns how many were still running when the grace period ran out
   */
  drain(graceMs: number): Promise<{ abandoned: number }>;
  /** Flushes audit, then closes breakers, policy stores, Redis and the databases, in that order. */
  close(): Promise<void>;
}

export async function createOrderService(config: OrderServiceConfig, logger: Logger): Promise<OrderService> {
  const db = await openDatabase({ url: config.databaseUrl });
  // On PostgreSQL the read tools get a pool of their own whose sessions are read-only with the tools'
  // 2 s statement timeout: one round trip per read, its statement prepared once per connection.
  // Writes use the other pool (writeTransactions).
  const queryable: Queryable = db.pglite
    ? pgliteQueryable(db.pglite)
    : pgQueryable(db.readPool!, { readOnlySession: { timeoutMs: 2000 }, preparedStatements: true });
  const carrier = new URL(config.carrierUrl);
  const loopbackCarrier = ['127.0.0.1', '[::1]', 'localhost'].includes(carrier.hostname);
  const carrierPolicy = createUrlPolicy({
    allow: [carrier.hostname],
    schemes: [carrier.protocol === 'http:' ? 'http' : 'https'],
    ...(carrier.port ? { ports: [Number(carrier.port)] } : {}),
    // Only the bundled fake carrier lives on loopback; nothing else private is ever reachable.
    ...(loopbackCarrier ? { allowPrivate: [carrier.hostname === '[::1]' ? '::1' : '127.0.0.1'] } : {}),
    timeoutMs: config.carrierTimeoutMs ?? 3000,
    maxBodyBytes: 64 * 1024,
    maxRedirects: 2,
    // The carrier's host and port are configuration, not something the model can use: a refused
    // tracking_url says only that it is not the carrier (red team Y: the hint named the carrier's port).
    hintAllowedHosts: false,
    logger,
  });
  const customerScoped = config.customerScoped ?? false;
  const writes = writeTransactions(db);
  const confirmSecret = config.confirmSecret ?? randomBytes(32).toString('base64url');
  // The service's own secrets, gathered once: a tool relaying a third party's words (the carrier
  // echoing the URL it was asked for, key and all) or a document's never passes one on, and neither
  // does an error (redact-errors' patterns below).
  const secrets = createServerSecrets(
    serverSecretValues({
      urls: [config.carrierUrl, config.databaseUrl, config.auditDatabaseUrl, config.redisUrl],
      values: [confirmSecret, ...(config.extraSecrets ?? [])],
      keys: [config.auditKey],
    }),
  );
  const tools: ToolDefinition[] = [
    searchOrdersTool({ db: queryable, customerScoped }),
    getOrderStatusTool({ db: queryable, customerScoped }),
    trackShipmentTool({
      carrierUrl: config.carrierUrl,
      policy: carrierPolicy,
      db: queryable,
      customerScoped,
      secrets,
    }),
    searchDocsTool({ root: config.docsRoot ?? resolve(APP_DIR, 'docs'), logger, customerScoped, secrets }),
    renderInvoiceTool({
      db: queryable,
      invoiceCli: resolve(APP_DIR, 'dist', 'invoice-cli.js'),
      cwd: APP_DIR,
      customerScoped,
    }),
    requestRefundTool({ db: writes, customerScoped, replayWindowMs: WRITE_REPLAY_WINDOW_MS }),
    cancelOrderTool({ db: writes, customerScoped, replayWindowMs: WRITE_REPLAY_WINDOW_MS }),
  ];
  const breakers = createCircuitBreaker({
    logger,
    tools: {
      search_orders: { dependency: 'orders-db' },
      get_order_status: { dependency: 'orders-db' },
      render_invoice: { dependency: 'orders-db' },
      request_refund: { dependency: 'orders-db' },
      cancel_order: { dependency: 'orders-db' },
      track_shipment: { dependency: 'carrier-api' },
      search_docs: false,
    },
    dependencies: {
      // Opens after 5 failures in a row (or more than half of the calls in the window, whichever
      // trips first), so a dead database is cut off within a handful of calls. A call gets 5 s; the
      // pool's connect timeout (db.ts) is shorter, so a silent partition fails each call within its
      // deadline and counts. Up to 256 calls may wait for the pool's 10 connections (pg queues them);
      // beyond that calls are shed with rate_limited (the server is at capacity), never for an outage.
      'orders-db': {
        timeout: 5000,
        consecutiveFailures: 5,
        volumeThreshold: 5,
        capacity: 256,
        resetTimeout: config.breakerResetMs ?? 10_000,
      },
      'carrier-api': {
        timeout: (config.carrierTimeoutMs ?? 3000) + 500,
        volumeThreshold: 3,
        resetTimeout: config.breakerResetMs ?? 10_000,
      },
    },
  });
  // One Redis client for every piece of shared policy state (one documented configuration; a connection
  // that goes silent without a reset is closed and made again after 2 s, see DEPLOYMENT.md).
  const redis = config.redisUrl ? createRedisClient(config.redisUrl, { logger }) : undefined;
  if (redis) await redisReady(redis);
  // Every key of the shared state names the deployment (TOOLGATE_CONFIRM_AUDIENCE): staging and
  // production sharing one Redis share no cached answer, idempotent result or rate budget.
  const deployment = config.confirmAudience ?? 'order-service';
  const redisPrefix = `orders:${deployment}:`;
  const stateStore: KeyValueStore = redis
    ? createRedisStore(redis, { prefix: redisPrefix })
    : createMemoryStore();
  const auditPool = config.auditDatabaseUrl
    ? new pg.Pool({ connectionString: config.auditDatabaseUrl, max: 2, connectionTimeoutMillis: 2000 })
    : undefined;
  auditPool?.on('error', () => {});
  const sink: AuditSink = auditPool
    ? // A statement the audit database leaves unanswered (a silent connection) fails after 5 s and is
      // retried on a new connection: well within audit's 10 s close, where the default 30 s would hold
      // every record (and with durable audit every call) for 30 s, and lose them at a shutdown meanwhile.
      createPostgresSink({ client: auditPool, timeoutMs: AUDIT_STATEMENT_TIMEOUT_MS })
    : config.auditFile
      ? createFileSink(config.auditFile)
      : createStderrSink();
  const audit = createAudit({
    sink,
    logger,
    // The audit file is sealed, hashed and written on a thread of its own, off the calls' path.
    ...(!auditPool && config.auditFile ? { thread: true } : {}),
    ...(config.replicaId ? { chainId: config.replicaId } : {}),
    ...(config.durableAudit ? { durable: true } : {}),
    ...(config.auditKey ? { key: config.auditKey } : {}),
  });
  const redact = createRedactErrors({ logger, patterns: secrets.pattern ? [secrets.pattern] : [] });
  // Who may see and call what: reading orders needs orders:read, the policies docs:read, and the two
  // write tools orders:write (hidden from every other token). stdio is the local user: allowed.
  const authz = config.openAccess
    ? createAuthz({ require: {} })
    : createAuthz({
        require: { scopes: ['orders:read'] },
        tools: {
          search_docs: { require: { anyOf: [['docs:read'], ['orders:read']] } },
          request_refund: { require: { scopes: ['orders:write'] } },
          cancel_order: { require: { scopes: ['orders:write'] } },
        },
      });
  const perCaller = {
    name: 'per-caller',
    per: 'caller',
    points: config.callsPerMinute ?? 120,
    duration: '1m',
  } as const;
  const writesPerCaller = {
    name: 'writes-per-caller',
    per: 'caller-tool',
    points: config.writesPerMinute ?? 10,
    duration: '1m',
  } as const;
  const rateLimit = createRateLimit({
    limits: [perCaller],
    tools: {
      request_refund: { limits: [perCaller, writesPerCaller] },
      cancel_order: { limits: [perCaller, writesPerCaller] },
    },
    ...(redis ? { store: { redis }, keyPrefix: `${redisPrefix}rl` } : {}),
  });
  const repeat = createRepeatGuard({
    ...(redis ? { store: createRedisRepeatStore(redis, { prefix: `${redisPrefix}repeat:` }) } : {}),
    // A write must never be answered from the read cache: idempotency and confirmation own repeats there.
    tools: { request_refund: false, cancel_order: false },
  });
  const idempotency = createIdempotency({
    store: stateStore,
    windowMs: WRITE_REPLAY_WINDOW_MS,
    // A retry of a change still running (or timed out, its claim held until it expires) hears so within
    // 10 s, instead of waiting until the claim expires or its client gives up.
    maxWaitMs: 10_000,
    tools: { request_refund: {}, cancel_order: {} },
  });
  // The reason is the model's text: quoted (as JSON, its own quotes escaped), so it cannot read as more
  // of the sentence the person approves ("...). The amount above is in cents: Refund 0.84 of ...").
  const reasonOf = (args: Readonly<Record<string, unknown>>): string => JSON.stringify(String(args.reason));
  // The amount is shown with the order's currency, read from its row just before the person is asked
  // (describe() sees only the arguments): `refundCurrency` hands it over for this call alone.
  const refundCurrency = new AsyncLocalStorage<string | undefined>();
  const currencyOfRefund = refundCurrencyLookup(queryable, customerScoped, refundCurrency);
  const confirm = createConfirm({
    secret: confirmSecret,
    audience: deployment,
    store: stateStore,
    tools: {
      request_refund: {
        describe: (args: Readonly<Record<string, unknown>>) =>
          `Refund ${formatMoney(args.amount_cents, refundCurrency.getStore())} of order ${String(args.order_id)} (reason: ${reasonOf(args)}).`,
      },
      cancel_order: {
        describe: (args: Readonly<Record<string, unknown>>) =>
          `Cancel order ${String(args.order_id)} (reason: ${reasonOf(args)}).`,
      },
    },
  });
  // The order DESIGN.md gives: tracing times everything; audit records what the model saw; redaction
  // turns raw throws into safe results; authz first among the policies so a hidden tool costs nothing
  // else; limits before work; repeats stop before the dependency; idempotency outside confirmation so
  // a retried, confirmed change replays without asking again; the breaker guards the dependency itself.
  const gate = createDrainGate();
  const middleware: ToolMiddleware[] = [
    // Counts every call in flight, audit's recording of it included, so shutdown flushes audit only
    // after the last record is in; the refusal while draining sits after audit, which records it.
    gate.count,
    // Over HTTP the clients are tenants, not ours: their traceparent is a link, never the parent (it
    // would pick the trace and, under a ParentBased sampler, whether the call is sampled). Over stdio
    // the client is the host that started this process.
    createOtel({
      transport: config.transport,
      clientContext: config.transport === 'tcp' ? 'link' : 'parent',
      logger,
    }),
    audit,
    gate.refuse,
    redact,
    authz,
    rateLimit,
    repeat,
    idempotency,
    currencyOfRefund,
    confirm,
    breakers,
    // Innermost: what runs inside the chain, until it settles (see createDrainGate).
    gate.work,
  ];
  // One JSON Schema validator (Ajv) for every server this service makes: over stateless HTTP that is a
  // server per request, and building Ajv is about a third of a trivial request's CPU (bench/RESULTS.md).
  const schemaValidator = new AjvJsonSchemaValidator();
  const schemaResource = JSON.stringify({ fields: ORDER_FIELDS, statuses: ORDER_STATUSES }, null, 2);
  return {
    db,
    tools,
    middleware,
    audit,
    breakers,
    stateStore: redis ? 'redis' : 'memory',
    get inFlight() {
      return gate.inFlight();
    },
    drain: (graceMs) => gate.drain(graceMs),
    createServer() {
      const server = new McpServer(SERVER_INFO, {
        instructions: INSTRUCTIONS,
        jsonSchemaValidator: schemaValidator,
      });
      registerTools(server, tools, { middleware, logger });
      server.registerResource(
        'orders-schema',
        'orders://schema',
        {
          title: 'Order fields and statuses',
          description: 'The fields an order has and the statuses it can be in.',
          mimeType: 'application/json',
        },
        (uri) => ({ contents: [{ uri: uri.href, mimeType: 'application/json', text: schemaResource }] }),
      );
      return server;
    },
    async close() {
      await audit.close();
      breakers.close();
      repeat.close();
      redact.close();
      await rateLimit.close();
      await idempotency.close();
      await confirm.close();
      await redis?.quit().catch(() => undefined);
      await auditPool?.end();
      await db.close();
    },
  };
}

/**
 * Counts the calls in flight (`count`, first in the chain) and, once draining, refuses new ones
 * (`refuse`, after audit, so a refused call has its record like every other): the app's shutdown waits
 * for what is running (over stdio too, where no HTTP server counts requests) before it flushes audit
 * and closes. `work`, last in the chain, counts what runs inside it (the tool's own middleware and
 * handler) until it settles, also after a step outside answered without it (a breaker's deadline, a
 * cancel): what it comes to then is a late outcome audit records as a second record, so the drain waits
 * for it too.
 */
function createDrainGate(): {
  count: ToolMiddleware;
  refuse: ToolMiddleware;
  work: ToolMiddleware;
  inFlight(): number;
  drain(graceMs: number): Promise<{ abandoned: number }>;
} {
  let running = 0;
  let working = 0;
  let draining = false;
  const idle = new Set<() => void>();
  const settled = (): void => {
    if (running === 0 && working === 0) for (const wake of idle) wake();
  };
  const workDone = (): void => {
    working -= 1;
    settled();
  };
  const refuse: ToolMiddleware = (_ctx, next) =>
    draining
      ? Promise.resolve(
          fail('unavailable', 'The server is shutting down.', {
            hint: 'Call again in a moment; another server (or this one after its restart) will answer.',
            retryAfterMs: 1000,
          }),
        )
      : next();
  const count: ToolMiddleware = async (_ctx, next) => {
    running += 1;
    try {
      return await next();
    } finally {
      running -= 1;
      settled();
    }
  };
  const work: ToolMiddleware = (_ctx, next) => {
    working += 1;
    let pending: Promise<ToolResult>;
    try {
      pending = next();
    } catch (error) {
      workDone();
      throw error;
    }
    pending.then(workDone, workDone);
    return pending;
  };
  return {
    count,
    refuse,
    work,
    inFlight: () => Math.max(running, working),
    async drain(graceMs) {
      draining = true;
      if (running > 0 || working > 0) {
        await new Promise<void>((done) => {
          const timer = setTimeout(finish, graceMs);
          function finish(): void {
            clearTimeout(timer);
            idle.delete(finish);
            done();
          }
          idle.add(finish);
        });
      }
      return { abandoned: Math.max(running, working) };
    },
  };
}

/** An amount in cents as the invoice shows money: `84.07 USD` (the bare amount when no currency is known). */
function formatMoney(cents: unknown, currency: string | undefined): string {
  const amount = typeof cents === 'number' ? `${(cents / 100).toFixed(2)}` : String(cents);
  return currency === undefined ? amount : `${amount} ${currency}`;
}

// The order's currency, of the caller's own order when customer-scoped: another customer's order (or
// none) has no row here, and its refund sentence shows the bare amount, nothing of that order.
const ORDER_CURRENCY = 'SELECT currency FROM orders WHERE order_id = $1';
const ORDER_CURRENCY_SCOPED = `${ORDER_CURRENCY} AND customer_id = $2`;

/**
 * Before confirmation asks about a refund (a call that carries no confirmation yet), reads the order's
 * currency and runs the rest of the chain with it in `store`, where the refund's describe() finds it.
 * A database that cannot answer refuses the call (nothing was asked, nothing changed) rather than ask
 * the person to approve an amount without its currency.
 */
function refundCurrencyLookup(
  db: Queryable,
  customerScoped: boolean,
  store: AsyncLocalStorage<string | undefined>,
): ToolMiddleware {
  return async (ctx, next) => {
    if (ctx.toolName !== 'request_refund' || ctx.args.confirmation !== undefined) return next();
    let currency: unknown;
    try {
      const [text, values] = customerScoped
        ? [ORDER_CURRENCY_SCOPED, [ctx.args.order_id, ctx.bindings.customerId]]
        : [ORDER_CURRENCY, [ctx.args.order_id]];
      const options = { timeoutMs: 2000, signal: ctx.signal };
      // One statement: on PostgreSQL one round trip in the read pool's read-only session, no transaction.
      const { rows } = db.readOnlyQuery
        ? await db.readOnlyQuery(options, text, values)
        : await db.readOnly(options, (runner) => runner.query(text, values));
      currency = rows[0]?.currency;
    } catch (error) {
      if (ctx.signal.aborted) throw error;
      return fail(
        'unavailable',
        'The order could not be read to ask for confirmation; nothing was changed.',
        {
          hint: 'Call again in a moment.',
          retryAfterMs: 2000,
        },
      );
    }
    return store.run(typeof currency === 'string' ? currency : undefined, next);
  };
}
