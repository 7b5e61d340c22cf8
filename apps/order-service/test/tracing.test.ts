import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describe, expect, it } from 'vitest';

const MAIN = join(resolve(dirname(fileURLToPath(import.meta.url)), '..'), 'dist', 'main.js');

describe('tracing', () => {
  it('with OTEL_EXPORTER_OTLP_ENDPOINT set, each tools/call span reaches the collector', async () => {
    const received: Array<{ path: string; type: string | undefined; body: Buffer }> = [];
    const collector = createServer((req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        received.push({
          path: req.url ?? '',
          type: req.headers['content-type'],
          body: Buffer.concat(chunks),
        });
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      });
    });
    await new Promise<void>((done) => collector.listen(0, '127.0.0.1', done));
    const { port } = collector.address() as AddressInfo;
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [MAIN],
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      },
      stderr: 'ignore',
    });
    const client = new Client({ name: 'tracing-test', version: '1' });
    try {
      await client.connect(transport, { timeout: 120_000 });
      await client.callTool({ name: 'search_docs', arguments: { query: 'refund' } });
    } finally {
      await client.close(); // stdin closes: the server flushes its batch processor before exiting
    }
    const deadline = Date.now() + 20_000;
    while (received.length === 0 && Date.now() < deadline) await new Promise((done) => setTimeout(done, 100));
    collector.close();
    expect(received.map((request) => request.path)).toContain('/v1/traces');
    const body = Buffer.concat(received.map((request) => request.body));
    expect(body.includes('tools/call search_docs')).toBe(true);
    expect(body.includes('order-service')).toBe(true);
  }, 120_000);

  it("over HTTP a client's traceparent becomes a span link, never the parent: the tenant picks neither trace nor sampling", async () => {
    const received: Buffer[] = [];
    const collector = createServer((req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        received.push(Buffer.concat(chunks));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((done) => collector.listen(0, '127.0.0.1', done));
    const { port } = collector.address() as AddressInfo;
    const child = spawn(process.execPath, [MAIN, '--http', '--insecure-no-auth', '--port', '0'], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      },
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
    const tenantTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const tenantSpan = '00f067aa0ba902b7';
    try {
      const deadline = Date.now() + 60_000;
      while (!stderr.includes('"listening"') && Date.now() < deadline) {
        await new Promise((done) => setTimeout(done, 50));
      }
      const url = /"url":"([^"]+)"/.exec(stderr)?.[1];
      expect(url, stderr).toBeDefined();
      const client = new Client({ name: 'tracing-http-test', version: '1' });
      await client.connect(new StreamableHTTPClientTransport(new URL(url!)));
      const result = await client.callTool({
        name: 'search_docs',
        arguments: { query: 'refund' },
        _meta: { traceparent: `00-${tenantTrace}-${tenantSpan}-01` },
      });
      expect(result.isError).toBeFalsy();
      await client.close();
    } finally {
      child.kill('SIGTERM'); // the app's shutdown flushes the batch processor
    }
    expect(await exited).toBe(0);
    collector.close();
    // OTLP/JSON: every span of every export.
    const spans = received.flatMap((body) =>
      (JSON.parse(body.toString('utf8')) as OtlpExport).resourceSpans.flatMap((resource) =>
        resource.scopeSpans.flatMap((scope) => scope.spans),
      ),
    );
    const tool = spans.find((span) => span.name === 'tools/call search_docs');
    expect(tool, JSON.stringify(spans.map((span) => span.name))).toBeDefined();
    expect(tool!.traceId).not.toBe(tenantTrace);
    expect(tool!.parentSpanId ?? '').not.toBe(tenantSpan);
    expect(tool!.links).toEqual([expect.objectContaining({ traceId: tenantTrace, spanId: tenantSpan })]);
  }, 120_000);
});

interface OtlpExport {
  resourceSpans: Array<{
    scopeSpans: Array<{
      spans: Array<{
        name: string;
        traceId: string;
        parentSpanId?: string;
        links?: Array<{ traceId: string; spanId: string }>;
      }>;
    }>;
  }>;
}
