import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { readAuditKeyFile } from '@toolgate/audit';
import { type TokenConfig, TokenConfigSchema } from './auth.js';

export interface CliConfig {
  http: boolean;
  host: string;
  port: number;
  databaseUrl: string | undefined;
  /** Undefined: main starts the bundled fake carrier on 127.0.0.1, so track_shipment works out of the box. */
  carrierUrl: string | undefined;
  docsRoot: string | undefined;
  auditFile: string | undefined;
  tokens: TokenConfig | undefined;
  insecureNoAuth: boolean;
  allowedHosts: string[];
  allowedOrigins: string[];
  customerScoped: boolean;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  otlpEndpoint: string | undefined;
  breakerResetMs: number | undefined;
  /** How long a shutdown waits for in-flight calls before closing what is left. */
  shutdownGraceMs: number;
  /** How long GET /ready waits for the database's `SELECT 1` before answering 503 (TOOLGATE_READY_TIMEOUT_MS). */
  readyTimeoutMs: number;
  /** `--help`: print USAGE to stdout and exit 0 (not serving, so stdout is free). */
  help: boolean;
  redisUrl: string | undefined;
  auditDatabaseUrl: string | undefined;
  replicaId: string | undefined;
  confirmSecret: string | undefined;
  /** Which server a confirmation belongs to (TOOLGATE_CONFIRM_AUDIENCE). */
  confirmAudience: string | undefined;
  durableAudit: boolean;
  /** The audit chain's HMAC key, read from TOOLGATE_AUDIT_KEY_FILE (its bytes less one trailing newline). */
  auditKey: Buffer | undefined;
  /** request_refund/cancel_order calls per caller and tool per minute (TOOLGATE_WRITES_PER_MINUTE). */
  writesPerMinute: number | undefined;
  /** Calls per caller per minute, all tools together (TOOLGATE_CALLS_PER_MINUTE). */
  callsPerMinute: number | undefined;
  /** JWT mode: verify bearer tokens against a JWKS (set together). */
  jwt: { jwksUrl: string; issuer: string; resource: string; audiences: string[] } | undefined;
}

export const USAGE = `order-service: a read-only order assistant MCP server (toolgate sample)

Usage: order-service [--http] [--port N] [--host H] [--insecure-no-auth] [--help]

Transports: stdio by default (stdout carries JSON-RPC only); --http serves Streamable HTTP (stateless) at /mcp,
plus GET /health (process alive) and GET /ready (database reachable, audit storing, not shutting down), without auth.
Shutdown: SIGTERM/SIGINT stop accepting, let in-flight calls finish, flush audit, close breakers and the
database, then exit 0 (each closing step is bounded; exit 1 when one had to be left behind). Over stdio,
the client closing stdin or stdout ends the session the same way.
Environment:
  DATABASE_URL                  PostgreSQL; embedded PGlite with seeded sample data when unset
  CARRIER_URL                   carrier tracking API base URL; unset: the bundled fake carrier is started
                                in-process on 127.0.0.1 (a free port) and the log says so
  DOCS_ROOT                     policy documents folder (default: the bundled docs/)
  AUDIT_FILE                    append-only, hash-chained audit file, written by a thread of its own
                                (default: audit to stderr)
  TOOLGATE_TOKENS_FILE          JSON {"tokens":[{"token","clientId","scopes":["orders:read"],"claims":{}}]}
  TOOLGATE_TOKENS               the same JSON inline
  TOOLGATE_JWKS_URL             JWT mode: verify bearer tokens against this JWKS (with the two below)
  TOOLGATE_JWT_ISSUER           JWT mode: the issuer tokens must carry (iss)
  TOOLGATE_RESOURCE             JWT mode: this server's canonical URL (audience; RFC 9728 resource)
  TOOLGATE_JWT_AUDIENCES        JWT mode: further accepted audiences (comma separated)
  REDIS_URL                     shared policy state (repeat cache, rate limits, idempotency, confirmations)
                                in Redis, for a fleet; in this process when unset
  AUDIT_DATABASE_URL            audit to this PostgreSQL table (one hash chain per replica) instead of AUDIT_FILE
  TOOLGATE_REPLICA_ID           this replica's audit chain id (default: host name, pid, random suffix)
  TOOLGATE_DURABLE_AUDIT=1      release an answer only after its audit record is stored
  TOOLGATE_AUDIT_KEY_FILE       key the audit chain with HMAC-SHA256: a file of >= 32 bytes (less one trailing
                                newline, as toolgate-audit verify --key-file reads it)
  TOOLGATE_CONFIRM_SECRET       HMAC key of two-step confirmations (>= 32 bytes; the same on every replica;
                                default: random per process)
  TOOLGATE_CONFIRM_AUDIENCE     this deployment's name in every confirmation and Redis key (default
                                order-service): give staging and production each their own when they
                                share the secret or Redis
  TOOLGATE_WRITES_PER_MINUTE    request_refund/cancel_order calls per caller and tool per minute (default 10)
  TOOLGATE_CALLS_PER_MINUTE     calls per caller per minute, all tools together (default 120)
  TOOLGATE_ALLOWED_HOSTS        extra Host header values accepted over HTTP (comma separated)
  TOOLGATE_ALLOWED_ORIGINS      browser origins accepted over HTTP (comma separated)
  TOOLGATE_CUSTOMER_SCOPED=1    bind the customer id from the token's claims (customerId)
  TOOLGATE_BREAKER_RESET_MS     how long an open breaker waits before a probe (default 10000)
  TOOLGATE_SHUTDOWN_GRACE_MS    how long shutdown waits for in-flight calls (default 10000)
  TOOLGATE_READY_TIMEOUT_MS     how long GET /ready waits for the database before answering 503 (default 2000)
  OTEL_EXPORTER_OTLP_ENDPOINT   send traces to this OpenTelemetry collector (OTLP/HTTP)
  LOG_LEVEL                     debug | info | warn | error (default info); logs go to stderr
`;

