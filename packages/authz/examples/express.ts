// The README's Express example, typechecked with the package (see usage.ts).
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import type { JwtVerifier, ProtectedResource } from '../src/index.js';

// The verifier and protectedResource above; `app` is an Express app (typed here as far as it is used).
declare const verifier: JwtVerifier, protectedResource: ProtectedResource, mcpHandler: unknown;
interface Reply {
  status(code: number): Reply;
  set(headers: Record<string, string>): Reply;
  send(body: string): void;
}
declare const app: {
  get(path: string, handler: (req: unknown, res: Reply) => void): void;
  post(path: string, ...handlers: unknown[]): void;
};

app.get(protectedResource.path, (_req, res) => {
  const answer = protectedResource.metadataResponse();
  res.status(answer.status).set(answer.headers).send(answer.body);
});
app.post('/mcp', requireBearerAuth({ verifier, resourceMetadataUrl: protectedResource.url }), mcpHandler);
