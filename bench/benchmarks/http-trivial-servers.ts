// The server side of the trivial-tool HTTP benchmark, in its own process so that autocannon does not
// share its event loop (and, with BENCH_TRIVIAL_ONLY, one server per process). Three servers answer the same `echo { q }` tool over stateless Streamable HTTP
// (a fresh McpServer and transport per POST): the bare SDK, core with the full stack, and FastMCP-TS.
// Argument: `sdk` registers a real OTel SDK (BasicTracerProvider + BatchSpanProcessor, exporter
// discards) before anything is served. Prints one JSON line with the URLs, then serves until killed.

import { rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { context } from '@opentelemetry/api';
import { createAudit, createFileSink } from '@toolgate/audit';
import { createAuthz } from '@toolgate/authz';
import { createCircuitBreaker } from '@toolgate/circuit-breaker';
import { createConfirm } from '@toolgate/confirm';
import { createSilentLogger, defineTool, ok, registerTools } from '@toolgate/core';
import { createIdempotency } from '@toolgate/idempotency';
import { createOtel } from '@toolgate/otel';
import { createRateLimit } from '@toolgate/rate-limit';
import { createRedactErrors } from '@toolgate/redact-errors';
import { createRepeatGuard } from '@toolgate/repeat-guard';
import { FastMCP } from 'fastmcp';
import * as z from 'zod';
import { registerOtelSdk } from '../src/otel-sdk.js';

if (process.argv[2] === 'sdk') {
  registerOtelSdk();
  // Any instrumented server enters a context per request (an HTTP instrumentation does), which turns on
  // AsyncLocalStorage's promise hooks for the whole process (Node 20); a bare server alone in its process
  // would otherwise never pay them. Entered once here, so every server's process pays them alike.
  context.with(context.active(), () => undefined);
}

const logger = createSilentLogger();
const input = { q: z.string().max(200) };
const dir = await mkdtemp(join(tmpdir(), 'toolgate-bench-http-trivial-'));

// Development only (profiling, http-quick.ts): BENCH_TRIVIAL_SKIP=1,5 leaves those positions out.
const skipped = new Set((process.env.BENCH_TRIVIAL_SKIP ?? '').split(',').filter(Boolean).map(Number));
// The full stack in DESIGN.md's order, built once for the process (state lives in the middleware, not
// in the per-request McpServer).
const middleware = [
  createOtel({ transport: 'tcp', logger }),
  createAudit({ sink: createFileSink(join(dir, 'audit.jsonl')), logger }),
  createRedactErrors({ logger }),
  createAuthz({ require: {} }),
  // A limit no bench reaches: every call is counted, none refused.
  createRateLimit({ limits: [{ per: 'caller', points: 1_000_000_000, duration: 60 }] }),
  createRepeatGuard(),
  createIdempotency({}),
  createConfirm({ secret: 'bench-secret-0123456789abcdef0123456789abcdef' }),
  // One load generator (one anonymous caller) on 32 connections: a capacity whose caller share (half)
  // is above the connections, so the rows time the breaker's work, not its per-caller share refusing.
  createCircuitBreaker({ logger, capacity: 128 }),
].filter((_, index) => !skipped.has(index));
const echo = defineTool({ name: 'echo', description: 'Echo.', input, handler: ({ q }) => ok({ q }) });

function bareMcp(): McpServer {
  const mcp = new McpServer({ name: 'bare', version: '1.0.0' });
  mcp.registerTool('echo', { description: 'Echo.', inputSchema: input }, async ({ q }) => {
    const data = { ok: true, q };
    return { content: [{ type: 'text', text: JSON.stringify(data) }], structuredContent: data };
  });
  return mcp;
}

function toolgateMcp(): McpServer {
  const mcp = new McpServer({ name: 'toolgate', version: '1.0.0' });
  registerTools(mcp, [echo], { middleware, logger });
  return mcp;
}

/** Stateless Streamable HTTP: one McpServer and transport per POST, both closed with the response. */
async function serve(createMcp: () => McpServer): Promise<string> {
  const handle = (req: IncomingMessage, res: ServerResponse, body: unknown): void => {
    const mcp = createMcp();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    mcp
      .connect(transport)
      .then(() => transport.handleRequest(req, res, body))
      .catch(() => {
        if (!res.headersSent) res.writeHead(500).end();
      });
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => handle(req, res, JSON.parse(Buffer.concat(chunks).toString('utf8'))));
  });
  await new Promise<void>((resolveListen) => server.listen(0, '127.0.0.1', resolveListen));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
}

async function serveFastMcp(): Promise<string> {
  const quiet = { debug: () => {}, error: () => {}, info: () => {}, log: () => {}, warn: () => {} };
  const fast = new FastMCP({ name: 'fastmcp', version: '1.0.0', logger: quiet });
  fast.addTool({
    name: 'echo',
    description: 'Echo.',
    parameters: z.object(input),
    execute: async ({ q }) => JSON.stringify({ ok: true, q }),
  });
  // Port 0 is not reported back by FastMCP, so take a free one first.
  const probe = createServer();
  await new Promise<void>((resolveListen) => probe.listen(0, '127.0.0.1', resolveListen));
  const port = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolveClose) => probe.close(() => resolveClose()));
  await fast.start({
    transportType: 'httpStream',
    httpStream: { port, host: '127.0.0.1', endpoint: '/mcp', stateless: true },
  });
  return `http://127.0.0.1:${port}/mcp`;
}

// BENCH_TRIVIAL_ONLY=bare|toolgate|fastmcp serves that one server alone (the bench runs each server in a
// process of its own, as it is deployed); unset, all three share this process (development scripts).
const only = process.env.BENCH_TRIVIAL_ONLY || undefined;
const urls = {
  bare: only === undefined || only === 'bare' ? await serve(bareMcp) : '',
  toolgate: only === undefined || only === 'toolgate' ? await serve(toolgateMcp) : '',
  fastmcp: only === undefined || only === 'fastmcp' ? await serveFastMcp() : '',
};
process.stdout.write(`${JSON.stringify(urls)}\n`);
// The audit file grows by tens of MB a run: removed on the way out.
process.once('SIGTERM', () => {
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
});
