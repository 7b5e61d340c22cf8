import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifyAuditFile } from '@toolgate/audit';
import { afterEach, describe, expect, it } from 'vitest';
import {
  auditRecords,
  type ChildServer,
  initializeStdio,
  startChildServer,
  toolCall,
  waitFor,
} from './child-server.js';

let server: ChildServer | undefined;
let dir: string | undefined;
afterEach(() => {
  const child = server?.child;
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('kill -9 (no shutdown at all)', () => {
  it('with TOOLGATE_DURABLE_AUDIT=1 every answer the client received has its record on disk, and the chain verifies', async () => {
    dir = mkdtempSync(join(tmpdir(), 'order-service-kill-'));
    const auditFile = join(dir, 'audit.jsonl');
    const running = startChildServer([], {
      CARRIER_URL: 'http://127.0.0.1:9',
      AUDIT_FILE: auditFile,
      TOOLGATE_DURABLE_AUDIT: '1',
    });
    server = running;
    await initializeStdio(running);
    const CALLS = 40;
    for (let id = 1; id <= CALLS; id++) running.send(toolCall(id, 'search_docs', { query: `refund ${id}` }));
    const answered = (): number[] =>
      running
        .stdout()
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as { id?: number; result?: unknown })
        .filter((message) => typeof message.id === 'number' && message.id > 0 && message.result !== undefined)
        .map((message) => message.id!);
    // Killed as soon as the first answers arrive, with the rest still being answered.
    await waitFor('the first answers', () => answered().length >= 5);
    running.child.kill('SIGKILL');
    expect((await running.exited)[1]).toBe('SIGKILL');
    const seen = answered();
    const records = auditRecords<{ requestId: number; tool: string }>(auditFile);
    const recorded = new Set(records.map((record) => record.requestId));
    expect(seen.filter((id) => !recorded.has(id))).toEqual([]);
    expect(await verifyAuditFile(auditFile)).toMatchObject({ intact: true, records: records.length });
  }, 90_000);
});
