import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { verifyAuditFile } from '@toolgate/audit';
import { afterEach, describe, expect, it } from 'vitest';

const MAIN = join(resolve(dirname(fileURLToPath(import.meta.url)), '..'), 'dist', 'main.js');

let child: ChildProcessWithoutNullStreams | undefined;
let dir: string | undefined;
afterEach(() => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function waitFor(what: string, check: () => boolean, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 5));
  }
}

describe('kill -9 (no shutdown at all)', () => {
  it('with TOOLGATE_DURABLE_AUDIT=1 every answer the client received has its record on disk, and the chain verifies', async () => {
    dir = mkdtempSync(join(tmpdir(), 'order-service-kill-'));
    const auditFile = join(dir, 'audit.jsonl');
    const running = spawn(process.execPath, [MAIN], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        CARRIER_URL: 'http://127.0.0.1:9',
        AUDIT_FILE: auditFile,
        TOOLGATE_DURABLE_AUDIT: '1',
      },
    });
    child = running;
    let stdout = '';
    running.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    running.stderr.resume();
    running.stdin.on('error', () => undefined);
    const exited = new Promise<NodeJS.Signals | null>((done) =>
      running.once('exit', (_code, signal) => done(signal)),
    );
    const send = (message: unknown): void => {
      running.stdin.write(`${JSON.stringify(message)}\n`);
    };
    send({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    await waitFor('the initialize answer', () => stdout.includes('"id":0'));
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const CALLS = 40;
    for (let id = 1; id <= CALLS; id++) {
      send({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'search_docs', arguments: { query: `refund ${id}` } },
      });
    }
    const answered = (): number[] =>
      stdout
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as { id?: number; result?: unknown })
        .filter((message) => typeof message.id === 'number' && message.id > 0 && message.result !== undefined)
        .map((message) => message.id!);
    // Killed as soon as the first answers arrive, with the rest still being answered.
    await waitFor('the first answers', () => answered().length >= 5);
    running.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    const seen = answered();
    const records = readFileSync(auditFile, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as { requestId: number; tool: string });
    const recorded = new Set(records.map((record) => record.requestId));
    expect(seen.filter((id) => !recorded.has(id))).toEqual([]);
    expect(await verifyAuditFile(auditFile)).toMatchObject({ intact: true, records: records.length });
  }, 90_000);
});
