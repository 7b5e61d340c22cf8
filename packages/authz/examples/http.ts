// The README's Streamable HTTP example, typechecked with the package (see usage.ts).
import { createServer } from 'node:http';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createJwtVerifier, createProtectedResource, isAccessTokenError } from '../src/index.js';

declare const transport: StreamableHTTPServerTransport; // connected to your McpServer

const RESOURCE = 'https://orders.example.com/mcp'; // this server's canonical URL
const verifier = createJwtVerifier({
  jwksUrl: 'https://auth.example.com/.well-known/jwks.json',
  issuer: 'https://auth.example.com',
  resource: RESOURCE, // tokens must name it in `aud` (or one of `audiences`)
});
const protectedResource = createProtectedResource({
  resource: RESOURCE,
  authorizationServers: ['https://auth.example.com'],
  scopesSupported: ['orders:read', 'orders:write', 'support'],
});

createServer(async (req, res) => {
  if (protectedResource.handle(req, res)) return; // GET /.well-known/oauth-protected-resource/mcp
  const token = /^Bearer (\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
  const verified =
    token === undefined ? undefined : await verifier.verify(token).catch((error: unknown) => error);
  if (verified === undefined || isAccessTokenError(verified)) {
    // No token: 401 pointing at the metadata; a bad one: 401 invalid_token; keys unreachable: 503.
    const answer = protectedResource.challenge(verified);
    res.writeHead(answer.status, answer.headers).end(answer.body);
    return;
  }
  Object.assign(req, { auth: verified }); // the SDK hands req.auth to every request as authInfo
  await transport.handleRequest(req, res);
}).listen(8080);
