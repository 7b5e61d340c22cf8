import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createSilentLogger } from '@toolgate/core';
import { describe, expect, it } from 'vitest';
import { startHttpServer } from '../src/http.js';
import { runSmoke } from '../src/smoke.js';
import { startService } from './harness.js';

const MAIN = join(resolve(dirname(fileURLToPath(import.meta.url)), '..'), 'dist', 'main.js');

describe('smoke', () => {
  it('passes against the built server over stdio', async () => {
    const rows = await runSmoke(
      new StdioClientTransport({ command: process.execPath, args: [MAIN], stderr: 'ignore' }),
    );
    expect(rows.filter((row) => !row.passed)).toEqual([]);
    expect(rows.map((row) => row.check)).toContain('call render_invoice');
  }, 120_000);

  it('passes over HTTP (no auth, loopback)', async () => {
    // As main does for --insecure-no-auth: no token, so every tool is open (confirmation still asks).
    const running = await startService({ transport: 'tcp', openAccess: true });
    const http = await startHttpServer({
      port: 0,
      verifier: undefined,
      createServer: () => running.service.createServer(),
      logger: createSilentLogger(),
    });
    try {
      const rows = await runSmoke(new StreamableHTTPClientTransport(new URL(http.url)));
      expect(rows.filter((row) => !row.passed)).toEqual([]);
      expect(rows).toHaveLength(16);
    } finally {
      await http.close();
      await running.stop();
    }
  }, 120_000);
});
