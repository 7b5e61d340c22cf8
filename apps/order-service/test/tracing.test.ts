import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
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
});
