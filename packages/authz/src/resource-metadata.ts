import type { IncomingMessage, ServerResponse } from 'node:http';
import type { OAuthProtectedResourceMetadata } from '@modelcontextprotocol/sdk/shared/auth.js';
import { type AccessTokenError, isAccessTokenError } from './token-errors.js';

export interface ProtectedResourceMetadataOptions {
  /** The server's canonical URL, the same as the verifier's `resource`. Required. */
  resource: string;
  /** Issuer URLs of the authorization servers that grant tokens for it. Required (at least one). */
  authorizationServers: readonly string[];
  /** The scopes a client may ask for. @default undefined (not published) */
  scopesSupported?: readonly string[];
  /** A human-readable name for consent screens. @default undefined */
  resourceName?: string;
  /** A page describing the server for developers. @default undefined */
  resourceDocumentation?: string;
  /** How `Cache-Control` lets clients keep the document, in seconds. @default 3600 */
  maxAgeSec?: number;
}

/** A framework-free HTTP answer: write `status`, `headers` and `body` as they are. */
export interface HttpAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export interface ProtectedResource {
  /** The RFC 9728 document (`resource`, `authorization_servers`, `bearer_methods_supported`, ...). */
  readonly document: Readonly<OAuthProtectedResourceMetadata>;
  /** Where the document is served: `/.well-known/oauth-protected-resource` plus the resource's path (RFC 9728 §3.1). */
  readonly path: string;
  /** The absolute URL of `path` on the resource's origin: what `resource_metadata` in challenges points to. */
  readonly url: string;
  /** The 200 answer with the document (for GET on `path`). */
  metadataResponse(): HttpAnswer;
  /**
   * The answer to a request the bearer check refused: 401 with `Bearer resource_metadata=...` (plus
   * `error="invalid_token"` when a token was sent), 403 with `error="insufficient_scope", scope="..."`,
   * 503 when the keys could not be fetched. `undefined` means no token was sent.
   */
  challenge(error: AccessTokenError | undefined): HttpAnswer;
  /** A node:http handler serving the document on GET/HEAD of `path`; returns false (untouched) for other requests. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
}

/**
 * OAuth 2.0 Protected Resource Metadata (RFC 9728) for an MCP server: the document clients read to
 * find the authorization server, and the `WWW-Authenticate` challenges that point them to it.
 */
export function createProtectedResource(options: ProtectedResourceMetadataOptions): ProtectedResource {
  if (
    typeof options?.resource !== 'string' ||
    !URL.canParse(options.resource) ||
    options.resource.includes('#')
  ) {
    throw new TypeError(
      "createProtectedResource: resource must be the server's absolute URL, without a fragment",
    );
  }
  const servers = options.authorizationServers;
  if (!Array.isArray(servers) || servers.length === 0 || servers.some((server) => !URL.canParse(server))) {
    throw new TypeError('createProtectedResource: authorizationServers must list at least one absolute URL');
  }
  const resource = new URL(options.resource);
  const suffix = resource.pathname === '/' ? '' : resource.pathname.replace(/\/$/, '');
  const path = `/.well-known/oauth-protected-resource${suffix}`;
  const url = `${resource.origin}${path}`;
  const document: OAuthProtectedResourceMetadata = {
    resource: options.resource,
    authorization_servers: [...servers],
    bearer_methods_supported: ['header'],
  };
  if (options.scopesSupported !== undefined) document.scopes_supported = [...options.scopesSupported];
  if (options.resourceName !== undefined) document.resource_name = options.resourceName;
  if (options.resourceDocumentation !== undefined)
    document.resource_documentation = options.resourceDocumentation;
  const maxAge = options.maxAgeSec ?? 3600;
  const body = JSON.stringify(document);
  const metadataHeaders = Object.freeze({
    'content-type': 'application/json',
    'cache-control': `public, max-age=${maxAge}`,
    // Browser-based MCP clients read the document cross-origin.
    'access-control-allow-origin': '*',
  });

  const challenge = (error: AccessTokenError | undefined): HttpAnswer => {
    const metadata = `resource_metadata="${url}"`;
    if (error === undefined) {
      return answer(401, `Bearer ${metadata}`, 'invalid_token', 'A bearer token is required.');
    }
    if (!isAccessTokenError(error))
      throw new TypeError('challenge: give an error thrown by the JWT verifier, or undefined');
    if (error.kind === 'insufficient_scope') {
      const scope = error.requiredScopes.join(' ');
      return answer(
        403,
        `Bearer error="insufficient_scope", scope="${scope}", ${metadata}`,
        'insufficient_scope',
        error.message,
      );
    }
    if (error.kind === 'unavailable') {
      return {
        status: 503,
        headers: { 'content-type': 'application/json', 'retry-after': '5' },
        body: errorBody('temporarily_unavailable', 'Try again shortly.'),
      };
    }
    return answer(
      401,
      `Bearer error="invalid_token", error_description="${quoted(error.message)}", ${metadata}`,
      'invalid_token',
      error.message,
    );
  };

  return {
    document: Object.freeze(document),
    path,
    url,
    metadataResponse: () => ({ status: 200, headers: metadataHeaders, body }),
    challenge,
    handle(req, res) {
      const requestPath = (req.url ?? '').split('?')[0];
      if (requestPath !== path || (req.method !== 'GET' && req.method !== 'HEAD')) return false;
      res.writeHead(200, metadataHeaders);
      res.end(req.method === 'HEAD' ? undefined : body);
      return true;
    },
  };
}

function answer(status: number, wwwAuthenticate: string, error: string, description: string): HttpAnswer {
  return {
    status,
    headers: { 'content-type': 'application/json', 'www-authenticate': wwwAuthenticate },
    body: errorBody(error, description),
  };
}

function errorBody(error: string, description: string): string {
  return JSON.stringify({ error, error_description: description });
}

// A quoted-string (RFC 9110 §5.6.4) may not carry a bare quote or backslash.
function quoted(text: string): string {
  return text.replace(/[\\"]/g, (c) => `\\${c}`);
}
