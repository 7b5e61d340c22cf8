import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createSilentLogger, registerTools } from '@toolgate/core';
import { connectTestClient, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SEARCH_DOCS_MAX_TEXT, searchDocsTool } from '../src/tools/search-docs.js';

// Documents under the 1 MiB cap whose lines are huge: a markdown image inlined as base64, and a
// line of control bytes (each becomes a 6-character JSON escape, twice: in structuredContent and in
// the text content). Returned whole, one such line makes a tools/call answer of over 10 MiB, which
// the SDK's stdio client refuses by closing the connection (and the server with it).
const base = realpathSync(mkdtempSync(join(tmpdir(), 'docs-long-lines-')));
const root = join(base, 'root');
const image = 'iVBORw0KGgo'.padEnd(700_000, 'AAAA');
let client: TestClient;

beforeAll(async () => {
  mkdirSync(root);
  writeFileSync(join(root, 'logo.md'), `# Brand\n\n![refund flow](data:image/png;base64,${image})\n`);
  writeFileSync(join(root, 'binary.md'), Buffer.concat([Buffer.from('refund '), Buffer.alloc(1_000_000, 1)]));
  writeFileSync(join(root, 'emoji.md'), `glad ${'\u{1F600}'.repeat(200)}\n`);
  writeFileSync(join(root, 'tail.md'), `${'filler '.repeat(100_000)}the courier deadline is friday\n`);
  const server = new McpServer({ name: 'docs-long-lines', version: '1.0.0' });
  registerTools(server, [searchDocsTool({ root, logger: createSilentLogger() })], {
    logger: createSilentLogger(),
  });
  client = await connectTestClient(server);
});

afterAll(async () => {
  await client.close();
  rmSync(base, { recursive: true, force: true });
});

describe('search_docs with lines longer than an answer should carry', () => {
  it('keeps an answer over megabyte-long matching lines small', async () => {
    const result = await client.callTool('search_docs', { query: 'refund', top_k: 5 });
    const { items } = result.structuredContent as { items: { file: string; text: string }[] };
    expect(items.map((item) => item.file)).toEqual(['binary.md', 'logo.md']);
    expect(JSON.stringify(result).length).toBeLessThan(8 * 1024);
  });

  it('cuts a long line to the stretch around its first match and marks the cut', async () => {
    const flow = await client.callTool('search_docs', { query: 'refund flow', path: 'logo.md' });
    const line = `![refund flow](data:image/png;base64,${image})`;
    expect(flow.structuredContent).toMatchObject({
      items: [{ file: 'logo.md', line: 3, text: `${line.slice(0, SEARCH_DOCS_MAX_TEXT)}…`, score: 2 }],
    });
    const tail = await client.callTool('search_docs', { query: 'deadline', path: 'tail.md' });
    const text = `${'filler '.repeat(100_000)}the courier deadline is friday`;
    expect(tail.structuredContent).toMatchObject({
      items: [{ file: 'tail.md', line: 1, text: `…${text.slice(-SEARCH_DOCS_MAX_TEXT)}`, score: 1 }],
    });
  });

  it('never cuts a character outside the Basic Multilingual Plane in half', async () => {
    const result = await client.callTool('search_docs', { query: 'glad', path: 'emoji.md' });
    // Each emoji is two UTF-16 units: 240 units end inside the 118th (5 + 2 × 117.5), which is left out.
    expect(result.structuredContent).toMatchObject({
      items: [{ file: 'emoji.md', line: 1, text: `glad ${'\u{1F600}'.repeat(117)}…`, score: 1 }],
    });
  });
});
