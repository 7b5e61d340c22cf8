import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { registerTools } from '@toolgate/core';
import { connectTestClient, type LogEntry, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { searchDocsTool } from '../src/tools/search-docs.js';

// Opening a device can have side effects (a watchdog armed, a serial line's DTR raised), so nothing
// outside the root may ever be opened, not even to be refused afterwards. The attacker swaps a folder
// of the root for a link to a folder outside it, where the document's name is a FIFO; a process
// waiting to write to that FIFO is released the moment anyone opens it for reading.
const SWAPPER = `
const { renameSync, symlinkSync, statSync, unlinkSync } = require('node:fs');
const { join } = require('node:path');
const [root, outside] = process.argv.slice(1);
for (;;) {
  renameSync(join(root, 'folder'), join(root, 'folder.real'));
  symlinkSync(outside, join(root, 'folder'));
  statSync(join(root, 'folder'));
  unlinkSync(join(root, 'folder'));
  renameSync(join(root, 'folder.real'), join(root, 'folder'));
  statSync(join(root, 'folder'));
}`;
const WAITER = `
const { openSync } = require('node:fs');
openSync(process.argv[1], 'w');
process.exit(7);`;

const base = realpathSync(mkdtempSync(join(tmpdir(), 'docs-fifo-outside-')));
const root = join(base, 'root');
const outside = join(base, 'outside');
const entries: LogEntry[] = [];
let swapper: ChildProcess;
let waiter: ChildProcess;
let client: TestClient;

beforeAll(async () => {
  mkdirSync(join(root, 'folder'), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(root, 'folder', 'doc.md'), 'refund inside\n');
  execFileSync('mkfifo', [join(outside, 'doc.md')]);
  const logger = recordingLogger(entries);
  const server = new McpServer({ name: 'docs-fifo-outside', version: '1.0.0' });
  registerTools(server, [searchDocsTool({ root, logger })], { logger });
  client = await connectTestClient(server);
  waiter = spawn(process.execPath, ['-e', WAITER, join(outside, 'doc.md')], { stdio: 'ignore' });
  swapper = spawn(process.execPath, ['-e', SWAPPER, root, outside], { stdio: 'ignore' });
});

afterAll(async () => {
  swapper.kill('SIGKILL');
  waiter.kill('SIGKILL');
  await client.close();
  rmSync(base, { recursive: true, force: true });
});

describe('search_docs while a folder is swapped for a link out of the root', () => {
  it('never opens the FIFO outside the root, not even to refuse it', async () => {
    // Calls until the swap was caught at the open 5 times (it happened, and was refused), or the
    // waiter was released (the server opened the FIFO), at most 40,000 calls. How often the swap lands
    // between the check and the open depends on the machine's load (3 in 5000 calls in one CI run): the
    // test needs it to have happened at least once, or it proved nothing.
    let calls = 0;
    const caught = () =>
      entries.filter((entry) => entry.level === 'warn' && entry.fields.reason === 'changed').length;
    const worker = async (): Promise<void> => {
      while (waiter.exitCode === null && caught() < 5 && calls < 40_000) {
        const result = await client.callTool('search_docs', { query: 'refund', path: 'folder/doc.md' });
        calls += 1;
        expect(JSON.stringify(result)).not.toContain('internal');
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    expect(swapper.exitCode).toBe(null);
    expect(waiter.exitCode).toBe(null);
    expect(caught()).toBeGreaterThanOrEqual(1);
  }, 300_000);
});
