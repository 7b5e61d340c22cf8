import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CancelledNotificationSchema,
  isJSONRPCErrorResponse,
  isJSONRPCNotification,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import { AccessTokenScopeError, isAccessTokenError, type ProtectedResource } from '@toolgate/authz';
import { type Logger, withDeadline } from '@toolgate/core';

/** Checks a bearer token: the static tokens file, or a JWT verifier (`@toolgate/authz`). */
export interface BearerVerifier {
  /** The token's info; undefined (or a thrown access-token error) when it is not valid. */
  verify(token: string): AuthInfo | undefined | Promise<AuthInfo | undefined>;
}

export interface HttpServerOptions {
  /** Interface to bind. @default '127.0.0.1' */
  host?: string;
  /** Port; 0 picks a free one. @default 3000 */
  port?: number;
  /** Path of the MCP endpoint. @default '/mcp' */
  path?: string;
  /** Bearer-token verifier; undefined serves without auth (only allowed on a loopback host). */
  verifier: BearerVerifier | undefined;
  /**
   * OAuth Protected Resource Metadata (RFC 9728): served at its well-known path, and the 401/403
   * challenges point to it (`resource_metadata`). @default undefined (plain bearer challenges)
   */
  protectedResource?: ProtectedResource | undefined;
  /** Scope every caller needs. @default 'orders:read' */
  requiredScope?: string;
  /** Host header values accepted (DNS rebinding); `host:port` of the bound address are always added. @default [] */
  allowedHosts?: readonly string[];
  /** Origin header values accepted when a browser sends one. @default [] (no browser origins) */
  allowedOrigins?: readonly string[];
  /** Largest request body read. @default 262144 (256 KiB) */
  maxBodyBytes?: number;
  /**
   * Time a client has to send a whole request, headers and body; a slower one gets 408 and its
   * connection is closed (a slowloris client would otherwise hold it for Node's default 5 minutes).
   * @default 10000
   */
  requestTimeoutMs?: number;
  /** A fresh McpServer per request (stateless mode); tools and shared middleware come from the caller. */
  createServer: () => McpServer;
  /**
   * Whether the server can take calls (GET /ready); e.g. a database ping. One check runs at a time,
   * shared by every probe that arrives meanwhile; its signal aborts when `readyTimeoutMs` runs out.
   * @default always ready
   */
  ready?: (signal: AbortSignal) => Promise<boolean>;
  /**
   * Longest wait for `ready` per probe; past it /ready answers 503 `not_ready` (a dependency that
   * stopped answering would otherwise hold the probe until the load balancer's own timeout).
   * @default 2000
   */
  readyTimeoutMs?: number;
  logger: Logger;
}

