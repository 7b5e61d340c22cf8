// The README's examples, typechecked with the package (`tsc -p tsconfig.json`) so they cannot drift.
// Not run: vitest only collects *.test.ts.
import { createServer } from 'node:http';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { registerTools, type ToolDefinition, type ToolMiddleware } from '@toolgate/core';
import { createAuthz, createJwtVerifier, createProtectedResource, isAccessTokenError } from '../src/index.js';

declare const tools: ToolDefinition[];
declare const otel: ToolMiddleware,
  audit: ToolMiddleware,
  redactErrors: ToolMiddleware,
  rateLimit: ToolMiddleware;

export function perToolRequirements(): void {
  const authz = createAuthz({
    require: { scopes: ['orders:read'] },
    tools: {
      refund: { require: { scopes: ['orders:write'] }, mode: 'refuse' },
      search_orders: {
        require: {
          anyOf: [['orders:read'], ['support']],
          claims: { tenant: (value) => value === 'acme' },
        },
      },
      ping: false,
    },
    local: 'allow',
  });
  const server = new McpServer({ name: 'orders', version: '1.0.0' });
  registerTools(server, tools, { middleware: [otel, audit, redactErrors, authz, rateLimit] });
}

export function streamableHttp(transport: StreamableHTTPServerTransport): void {
  const RESOURCE = 'https://orders.example.com/mcp';
  const verifier = createJwtVerifier({
    jwksUrl: 'https://auth.example.com/.well-known/jwks.json',
    issuer: 'https://auth.example.com',
    resource: RESOURCE,
  });
  const protectedResource = createProtectedResource({
    resource: RESOURCE,
    authorizationServers: ['https://auth.example.com'],
    scopesSupported: ['orders:read', 'orders:write', 'support'],
  });
  createServer(async (req, res) => {
    if (protectedResource.handle(req, res)) return;
    const token = /^Bearer (\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
    const verified =
      token === undefined ? undefined : await verifier.verify(token).catch((error: unknown) => error);
    if (verified === undefined || isAccessTokenError(verified)) {
      const answer = protectedResource.challenge(verified);
      res.writeHead(answer.status, answer.headers).end(answer.body);
      return;
    }
    Object.assign(req, { auth: verified });
    await transport.handleRequest(req, res);
  }).listen(8080);
  // Express: the verifier is the SDK's OAuthTokenVerifier as it stands.
  requireBearerAuth({ verifier, resourceMetadataUrl: protectedResource.url });
}
