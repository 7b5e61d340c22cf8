import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createSilentLogger, registerTools } from '@toolgate/core';
import { connectTestClient, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { searchDocsTool } from '../src/tools/search-docs.js';

// A docs root an operator let grow: many documents and a deep folder chain. One call must read a
// bounded number of documents and bytes, whatever the model asks.
const base = realpathSync(mkdtempSync(join(tmpdir(), 'docs-limits-')));
const root = join(base, 'root');
let client: TestClient;

beforeAll(async () => {
  mkdirSync(root);
  for (let index = 0; index < 30; index += 1) {
    writeFileSync(join(root, `doc-${String(index).padStart(2, '0')}.md`), `refund rule number ${index}\n`);
  }
  // A folder of other files: the walk looks at 25 entries per document it may read, then stops.
  mkdirSync(join(root, 'zz-assets'));
  for (let index = 0; index < 300; index += 1) writeFileSync(join(root, 'zz-assets', `img-${index}.png`), '');
  writeFileSync(join(root, 'zz-assets', 'zzz-last.md'), 'refund at the very end\n');
  let deep = root;
  for (let level = 0; level < 40; level += 1) deep = join(deep, 'd');
  mkdirSync(deep, { recursive: true });
  writeFileSync(join(deep, 'bottom.md'), 'refund from the bottom\n');
  const server = new McpServer({ name: 'docs-limits', version: '1.0.0' });
  registerTools(server, [searchDocsTool({ root, logger: createSilentLogger(), maxFiles: 10, maxDepth: 8 })], {
    logger: createSilentLogger(),
  });
  client = await connectTestClient(server);
});

afterAll(async () => {
  await client.close();
  rmSync(base, { recursive: true, force: true });
});

describe('search_docs limits per call', () => {
  it('reads at most maxFiles documents and says the search stopped there', async () => {
    const result = await client.callTool('search_docs', { query: 'refund', top_k: 5 });
    expect(result.isError).not.toBe(true);
    const data = result.structuredContent as {
      items: { file: string }[];
      total: number;
      note?: string;
    };
    // Ten documents read, one matching line each.
    expect(data.total).toBe(10);
    expect(data.note).toMatch(/first 10 documents/);
    expect(data.note).toMatch(/path/);
  });

  it('stops looking after 25 folder entries per document it may read, and says so', async () => {
    const result = await client.callTool('search_docs', { query: 'refund', path: 'zz-assets' });
    const data = result.structuredContent as { total: number; note?: string };
    expect(data.total).toBe(0);
    expect(data.note).toMatch(/Stopped after looking at 250 folder entries; give a path/);
  });

  it('does not descend past maxDepth folders', async () => {
    const result = await client.callTool('search_docs', { query: 'bottom', path: 'd' });
    const data = result.structuredContent as { items: unknown[]; total: number };
    expect(data.total).toBe(0);
  });

  it('refuses limits that are not positive integers when the tool is defined', () => {
    expect(() => searchDocsTool({ root, maxFiles: 0 })).toThrow(/maxFiles/);
    expect(() => searchDocsTool({ root, maxDepth: 1.5 })).toThrow(/maxDepth/);
  });
});