export interface RunningHttpServer {
  readonly url: string;
  readonly server: Server;
  /** Requests being answered right now. */
  readonly inFlight: number;
  /**
   * Stops accepting calls (new MCP requests and /ready get 503 while it drains), waits up to `graceMs`
   * for in-flight requests to finish, then closes the listener and every connection left.
   * @returns how many requests were still running when the grace period ran out
   */
  close(graceMs?: number): Promise<{ abandoned: number }>;
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/**
 * Streamable HTTP in stateless mode: every POST gets a fresh server and transport. In front of it,
 * in this order: Host and Origin checks (DNS rebinding), bearer auth (401 without, 403 without the
 * scope), a body size limit.
 */
export async function startHttpServer(options: HttpServerOptions): Promise<RunningHttpServer> {
  const host = options.host ?? '127.0.0.1';
  const path = options.path ?? '/mcp';
  const requiredScope = options.requiredScope ?? 'orders:read';
  const maxBodyBytes = options.maxBodyBytes ?? 256 * 1024;
  const requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
  const readyTimeoutMs = options.readyTimeoutMs ?? 2000;
  if (!Number.isSafeInteger(readyTimeoutMs) || readyTimeoutMs < 1) {
    throw new TypeError(`startHttpServer: readyTimeoutMs must be a positive integer, got ${readyTimeoutMs}`);
  }
  if (!options.verifier && !LOOPBACK.has(host)) {
    throw new Error(`refusing to serve without auth on ${host}; configure tokens or bind to 127.0.0.1`);
  }
  const allowedOrigins = new Set(options.allowedOrigins ?? []);
  const allowedHosts = new Set((options.allowedHosts ?? []).map((entry) => entry.toLowerCase()));
  const { logger } = options;
  // A server on loopback also accepts loopback Host and Origin values (any port): a page on this
  // machine may talk to it, a rebinding name (evil.example resolving to 127.0.0.1) may not.
  const loopbackServer = LOOPBACK.has(host);
  const allowedHost = (authority: string): boolean =>
    allowedHosts.has(authority) || (loopbackServer && isLoopbackAuthority(authority));

  let draining = false;
  let inFlight = 0;
  // The readiness check running now, shared by every probe: a flood of probes against a silent
  // database starts one ping, not one per probe.
  let readyCheck: Promise<boolean> | undefined;
  const checkReady = (ready: (signal: AbortSignal) => Promise<boolean>): Promise<boolean> => {
    if (readyCheck === undefined) {
      const check = withDeadline(async (signal) => (await ready(signal)) === true, {
        timeoutMs: readyTimeoutMs,
        what: 'the readiness check',
      }).catch(() => false);
      readyCheck = check;
      // Cleared once it settled (withDeadline settles by the deadline, whatever `ready` does).
      void check.then(() => {
        if (readyCheck === check) readyCheck = undefined;
      });
    }
    return readyCheck;
  };
  const idleWaiters = new Set<() => void>();
  // Node answers 408 itself; it looks for late requests once per checking interval.
  const timeouts = {
    requestTimeout: requestTimeoutMs,
    connectionsCheckingInterval: Math.min(1000, requestTimeoutMs),
  };
  const server = createServer(timeouts, (req, res) => {
    inFlight += 1;
    // 'close' fires once per response, whether it finished or the client went away.
    res.once('close', () => {
      inFlight -= 1;
      if (inFlight === 0) for (const wake of idleWaiters) wake();
    });
    // Draining: tell the client (and a load balancer) to go elsewhere, and close the connection.
    if (draining) res.setHeader('connection', 'close');
    handle(req, res).catch((error: unknown) => {
      logger.error({ err: error, url: req.url }, 'http request failed');
      if (!res.headersSent) sendJsonRpcError(res, 500, -32603, 'Internal server error');
      else res.end();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // A request-target no URL can be made of (`//`, `http://[`) is the client's error: 400, not a 500
    // and an error-level log line that anyone could fill without a token.
    const url = URL.canParse(req.url ?? '/', 'http://placeholder')
      ? new URL(req.url ?? '/', 'http://placeholder')
      : undefined;
    if (url === undefined) {
      res
        .writeHead(400, { 'content-type': 'application/json', connection: 'close' })
        .end('{"error":"bad request target"}');
      return;
    }
    // Probes for a load balancer: no auth, no Host check (they come from the balancer's own address).
    if (url.pathname === '/health') {
      sendJson(res, 200, { status: 'ok' });
      return;
    }
    if (url.pathname === '/ready') {
      if (draining) {
        sendJson(res, 503, { status: 'shutting_down' });
        return;
      }
      const ready = options.ready ? await checkReady(options.ready) : true;
      sendJson(res, ready ? 200 : 503, { status: ready ? 'ready' : 'not_ready' });
      return;
    }
    if (options.protectedResource?.handle(req, res)) return;
    if (url.pathname !== path) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      return;
    }
    // Node keeps the first of two Host headers, a proxy in front may route by the last: the two would
    // disagree on which site this is (RFC 9112 answers such a request 400).
    if (countHeader(req, 'host') > 1) {
      sendJsonRpcError(res, 400, -32600, 'Bad Request: send exactly one Host header');
      return;
    }
    const hostHeader = (req.headers.host ?? '').toLowerCase();
    if (!allowedHost(hostHeader)) {
      sendJsonRpcError(res, 403, -32000, 'Forbidden: Host header not allowed');
      return;
    }
    // An absolute-form target (`POST http://other.example/mcp`) names the site itself, and a server
    // must take its authority over the Host header (RFC 9112 3.2.2): it passes the same check.
    if (!(req.url ?? '/').startsWith('/') && !allowedHost(url.host.toLowerCase())) {
      sendJsonRpcError(res, 403, -32000, 'Forbidden: request target host not allowed');
      return;
    }
    const origin = req.headers.origin;
    if (
      origin !== undefined &&
      !allowedOrigins.has(origin) &&
      !(loopbackServer && isLoopbackOrigin(origin))
    ) {
      sendJsonRpcError(res, 403, -32000, 'Forbidden: Origin not allowed');
      return;
    }
    // A browser page on an allowed origin may call: its preflight is answered here, before auth (a
    // preflight never carries credentials), and every answer names the origin that may read it.
    // Only an origin listed: a loopback server's own loopback origins pass the check above (a page of
    // this machine may post to it), but reading its answers is for listed origins alone.
    if (origin !== undefined && allowedOrigins.has(origin)) {
      res.setHeader('access-control-allow-origin', origin);
      res.setHeader('vary', 'Origin');
      res.setHeader('access-control-expose-headers', EXPOSED_HEADERS);
      if (req.method === 'OPTIONS') {
        res
          .writeHead(204, {
            'access-control-allow-methods': 'POST',
            'access-control-allow-headers': ALLOWED_REQUEST_HEADERS,
            'access-control-max-age': '600',
          })
          .end();
        return;
      }
    }
    // Node keeps the first of two Authorization headers, a proxy in front may use the last (or join
    // them with a comma): the two would disagree on who calls. Such a request names no one caller.
    if (hasAmbiguousAuthorization(req)) {
      sendJsonRpcError(
        res,
        400,
        -32600,
        'Bad Request: send exactly one Authorization header with one credential',
      );
      return;
    }
    let authInfo: AuthInfo | undefined;
    if (options.verifier) {
      const match = /^Bearer ([^\s]+)$/i.exec(req.headers.authorization ?? '');
      let refusal: unknown;
      try {
        authInfo = match ? await options.verifier.verify(match[1]!) : undefined;
      } catch (error) {
        if (!isAccessTokenError(error)) throw error;
        refusal = error;
      }
      if (options.protectedResource && (!authInfo || refusal !== undefined)) {
        const answer = options.protectedResource.challenge(isAccessTokenError(refusal) ? refusal : undefined);
        res.writeHead(answer.status, answer.headers).end(answer.body);
        return;
      }
      if (!authInfo) {
        res.setHeader(
          'www-authenticate',
          'Bearer error="invalid_token", error_description="Missing or invalid bearer token"',
        );
        sendJsonRpcError(res, 401, -32001, 'Unauthorized: a valid bearer token is required');
        return;
      }
      if (!authInfo.scopes.includes(requiredScope)) {
        // With protected resource metadata, the 403 points to it as the 401 does (RFC 9728 §5.1).
        if (options.protectedResource) {
          const answer = options.protectedResource.challenge(
            new AccessTokenScopeError(`The token lacks the ${requiredScope} scope.`, [requiredScope]),
          );
          res.writeHead(answer.status, answer.headers).end(answer.body);
          return;
        }
        res.setHeader('www-authenticate', `Bearer error="insufficient_scope", scope="${requiredScope}"`);
        sendJsonRpcError(res, 403, -32001, `Forbidden: the token lacks the ${requiredScope} scope`);
        return;
      }
    }
    if (draining) {
      res.setHeader('retry-after', '1');
      sendJsonRpcError(res, 503, -32000, 'Service unavailable: the server is shutting down');
      return;
    }
    if (req.method !== 'POST') {
      // Stateless mode: no standalone SSE stream and no sessions to delete.
      res.setHeader('allow', 'POST');
      sendJsonRpcError(res, 405, -32000, 'Method not allowed.');
      return;
    }
    const body = await readBody(req, maxBodyBytes);
    // Node already answered 408 and closed the connection: nothing left to say.
    if (body === 'aborted') return;
    if (body === 'too-large') {
      sendJsonRpcError(res, 413, -32600, `Request body larger than ${maxBodyBytes} bytes`);
      return;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      sendJsonRpcError(res, 400, -32700, 'Parse error: the body is not JSON');
      return;
    }
    // Two requests of one batch with one id would both run (a change made twice) and share one answer.
    if (hasDuplicateRequestIds(parsed)) {
      sendJsonRpcError(res, 400, -32600, 'Invalid Request: two requests in one batch share an id');
      return;
    }
    const mcp = options.createServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    endOnceAnsweredOrCancelled(transport, parsed);
    (req as IncomingMessage & { auth?: AuthInfo }).auth = authInfo;
    await transport.handleRequest(req, res, parsed);
  }

  await new Promise<void>((resolveListen, rejectListen) => {
    server.once('error', rejectListen);
    server.listen(options.port ?? 3000, host, () => {
      server.off('error', rejectListen);
      resolveListen();
    });
  });
  const address = server.address() as AddressInfo;
  const hostPart = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  for (const name of [hostPart, ...(LOOPBACK.has(host) ? ['localhost', '127.0.0.1'] : [])]) {
    allowedHosts.add(`${name}:${address.port}`.toLowerCase());
  }
  return {
    url: `http://${hostPart}:${address.port}${path}`,
    server,
    get inFlight() {
      return inFlight;
    },
    async close(graceMs = 10_000) {
      // The listener stays open while draining so a load balancer's probe reads 503 from /ready and
      // a late call gets a clear 503 instead of a refused connection; idle keep-alives go now.
      draining = true;
      server.closeIdleConnections();
      if (inFlight > 0) {
        await new Promise<void>((resolveIdle) => {
          const timer = setTimeout(done, graceMs);
          function done(): void {
            clearTimeout(timer);
            idleWaiters.delete(done);
            resolveIdle();
          }
          idleWaiters.add(done);
        });
      }
      const abandoned = inFlight;
      const closed = new Promise<void>((resolveClose) => server.close(() => resolveClose()));
      server.closeAllConnections();
      await closed;
      return { abandoned };
    },
  };
}

/**
 * Two or more Authorization headers, or one holding comma-joined credentials (how a proxy merges
 * duplicates). A bearer token (RFC 6750 b64token) never contains a comma.
 */
function hasAmbiguousAuthorization(req: IncomingMessage): boolean {
  const value = req.headers.authorization;
  if (value === undefined) return false;
  return value.includes(',') || countHeader(req, 'authorization') > 1;
}

/** How many times the request carries the header `name` (lower case); Node's `headers` keep one. */
function countHeader(req: IncomingMessage, name: string): number {
  const raw = req.rawHeaders;
  let seen = 0;
  for (let index = 0; index < raw.length; index += 2) {
    const key = raw[index]!;
    if (key.length === name.length && key.toLowerCase() === name) seen += 1;
  }
  return seen;
}

/** What a browser page on an allowed origin may send, and read, besides the CORS-safelisted headers. */
const ALLOWED_REQUEST_HEADERS = 'authorization, content-type, accept, mcp-protocol-version, last-event-id';
const EXPOSED_HEADERS = 'www-authenticate, retry-after';

/** A batch (array) holding two requests with one id. */
function hasDuplicateRequestIds(parsed: unknown): boolean {
  if (!Array.isArray(parsed)) return false;
  const ids = new Set<unknown>();
  for (const message of parsed) {
    if (!isJSONRPCRequest(message)) continue;
    if (ids.has(message.id)) return true;
    ids.add(message.id);
  }
  return false;
}

/**
 * The SDK sends no answer to a request its client cancelled (the protocol says the receiver should not),
 * and the stateless transport ends a POST's response only once every request in it is answered. So a
 * batch holding a request and its own `notifications/cancelled` kept its response open for good: a
 * descriptor each, and a drain waiting its whole grace at shutdown. Here the response ends once every
 * request of the POST is answered or cancelled. (Outside its batch a cancel reaches no one: each POST
 * has a server of its own.) A cancelled tool call still runs its chain to its end: the service's drain
 * waits for it, and audit records it.
 */
function endOnceAnsweredOrCancelled(transport: StreamableHTTPServerTransport, parsed: unknown): void {
  if (!Array.isArray(parsed)) return;
  const waiting = new Set<RequestId>();
  for (const message of parsed) if (isJSONRPCRequest(message)) waiting.add(message.id);
  const cancelled = parsed
    .map(cancelledIdOf)
    .filter((id): id is RequestId => id !== undefined && waiting.has(id));
  if (cancelled.length === 0) return;
  const stream = cancelled[0]!;
  let ended = false;
  const settle = (id: RequestId): void => {
    waiting.delete(id);
    if (waiting.size > 0 || ended) return;
    ended = true;
    // Any request id of this POST names its stream; closing the stream ends the response.
    transport.closeSSEStream(stream);
  };
  const send = transport.send.bind(transport);
  transport.send = async (message, sendOptions) => {
    await send(message, sendOptions);
    const answered = isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message);
    if (answered && message.id !== undefined) settle(message.id);
  };
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    deliver?.(message, extra);
    const id = cancelledIdOf(message);
    if (id !== undefined && waiting.has(id)) settle(id);
  };
}

/**
 * The request a message cancels, exactly when the SDK's Protocol acts on it: a notification (no id; one
 * with an id is a request the SDK answers -32601), valid against the SDK's own schema (a reason that is
 * not a string fails it), naming a request id the SDK does not skip (it ignores a falsy one: 0, "").
 * Counting any other as a cancel would end the response without an answer the SDK still sends.
 */
function cancelledIdOf(message: unknown): RequestId | undefined {
  if (isJSONRPCRequest(message) || !isJSONRPCNotification(message)) return undefined;
  const parsed = CancelledNotificationSchema.safeParse(message);
  if (!parsed.success) return undefined;
  const id = parsed.data.params.requestId;
  return id ? id : undefined;
}

function sendJson(res: ServerResponse, status: number, body: Record<string, unknown>): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function isLoopbackAuthority(authority: string): boolean {
  const match = /^(\[::1\]|localhost|127\.0\.0\.1)(?::\d{1,5})?$/.exec(authority);
  return match !== null;
}

function isLoopbackOrigin(origin: string): boolean {
  try {
    const url = new URL(origin);
    return (url.protocol === 'http:' || url.protocol === 'https:') && isLoopbackAuthority(url.host);
  } catch {
    return false;
  }
}

function sendJsonRpcError(res: ServerResponse, status: number, code: number, message: string): void {
  res
    .writeHead(status, { 'content-type': 'application/json' })
    .end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

async function readBody(req: IncomingMessage, limit: number): Promise<string | 'too-large' | 'aborted'> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > limit) return 'too-large';
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) return 'too-large';
      chunks.push(chunk);
    }
  } catch (error) {
    if (req.destroyed) return 'aborted';
    throw error;
  }
  return Buffer.concat(chunks).toString('utf8');
}
