import { chmodSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHILD_USER,
  CHILD_USER_NAME,
  type ChildClient,
  childCannotRun,
  connectAsChildUser,
  reportCannotRun,
} from './as-user.js';

// A docs root where the server's user may not read everything: one document of mode 000, and a
// folder it may search but not list (mode 0711 under root's ownership, as an operator sets it for a
// folder other users may reach files in). The server runs as an unprivileged user (see as-user.ts).
const base = realpathSync(mkdtempSync(join(tmpdir(), 'docs-permissions-')));
const root = join(base, 'root');
const guides = join(root, 'guides');
const more = join(guides, 'more');
// As root the child is another user, to whom 0711 grants search only; to the owner it grants all,
// so when the tests run unprivileged (the child is the owner) the folders are 0111.
const SEARCH_ONLY = CHILD_USER ? 0o711 : 0o111;

mkdirSync(more, { recursive: true });
writeFileSync(join(root, 'refunds.md'), 'refund within 30 days\n');
writeFileSync(join(root, 'locked.md'), 'refund secret of the locked document\n');
writeFileSync(join(guides, 'shipping.md'), 'refund of shipping costs\n');
writeFileSync(join(more, 'rules.md'), 'refund rules two folders down\n');
chmodSync(join(root, 'locked.md'), 0o000);
chmodSync(more, SEARCH_ONLY);
chmodSync(guides, SEARCH_ONLY);
// mkdtemp makes its folder 0700: the child must reach the root through it.
chmodSync(base, 0o755);

const cannotRun = childCannotRun({
  may: [join(root, 'refunds.md'), join(guides, 'shipping.md'), join(more, 'rules.md')],
  mayNot: [join(root, 'locked.md')],
  mayNotList: [guides, more],
});

let server: ChildClient | undefined;
afterAll(async () => {
  await server?.close();
  // Unprivileged, the owner needs write permission back to remove what is inside.
  chmodSync(guides, 0o755);
  chmodSync(more, 0o755);
  rmSync(base, { recursive: true, force: true });
});

if (cannotRun !== undefined) reportCannotRun(it, 'search_docs with unreadable documents', cannotRun);

async function search(args: Record<string, unknown>): Promise<CallToolResult> {
  return (await server!.client.callTool({ name: 'search_docs', arguments: args })) as CallToolResult;
}

describe.runIf(cannotRun === undefined)(
  `search_docs run as ${CHILD_USER_NAME} over documents it may not read`,
  () => {
    beforeAll(async () => {
      server = await connectAsChildUser({
        DOCS_ROOT: root,
        CARRIER_URL: 'http://127.0.0.1:9',
        LOG_LEVEL: 'warn',
      });
    }, 90_000);

    it('a search over every document skips the one it may not open and the folder it may not list, counts them, and answers from the rest', async () => {
      const result = await search({ query: 'refund', top_k: 5 });
      expect(result.isError, server!.stderr()).toBeUndefined();
      expect(result.structuredContent).toEqual({
        ok: true,
        items: [{ file: 'refunds.md', line: 1, text: 'refund within 30 days', score: 1 }],
        unreadable: 2,
        total: 1,
        note: 'Skipped 1 document and 1 folder the server has no permission to read.',
      });
      // Counted, never named: neither the document nor where the root lies.
      expect(JSON.stringify(result)).not.toContain('locked');
      expect(JSON.stringify(result)).not.toContain(base);
    });

    it('reads a named document through folders of mode 0711 (search without read permission), one and two levels down', async () => {
      for (const [path, text] of [
        ['guides/shipping.md', 'refund of shipping costs'],
        ['guides/more/rules.md', 'refund rules two folders down'],
      ] as const) {
        const result = await search({ query: 'refund', path });
        expect(result.isError, server!.stderr()).toBeUndefined();
        expect(result.structuredContent).toEqual({
          ok: true,
          items: [{ file: path, line: 1, text, score: 1 }],
          total: 1,
        });
      }
    });

    it('a named document it may not open is skipped and counted like any other, not an internal error', async () => {
      const result = await search({ query: 'refund', path: 'locked.md' });
      expect(result.isError, server!.stderr()).toBeUndefined();
      expect(result.structuredContent).toEqual({
        ok: true,
        items: [],
        unreadable: 1,
        total: 0,
        note: 'Skipped 1 document the server has no permission to read. No line matches these keywords; try other words.',
      });
    });

    it('a named folder it may search but not list says its documents were left out', async () => {
      const result = await search({ query: 'refund', path: 'guides' });
      expect(result.structuredContent).toEqual({
        ok: true,
        items: [],
        unreadable: 1,
        total: 0,
        note: 'Skipped 1 folder the server has no permission to read. No line matches these keywords; try other words.',
      });
    });
  },
);
