import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { type AuditMiddleware, createAudit, createFileSink, createStderrSink } from '@toolgate/audit';
import { type CircuitBreakers, createCircuitBreakers } from '@toolgate/circuit-breaker';
import { type Logger, registerTools, type ToolDefinition, type ToolMiddleware } from '@toolgate/core';
import { otel } from '@toolgate/otel';
import { redactErrors } from '@toolgate/redact-errors';
import { repeatGuard } from '@toolgate/repeat-guard';
import { pgliteQueryable, pgQueryable, type Queryable } from '@toolgate/sql';
import { createUrlPolicy } from '@toolgate/url-allowlist';
import { ORDER_FIELDS, ORDER_STATUSES, type OrderDatabase, openDatabase } from './db.js';
import { getOrderStatusTool, searchOrdersTool } from './tools/orders.js';
import { renderInvoiceTool } from './tools/render-invoice.js';
import { searchDocsTool } from './tools/search-docs.js';
import { trackShipmentTool } from './tools/track-shipment.js';

const APP_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export const SERVER_INFO = { name: 'order-service', title: 'Order assistant (read-only)', version: '0.1.0' };

export const INSTRUCTIONS = [
  'Read-only order assistant for a support team.',
  'You can: search orders (search_orders), look up one order by its 16-digit id (get_order_status),',
  'track a shipped order (track_shipment), search the refund, shipping and returns policies (search_docs)',
  'and render an invoice (render_invoice).',
  'You cannot issue refunds, cancel orders, change shipping addresses or change prices: no tool does that.',
  'When the user asks for one of those, explain the relevant policy (search_docs) and tell them the support team handles it.',
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
}

/** Everything built once per process: the database, the tools and the shared middleware. */
export interface OrderService {
  readonly db: OrderDatabase;
  readonly tools: readonly ToolDefinition[];
  readonly middleware: readonly ToolMiddleware[];
  readonly audit: AuditMiddleware;
  readonly breakers: CircuitBreakers;
  /** A new McpServer with every tool, the resource and the instructions (one per connection or request). */
  createServer(): McpServer;
  /** Flushes audit, stops breakers, closes the database. */
  close(): Promise<void>;
}

export async function createOrderService(config: OrderServiceConfig, logger: Logger): Promise<OrderService> {
  const db = await openDatabase({ url: config.databaseUrl });
  const queryable: Queryable = db.pglite ? pgliteQueryable(db.pglite) : pgQueryable(db.pool!);
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
    logger,
  });
  const customerScoped = config.customerScoped ?? false;
  const tools: ToolDefinition[] = [
    searchOrdersTool({ db: queryable, customerScoped }),
    getOrderStatusTool({ db: queryable, customerScoped }),
    trackShipmentTool({ carrierUrl: config.carrierUrl, policy: carrierPolicy }),
    searchDocsTool({ root: config.docsRoot ?? resolve(APP_DIR, 'docs'), logger }),
    renderInvoiceTool({
      db: queryable,
      invoiceCli: resolve(APP_DIR, 'dist', 'invoice-cli.js'),
      cwd: APP_DIR,
      customerScoped,
    }),
  ];
  const breakers = createCircuitBreakers({
    logger,
    tools: {
      search_orders: { dependency: 'orders-db' },
      get_order_status: { dependency: 'orders-db' },
      render_invoice: { dependency: 'orders-db' },
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
  const audit = createAudit({
    sink: config.auditFile ? createFileSink(config.auditFile) : createStderrSink(),
    logger,
  });
  // The order DESIGN.md gives: tracing times everything; audit records what the model saw;
  // redaction turns raw throws into safe results; repeats stop before the breaker and the dependency.
  const middleware: ToolMiddleware[] = [
    otel({ transport: config.transport, logger }),
    audit,
    redactErrors({ logger }),
    repeatGuard(),
    breakers.middleware,
  ];
  const schemaResource = JSON.stringify({ fields: ORDER_FIELDS, statuses: ORDER_STATUSES }, null, 2);
  return {
    db,
    tools,
    middleware,
    audit,
    breakers,
    createServer() {
      const server = new McpServer(SERVER_INFO, { instructions: INSTRUCTIONS });
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
      breakers.shutdown();
      await db.close();
    },
  };
}
