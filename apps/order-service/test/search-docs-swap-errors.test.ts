import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { registerTools } from '@toolgate/core';
import {
  connectTestClient,
  expectFailure,
  type LogEntry,
  recordingLogger,
  type TestClient,
} from '@toolgate/core/testing';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { searchDocsTool } from '../src/tools/search-docs.js';

// Someone who can write in the docs root swaps, between the check and the open, a folder for a
// regular file (open fails with ENOTDIR) or a document for a Unix socket (open fails with ENXIO).
// Either must cost that one document, never the whole call as an internal error.
// Each writer holds every state for a few syscalls, so the window between lstat and open often
// spans a change of state.
const FOLDER_TO_FILE = `
const { renameSync, statSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const [root] = process.argv.slice(1);
writeFileSync(join(root, 'plain'), 'not a folder');
for (;;) {
  renameSync(join(root, 'folder'), join(root, 'folder.real'));
  renameSync(join(root, 'plain'), join(root, 'folder'));
  statSync(join(root, 'folder'));
  renameSync(join(root, 'folder'), join(root, 'plain'));
  renameSync(join(root, 'folder.real'), join(root, 'folder'));
  statSync(join(root, 'folder'));
}`;

const DOCUMENT_TO_SOCKET = `
const { renameSync, writeFileSync } = require('node:fs');
const { createServer } = require('node:net');
const { join } = require('node:path');
const [root] = process.argv.slice(1);
createServer().listen(join(root, 'socket'), () => {
  writeFileSync(join(root, 'swap.tmp'), 'refund inside\\n');
  for (;;) {
    renameSync(join(root, 'swap.tmp'), join(root, 'swap.md'));
    writeFileSync(join(root, 'swap.tmp'), 'refund inside\\n');
    // The document is replaced by the socket in one step, so an lstat that saw the file can be
    // followed by an open that meets the socket.
    renameSync(join(root, 'socket'), join(root, 'swap.md'));
    renameSync(join(root, 'swap.md'), join(root, 'socket'));
  }
});`;

const base = realpathSync(mkdtempSync(join(tmpdir(), 'docs-swap-errors-')));
let writer: ChildProcess | undefined;
let client: TestClient | undefined;

afterEach(async () => {
  writer?.kill('SIGKILL');
  await client?.close();
  writer = undefined;
  client = undefined;
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

async function serveRoot(root: string, entries: LogEntry[]): Promise<TestClient> {
  const logger = recordingLogger(entries);
  const server = new McpServer({ name: 'docs-swap-errors', version: '1.0.0' });
  registerTools(server, [searchDocsTool({ root, logger })], { logger });
  return connectTestClient(server);
}

/**
 * Calls from 16 clients at once (a busy thread pool widens the window between lstat and open) until
 * the log shows the swap was caught `wanted` times or an internal error came back, at most `maxCalls`.
 */
async function callWhileSwapping(
  docs: TestClient,
  args: Record<string, unknown>,
  caught: () => number,
  wanted: number,
  maxCalls: number,
): Promise<{ answers: CallToolResult[]; internal: CallToolResult[] }> {
  const answers: CallToolResult[] = [];
  const internal: CallToolResult[] = [];
  const worker = async (): Promise<void> => {
    while (caught() + internal.length < wanted && answers.length < maxCalls) {
      const result = (await docs.callTool('search_docs', args)) as CallToolResult;
      answers.push(result);
      if (result.isError && expectFailure(result).error === 'internal') internal.push(result);
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  return { answers, internal };
}

describe('search_docs when an open fails because of a swap', () => {
  it('skips a document whose folder became a file mid-open and answers from the other documents', async () => {
    const root = join(base, 'folder-root');
    mkdirSync(join(root, 'folder'), { recursive: true });
    writeFileSync(join(root, 'refunds.md'), 'refund within 30 days\n');
    for (let index = 0; index < 40; index += 1) {
      writeFileSync(join(root, 'folder', `doc-${index}.md`), `refund rule ${index}\n`);
    }
    const entries: LogEntry[] = [];
    client = await serveRoot(root, entries);
    writer = spawn(process.execPath, ['-e', FOLDER_TO_FILE, root], { stdio: 'ignore' });
    const caught = () =>
      entries.filter(
        (entry) => entry.fields.detail === 'a folder on the path became a file or a symlink while opening',
      ).length;

    const { answers, internal } = await callWhileSwapping(
      client,
      { query: 'refund within', top_k: 5 },
      caught,
      2,
      30_000,
    );

    expect(writer.exitCode).toBe(null);
    expect(internal).toEqual([]);
    // At least once, or it proved nothing (how often the swap lands in the window depends on load).
    expect(caught()).toBeGreaterThanOrEqual(1);
    for (const answer of answers) {
      expect(answer.isError).toBeUndefined();
      const { items } = answer.structuredContent as { items: unknown[] };
      expect(items[0]).toEqual({ file: 'refunds.md', line: 1, text: 'refund within 30 days', score: 2 });
    }
  }, 180_000);

  it('refuses a named document that became a socket mid-open like any other non-document', async () => {
    const root = join(base, 'socket-root');
    mkdirSync(root);
    writeFileSync(join(root, 'swap.md'), 'refund inside\n');
    const entries: LogEntry[] = [];
    client = await serveRoot(root, entries);
    writer = spawn(process.execPath, ['-e', DOCUMENT_TO_SOCKET, root], { stdio: 'ignore' });
    const caught = () =>
      entries.filter((entry) => entry.fields.detail === 'a socket or device was swapped in while opening')
        .length;

    const { answers, internal } = await callWhileSwapping(
      client,
      { query: 'refund', path: 'swap.md' },
      caught,
      2,
      60_000,
    );

    expect(writer.exitCode).toBe(null);
    expect(internal).toEqual([]);
    // At least once, or it proved nothing (how often the swap lands in the window depends on load).
    expect(caught()).toBeGreaterThanOrEqual(1);
    for (const answer of answers) {
      if (answer.isError) {
        expect(expectFailure(answer).message).toBe('That path is not a document under the docs root.');
      } else {
        // Found as a socket by the listing (no document), or read as the regular file.
        expect([[], [{ file: 'swap.md', line: 1, text: 'refund inside', score: 1 }]]).toContainEqual(
          (answer.structuredContent as { items: unknown[] }).items,
        );
      }
    }
  }, 180_000);
});
