import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createSilentLogger, registerTools } from '@toolgate/core';
import { connectTestClient, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { searchDocsTool } from '../src/tools/search-docs.js';

// A writer process swaps, as fast as it can, a link between an inside and an outside document and a
// folder between a real one and a link out of the root, while calls run through a real client.
const WRITER = `
const { renameSync, symlinkSync, unlinkSync } = require('node:fs');
const { join } = require('node:path');
const [root, outside] = process.argv.slice(1);
for (let round = 0; ; round += 1) {
  symlinkSync(round % 2 ? join(outside, 'secret.md') : 'refunds.md', join(root, 'swap.tmp'));
  renameSync(join(root, 'swap.tmp'), join(root, 'swap.md'));
  renameSync(join(root, 'folder'), join(root, 'folder.real'));
  symlinkSync(outside, join(root, 'folder'));
  unlinkSync(join(root, 'folder'));
  renameSync(join(root, 'folder.real'), join(root, 'folder'));
}`;

const base = realpathSync(mkdtempSync(join(tmpdir(), 'docs-race-')));
const root = join(base, 'root');
const outside = join(base, 'outside');
let writer: ChildProcess;
let client: TestClient;

beforeAll(async () => {
  mkdirSync(join(root, 'folder'), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(root, 'refunds.md'), 'refund within 30 days\n');
  writeFileSync(join(root, 'folder', 'secret.md'), 'refund policy of the folder\n');
  writeFileSync(join(outside, 'secret.md'), 'refund secret: the admin password is hunter2\n');
  symlinkSync('refunds.md', join(root, 'swap.md'));
  const server = new McpServer({ name: 'docs-race', version: '1.0.0' });
  registerTools(server, [searchDocsTool({ root, logger: createSilentLogger() })], {
    logger: createSilentLogger(),
  });
  client = await connectTestClient(server);
  writer = spawn(process.execPath, ['-e', WRITER, root, outside], { stdio: 'ignore' });
});

afterAll(async () => {
  writer.kill('SIGKILL');
  await client.close();
  rmSync(base, { recursive: true, force: true });
});

describe('search_docs under a swap race', () => {
  it('returns nothing from outside the root in 4 seconds of calls while a writer swaps links', async () => {
    const calls = { total: 0, withHits: 0, leaked: 0 };
    const until = Date.now() + 4000;
    const worker = async (path: string | undefined): Promise<void> => {
      while (Date.now() < until) {
        const result = await client.callTool('search_docs', {
          query: 'refund secret password',
          top_k: 5,
          ...(path === undefined ? {} : { path }),
        });
        calls.total += 1;
        const text = JSON.stringify(result);
        if (text.includes('hunter2')) calls.leaked += 1;
        if (!result.isError && (result.structuredContent as { items: unknown[] }).items.length > 0) {
          calls.withHits += 1;
        }
      }
    };
    await Promise.all([worker('swap.md'), worker('folder/secret.md'), worker('folder'), worker(undefined)]);
    expect(writer.exitCode).toBe(null);
    expect(calls.leaked).toBe(0);
    expect(calls.withHits).toBeGreaterThan(0);
    expect(calls.total).toBeGreaterThan(100);
  }, 20_000);
});
