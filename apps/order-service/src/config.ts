import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { type TokenConfig, TokenConfigSchema } from './auth.js';

export interface CliConfig {
  http: boolean;
  host: string;
  port: number;
  databaseUrl: string | undefined;
  carrierUrl: string;
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
}

export const USAGE = `order-service: a read-only order assistant MCP server (toolgate sample)

Usage: order-service [--http] [--port N] [--host H] [--insecure-no-auth]

Transports: stdio by default (stdout carries JSON-RPC only); --http serves Streamable HTTP (stateless) at /mcp.
Environment:
  DATABASE_URL                  PostgreSQL; embedded PGlite with seeded sample data when unset
  CARRIER_URL                   carrier tracking API base URL (default https://api.parcelwise.example)
  DOCS_ROOT                     policy documents folder (default: the bundled docs/)
  AUDIT_FILE                    append-only, hash-chained audit file (default: audit to stderr)
  TOOLGATE_TOKENS_FILE          JSON {"tokens":[{"token","clientId","scopes":["orders:read"],"claims":{}}]}
  TOOLGATE_TOKENS               the same JSON inline
  TOOLGATE_ALLOWED_HOSTS        extra Host header values accepted over HTTP (comma separated)
  TOOLGATE_ALLOWED_ORIGINS      browser origins accepted over HTTP (comma separated)
  TOOLGATE_CUSTOMER_SCOPED=1    bind the customer id from the token's claims (customerId)
  TOOLGATE_BREAKER_RESET_MS     how long an open breaker waits before a probe (default 10000)
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
  if (values.help) throw new UsageError(USAGE);
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
  if (values.http && !tokens && !values['insecure-no-auth']) {
    throw new UsageError(
      '--http needs TOOLGATE_TOKENS_FILE (or TOOLGATE_TOKENS), or --insecure-no-auth on 127.0.0.1',
    );
  }
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
    carrierUrl: env.CARRIER_URL || 'https://api.parcelwise.example',
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
  };
}

export class UsageError extends Error {
  override name = 'UsageError';
}
