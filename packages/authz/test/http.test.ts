import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createSilentLogger, defineTool, ok, registerTools, type ToolDefinition } from '@toolgate/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthz, createJwtVerifier, createProtectedResource, isAccessTokenError } from '../src/index.js';
import { ISSUER, type Issuer, startIssuer } from './fixtures.js';

// The README's node:http wiring, end to end over loopback: verifier, challenges, metadata, authz.
let issuer: Issuer;
let server: Server;
let base: string;
let resourceUrl: string;

const whoami = defineTool({
  name: 'whoami',
  description: 'Who is calling.',
  input: {},
  handler: async (_args, ctx) => ok({ caller: ctx.caller.id }),
}) as ToolDefinition;
const refund = defineTool({
  name: 'refund',
  description: 'Refund.',
  input: {},
  handler: async () => ok(),
}) as ToolDefinition;

beforeAll(async () => {
  issuer = await startIssuer();
  server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  resourceUrl = `${base}/mcp`;
  const verifier = createJwtVerifier({ jwksUrl: issuer.jwksUrl, issuer: ISSUER, resource: resourceUrl });
  const protectedResource = createProtectedResource({
    resource: resourceUrl,
    authorizationServers: [ISSUER],
  });
  const authz = createAuthz({
    require: { scopes: ['orders:read'] },
    tools: { refund: { require: { scopes: ['orders:write'] } } },
  });
  server.on('request', async (req, res) => {
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
    const mcp = new McpServer({ name: 'http-test', version: '0.0.0' });
    registerTools(mcp, [whoami, refund], { middleware: [authz], logger: createSilentLogger() });
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res);
  });
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await issuer.close();
});

describe('Streamable HTTP with the verifier, the metadata and authz', () => {
  it('answers a request without a token with 401 pointing at the metadata, which it serves', async () => {
    const response = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe(
      `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
    );
    const metadata = await fetch(`${base}/.well-known/oauth-protected-resource/mcp`);
    expect(await metadata.json()).toEqual({
      resource: resourceUrl,
      authorization_servers: [ISSUER],
      bearer_methods_supported: ['header'],
    });
  });

  it('answers an expired token with 401 invalid_token', async () => {
    const token = await issuer.sign(
      { sub: 'u', aud: resourceUrl },
      { exp: Math.floor(Date.now() / 1000) - 60 },
    );
    const response = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: '{}',
    });
    expect([response.status, response.headers.get('www-authenticate')]).toEqual([
      401,
      `Bearer error="invalid_token", error_description="The token has expired.", resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
    ]);
  });

  it('lets a real client list and call only what its verified token allows', async () => {
    const token = await issuer.sign({ sub: 'agent-7', aud: resourceUrl, scope: 'orders:read' });
    const client = new Client({ name: 'http-test-client', version: '0.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(resourceUrl), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    try {
      expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['whoami']);
      expect((await client.callTool({ name: 'whoami', arguments: {} })).structuredContent).toEqual({
        ok: true,
        caller: `sub:${ISSUER}|agent-7`,
      });
      await expect(client.callTool({ name: 'refund', arguments: {} })).rejects.toThrow(
        'MCP error -32602: Unknown tool: refund',
      );
    } finally {
      await client.close();
    }
  });
});
