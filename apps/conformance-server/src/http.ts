import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '@toolgate/core';

export interface SessionHttpOptions {
  /** Port on 127.0.0.1; 0 picks a free one. */
  port: number;
  /** A new McpServer for each session. */
  createServer: () => McpServer;
  logger: Logger;
  /** Sessions open at once; an initialize beyond it gets 503. @default 1000 */
  maxSessions?: number;
  /** A session without a request for this long is closed (clients often leave without DELETE). @default 600000 */
  idleMs?: number;
  /** Largest request body read. @default 1048576 (1 MiB) */
  maxBodyBytes?: number;
}

export interface RunningSessionHttp {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  readonly port: number;
  /** Sessions open now. */
  readonly sessions: number;
  /** Stops listening, closes every session and connection. */
  close(): Promise<void>;
}

interface Session {
  readonly transport: StreamableHTTPServerTransport;
  lastActive: number;
}

const PATH = '/mcp';

/**
 * Streamable HTTP with sessions on 127.0.0.1: one transport and one McpServer per session, kept in a
 * map by session id, so a tool's requests to the client (elicitation, sampling) and the client's
 * answers (a new POST) meet the same server. Host and Origin are checked first (DNS rebinding): only
 * `127.0.0.1:<port>` and `localhost:<port>`.
 */
export async function startSessionHttp(options: SessionHttpOptions): Promise<RunningSessionHttp> {
  const { logger } = options;
  const maxSessions = options.maxSessions ?? 1000;
  const idleMs = options.idleMs ?? 600_000;
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const sessions = new Map<string, Session>();
  const allowedHosts = new Set<string>();

  const http = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      logger.error({ err: error, method: req.method }, 'mcp http request failed');
      if (!res.headersSent) sendError(res, 500, -32603, 'Internal server error');
      else res.end();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (new URL(req.url ?? '/', 'http://placeholder').pathname !== PATH) {
      sendError(res, 404, -32000, 'Not found');
      return;
    }
    const host = (req.headers.host ?? '').toLowerCase();
    if (!allowedHosts.has(host)) {
      sendError(res, 403, -32000, 'Forbidden: Host header not allowed');
      return;
    }
    const origin = req.headers.origin?.toLowerCase();
    if (origin !== undefined && !allowedHosts.has(originAuthority(origin))) {
      sendError(res, 403, -32000, 'Forbidden: Origin not allowed');
      return;
    }
    const sessionId = req.headers['mcp-session-id'];
    if (typeof sessionId === 'string') {
      const session = sessions.get(sessionId);
      if (!session) {
        sendError(res, 404, -32001, 'Session not found');
        return;
      }
      session.lastActive = Date.now();
      if (req.method === 'POST') {
        const body = await readJson(req, res, maxBodyBytes);
        if (body === undefined) return;
        await session.transport.handleRequest(req, res, body);
      } else {
        // GET opens the standalone SSE stream, DELETE ends the session; the transport answers both.
        await session.transport.handleRequest(req, res);
      }
      return;
    }
    if (req.method !== 'POST') {
      sendError(res, 400, -32000, 'Bad Request: an Mcp-Session-Id header is required');
      return;
    }
    const body = await readJson(req, res, maxBodyBytes);
    if (body === undefined) return;
    if (!isInitializeRequest(body)) {
      sendError(res, 400, -32000, 'Bad Request: no session; start with initialize');
      return;
    }
    if (sessions.size >= maxSessions) {
      sendError(res, 503, -32000, 'Too many open sessions');
      return;
    }
    await openSession(req, res, body);
  }

  async function openSession(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const server = options.createServer();
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      // Stored when the SDK has assigned the id, before the response leaves, so the client's next
      // request finds it.
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, lastActive: Date.now() });
      },
    });
    // connect() chains the server's own cleanup after this handler.
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
    // An initialize the transport refused leaves no session behind.
    if (transport.sessionId === undefined) await transport.close();
  }

  const sweeper = setInterval(
    () => {
      const cutoff = Date.now() - idleMs;
      for (const session of sessions.values()) {
        if (session.lastActive < cutoff) void session.transport.close();
      }
    },
    Math.min(idleMs, 60_000),
  );
  sweeper.unref();

  await new Promise<void>((resolveListen, rejectListen) => {
    http.once('error', rejectListen);
    http.listen(options.port, '127.0.0.1', () => {
      http.off('error', rejectListen);
      resolveListen();
    });
  });
  const { port } = http.address() as AddressInfo;
  allowedHosts.add(`127.0.0.1:${port}`);
  allowedHosts.add(`localhost:${port}`);
  return {
    url: `http://127.0.0.1:${port}${PATH}`,
    port,
    get sessions() {
      return sessions.size;
    },
    async close() {
      clearInterval(sweeper);
      const closed = new Promise<void>((resolveClose) => http.close(() => resolveClose()));
      await Promise.all([...sessions.values()].map((session) => session.transport.close()));
      http.closeAllConnections();
      await closed;
    },
  };
}

/** `host:port` of an Origin (default ports spelled out), or '' when it is not an http(s) URL. */
function originAuthority(origin: string): string {
  try {
    const url = new URL(origin);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return '';
    return `${url.hostname}:${url.port || (url.protocol === 'https:' ? '443' : '80')}`;
  } catch {
    return '';
  }
}

async function readJson(req: IncomingMessage, res: ServerResponse, limit: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      sendError(res, 413, -32600, `Request body larger than ${limit} bytes`);
      return undefined;
    }
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    sendError(res, 400, -32700, 'Parse error: the body is not JSON');
    return undefined;
  }
}

function sendError(res: ServerResponse, status: number, code: number, message: string): void {
  res
    .writeHead(status, { 'content-type': 'application/json' })
    .end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}