export function readConfig(argv: readonly string[], env: NodeJS.ProcessEnv): CliConfig {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      http: { type: 'boolean', default: false },
      port: { type: 'string', default: env.PORT ?? '3000' },
      host: { type: 'string', default: '127.0.0.1' },
      'insecure-no-auth': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const graceText = env.TOOLGATE_SHUTDOWN_GRACE_MS;
  const shutdownGraceMs = graceText ? Number(graceText) : 10_000;
  if (!Number.isInteger(shutdownGraceMs) || shutdownGraceMs < 0)
    throw new UsageError(`TOOLGATE_SHUTDOWN_GRACE_MS must be a whole number of ms, got ${graceText}`);
  const readyText = env.TOOLGATE_READY_TIMEOUT_MS;
  const readyTimeoutMs = readyText ? Number(readyText) : 2000;
  if (!Number.isSafeInteger(readyTimeoutMs) || readyTimeoutMs < 1)
    throw new UsageError(`TOOLGATE_READY_TIMEOUT_MS must be a positive whole number of ms, got ${readyText}`);
  // The deployment's name starts every Redis key and is in every confirmation: checked here, so a bad
  // one is refused naming the variable (not as a Redis prefix or confirm option the user never set).
  const audience = env.TOOLGATE_CONFIRM_AUDIENCE || undefined;
  if (audience !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(audience))
    throw new UsageError(
      "TOOLGATE_CONFIRM_AUDIENCE must be 1 to 64 letters, digits, '.', '_' or '-', the first a letter or digit (e.g. orders-prod)",
    );
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new UsageError(`--port must be 0-65535, got ${values.port}`);
  const tokensText = env.TOOLGATE_TOKENS_FILE
    ? readFileSync(env.TOOLGATE_TOKENS_FILE, 'utf8')
    : env.TOOLGATE_TOKENS;
  let tokens: TokenConfig | undefined;
  if (tokensText) {
    const parsed = TokenConfigSchema.safeParse(JSON.parse(tokensText));
    if (!parsed.success) throw new UsageError(`token configuration is invalid: ${parsed.error.message}`);
    tokens = parsed.data;
  }
  const jwtParts = [env.TOOLGATE_JWKS_URL, env.TOOLGATE_JWT_ISSUER, env.TOOLGATE_RESOURCE];
  if (jwtParts.some(Boolean) && !jwtParts.every(Boolean)) {
    throw new UsageError(
      'JWT mode needs TOOLGATE_JWKS_URL, TOOLGATE_JWT_ISSUER and TOOLGATE_RESOURCE together',
    );
  }
  const jwt = jwtParts.every(Boolean)
    ? {
        jwksUrl: env.TOOLGATE_JWKS_URL!,
        issuer: env.TOOLGATE_JWT_ISSUER!,
        resource: env.TOOLGATE_RESOURCE!,
        audiences: (env.TOOLGATE_JWT_AUDIENCES ?? '')
          .split(',')
          .map((item) => item.trim())
          .filter((item) => item !== ''),
      }
    : undefined;
  if (jwt && tokens)
    throw new UsageError('choose one: static tokens (TOOLGATE_TOKENS*) or JWT mode (TOOLGATE_JWKS_URL...)');
  if (env.TOOLGATE_CONFIRM_SECRET !== undefined && Buffer.byteLength(env.TOOLGATE_CONFIRM_SECRET) < 32) {
    throw new UsageError('TOOLGATE_CONFIRM_SECRET must be at least 32 bytes');
  }
  const auditKey = readAuditKey(env.TOOLGATE_AUDIT_KEY_FILE);
  if (values.http && !tokens && !jwt && !values['insecure-no-auth'] && !values.help) {
    throw new UsageError(
      '--http needs TOOLGATE_TOKENS_FILE (or TOOLGATE_TOKENS), JWT mode (TOOLGATE_JWKS_URL...), or --insecure-no-auth on 127.0.0.1',
    );
  }
  const callsText = env.TOOLGATE_CALLS_PER_MINUTE;
  const callsPerMinute = callsText ? Number(callsText) : undefined;
  if (callsPerMinute !== undefined && !(Number.isInteger(callsPerMinute) && callsPerMinute > 0))
    throw new UsageError(`TOOLGATE_CALLS_PER_MINUTE must be a positive whole number, got ${callsText}`);
  const writesText = env.TOOLGATE_WRITES_PER_MINUTE;
  const writesPerMinute = writesText ? Number(writesText) : undefined;
  if (writesPerMinute !== undefined && !(Number.isInteger(writesPerMinute) && writesPerMinute > 0))
    throw new UsageError(`TOOLGATE_WRITES_PER_MINUTE must be a positive whole number, got ${writesText}`);
  const level = (env.LOG_LEVEL ?? 'info').toLowerCase();
  if (!['debug', 'info', 'warn', 'error'].includes(level))
    throw new UsageError(`LOG_LEVEL ${level} is not known`);
  const list = (text: string | undefined): string[] =>
    (text ?? '')
      .split(',')
      .map((item) => item.trim())
      .filter((item) => item !== '');
  return {
    http: values.http,
    host: values.host,
    port,
    databaseUrl: env.DATABASE_URL || undefined,
    carrierUrl: env.CARRIER_URL || undefined,
    docsRoot: env.DOCS_ROOT || undefined,
    auditFile: env.AUDIT_FILE || undefined,
    tokens,
    insecureNoAuth: values['insecure-no-auth'],
    allowedHosts: list(env.TOOLGATE_ALLOWED_HOSTS),
    allowedOrigins: list(env.TOOLGATE_ALLOWED_ORIGINS),
    customerScoped: env.TOOLGATE_CUSTOMER_SCOPED === '1',
    logLevel: level as CliConfig['logLevel'],
    otlpEndpoint: env.OTEL_EXPORTER_OTLP_ENDPOINT || undefined,
    breakerResetMs: env.TOOLGATE_BREAKER_RESET_MS ? Number(env.TOOLGATE_BREAKER_RESET_MS) : undefined,
    shutdownGraceMs,
    readyTimeoutMs,
    help: values.help,
    redisUrl: env.REDIS_URL || undefined,
    auditDatabaseUrl: env.AUDIT_DATABASE_URL || undefined,
    replicaId: env.TOOLGATE_REPLICA_ID || undefined,
    confirmSecret: env.TOOLGATE_CONFIRM_SECRET || undefined,
    confirmAudience: audience,
    durableAudit: env.TOOLGATE_DURABLE_AUDIT === '1',
    auditKey,
    writesPerMinute,
    callsPerMinute,
    jwt,
  };
}

/**
 * The audit key from its file, read as `toolgate-audit verify --key-file` reads it (audit's
 * `readAuditKeyFile`). Never logged; an unreadable or short file stops start-up.
 */
function readAuditKey(path: string | undefined): Buffer | undefined {
  if (!path) return undefined;
  let key: Buffer;
  try {
    key = readAuditKeyFile(path);
  } catch (error) {
    throw new UsageError(
      `TOOLGATE_AUDIT_KEY_FILE cannot be read: ${(error as NodeJS.ErrnoException).code ?? 'error'}`,
    );
  }
  if (key.length < 32) throw new UsageError('TOOLGATE_AUDIT_KEY_FILE must hold at least 32 bytes');
  return key;
}

export class UsageError extends Error {
  override name = 'UsageError';
}
