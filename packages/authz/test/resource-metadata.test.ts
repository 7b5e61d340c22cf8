import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { OAuthProtectedResourceMetadataSchema } from '@modelcontextprotocol/sdk/shared/auth.js';
import { defineTool, ok, type ToolDefinition } from '@toolgate/core';
import { serveTools } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AccessTokenInvalidError,
  AccessTokenScopeError,
  AccessTokenUnavailableError,
  createAuthz,
  createJwtVerifier,
  createProtectedResource,
} from '../src/index.js';
import { ISSUER, type Issuer, RESOURCE, startIssuer } from './fixtures.js';

const resource = createProtectedResource({
  resource: RESOURCE,
  authorizationServers: [ISSUER],
  scopesSupported: ['orders:read', 'orders:write'],
  resourceName: 'Order assistant',
});
const METADATA_URL = 'https://orders.example.test/.well-known/oauth-protected-resource/mcp';

describe('createProtectedResource', () => {
  it('builds the RFC 9728 document at the path the RFC derives from the resource', () => {
    expect(resource.path).toBe('/.well-known/oauth-protected-resource/mcp');
    expect(resource.url).toBe(METADATA_URL);
    expect(resource.metadataResponse()).toEqual({
      status: 200,
      headers: {
        'content-type': 'application/json',
        'cache-control': 'public, max-age=3600',
        'access-control-allow-origin': '*',
      },
      body: '{"resource":"https://orders.example.test/mcp","authorization_servers":["https://auth.example.test"],"bearer_methods_supported":["header"],"scopes_supported":["orders:read","orders:write"],"resource_name":"Order assistant"}',
    });
    expect(OAuthProtectedResourceMetadataSchema.parse(resource.document)).toEqual(resource.document);
    expect(
      createProtectedResource({ resource: 'https://orders.example.test', authorizationServers: [ISSUER] })
        .path,
    ).toBe('/.well-known/oauth-protected-resource');
  });

  it('answers a request without a token with 401 and resource_metadata only', () => {
    expect(resource.challenge(undefined)).toEqual({
      status: 401,
      headers: {
        'content-type': 'application/json',
        'www-authenticate': `Bearer resource_metadata="${METADATA_URL}"`,
      },
      body: '{"error":"invalid_token","error_description":"A bearer token is required."}',
    });
  });

  it('answers a refused token with 401 invalid_token, a missing scope with 403, unavailable keys with 503', () => {
    expect(
      resource.challenge(new AccessTokenInvalidError('The token has "expired".', 'expired')).headers[
        'www-authenticate'
      ],
    ).toBe(
      `Bearer error="invalid_token", error_description="The token has \\"expired\\".", resource_metadata="${METADATA_URL}"`,
    );
    expect(
      resource.challenge(
        new AccessTokenScopeError('The token lacks the scope(s) mcp.', ['orders:read', 'mcp']),
      ),
    ).toEqual({
      status: 403,
      headers: {
        'content-type': 'application/json',
        'www-authenticate': `Bearer error="insufficient_scope", scope="orders:read mcp", resource_metadata="${METADATA_URL}"`,
      },
      body: '{"error":"insufficient_scope","error_description":"The token lacks the scope(s) mcp."}',
    });
    expect(resource.challenge(new AccessTokenUnavailableError('down')).status).toBe(503);
    expect(() => resource.challenge(new Error('other') as never)).toThrow(TypeError);
  });

  it('refuses a resource with a fragment or no authorization server', () => {
    expect(() =>
      createProtectedResource({ resource: `${RESOURCE}#x`, authorizationServers: [ISSUER] }),
    ).toThrow(TypeError);
    expect(() => createProtectedResource({ resource: RESOURCE, authorizationServers: [] })).toThrow(
      TypeError,
    );
  });

  it('serves the document from a node:http handler on loopback', async () => {
    const server = createServer((req, res) => {
      if (!resource.handle(req, res)) res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const found = await fetch(`${base}${resource.path}?x=1`);
      expect([found.status, found.headers.get('content-type'), await found.json()]).toEqual([
        200,
        'application/json',
        resource.document,
      ]);
      expect((await fetch(`${base}/.well-known/oauth-protected-resource`)).status).toBe(404);
      expect((await fetch(`${base}${resource.path}`, { method: 'POST' })).status).toBe(404);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('verifier and authz together', () => {
  let issuer: Issuer;
  beforeAll(async () => {
    issuer = await startIssuer();
  });
  afterAll(() => issuer.close());

  it('a verified token becomes the caller identity and the scopes authz checks', async () => {
    const verifier = createJwtVerifier({ jwksUrl: issuer.jwksUrl, issuer: ISSUER, resource: RESOURCE });
    const authInfo = await verifier.verify(
      await issuer.sign({ sub: 'user-9', client_id: 'desk', scope: 'orders:read' }),
    );
    const whoami = defineTool({
      name: 'whoami',
      description: 'Who the server thinks is calling.',
      input: {},
      handler: async (_args, ctx) => ok({ caller: ctx.caller.id, kind: ctx.caller.kind }),
    }) as ToolDefinition;
    const write = defineTool({
      name: 'refund',
      description: 'Refund.',
      input: {},
      handler: async () => ok(),
    }) as ToolDefinition;
    const client = await serveTools([whoami, write], {
      authInfo,
      middleware: [
        createAuthz({
          require: { scopes: ['orders:read'] },
          tools: { refund: { require: { scopes: ['orders:write'] } } },
        }),
      ],
    });
    try {
      expect((await client.client.listTools()).tools.map((t) => t.name)).toEqual(['whoami']);
      expect(await client.callToolJson('whoami')).toEqual({
        ok: true,
        caller: `sub:${ISSUER}|user-9`,
        kind: 'subject',
      });
    } finally {
      await client.close();
    }
  });
});
