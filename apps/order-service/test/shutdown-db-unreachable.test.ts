import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifyAuditFile } from '@toolgate/audit';
import { type FaultProxy, reportMissingService, startFaultProxy } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { APP, auditRecords, type ChildServer, startChildServer, waitFor } from './child-server.js';
import { createScratchDatabase, type ScratchDatabase, TEST_DATABASE_URL } from './fleet-harness.js';

if (!TEST_DATABASE_URL) {
  reportMissingService(
    it,
    'the shutdown test with PostgreSQL unreachable',
    'TEST_DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/test',
  );
}

async function withinBound<T>(what: string, promise: Promise<T>, log: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} did not happen within 60 s; stderr:\n${log()}`)),
      60_000,
    );
  });
  try {
    return await Promise.race([promise, bound]);
  } finally {
    clearTimeout(timer);
  }
}

let server: ChildServer | undefined;
let proxy: FaultProxy | undefined;
let database: ScratchDatabase | undefined;
let dir: string | undefined;
afterEach(async () => {
  const child = server?.child;
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await proxy?.close();
  await database?.drop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.runIf(TEST_DATABASE_URL)('shutdown with PostgreSQL unreachable', () => {
  it('SIGTERM after database calls met a silent connection: their connections were dropped, so every closing step finishes, audit is flushed and verifies, exit 0', async () => {
    database = await createScratchDatabase(TEST_DATABASE_URL!);
    const setup = spawnSync(process.execPath, [join(APP, 'dist', 'db-setup.js')], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DATABASE_URL: database.url },
      encoding: 'utf8',
    });
    expect(setup.status, setup.stderr).toBe(0);
    const target = new URL(database.url);
    proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const viaProxy = new URL(database.url);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    dir = mkdtempSync(join(tmpdir(), 'order-service-db-down-'));
    const auditFile = join(dir, 'audit.jsonl');
    const running = startChildServer(['--http', '--insecure-no-auth', '--port', '0'], {
      DATABASE_URL: viaProxy.href,
      CARRIER_URL: 'http://127.0.0.1:9',
      AUDIT_FILE: auditFile,
      TOOLGATE_SHUTDOWN_GRACE_MS: '1000',
    });
    server = running;
    const stderr = running.stderr;
    await waitFor('the listening line', () => stderr().includes('"listening"'));
    const url = /"url":"([^"]+)"/.exec(stderr())![1]!;
    const call = async (id: number): Promise<Record<string, unknown>> => {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: { name: 'search_orders', arguments: { status: 'paid', limit: id } },
        }),
      });
      const text = await response.text();
      const data = text
        .split('\n')
        .find((line) => line.startsWith('data: '))
        ?.slice('data: '.length);
      return JSON.parse(data ?? text) as Record<string, unknown>;
    };
    // Connections to the database are open and in use.
    expect(await call(1)).toMatchObject({ result: { structuredContent: { ok: true } } });

    proxy.blackhole();
    // Both answer within the orders-db breaker's deadline. Their statements never return, so their
    // connections are taken for lost and dropped (@toolgate/sql's reply deadline) instead of staying
    // checked out, where they held pool.end() and with it the exit past its bound.
    const stuck = await withinBound(
      'the stuck calls to be answered',
      Promise.all([call(2), call(3)]),
      stderr,
    );
    for (const answer of stuck) expect(answer).toMatchObject({ result: { isError: true } });

    running.child.kill('SIGTERM');
    // Not a timing assertion: a shutdown that never ends is the failure, and this says where it hung.
    const [code, signal] = await withinBound('the process to exit after SIGTERM', running.exited, stderr);
    expect([code, signal]).toEqual([0, null]);
    expect(stderr()).not.toContain('did not finish within');
    expect(stderr()).toContain('"msg":"shutdown: audit flushed, breakers and database closed"');
    expect(stderr()).toContain('"exitCode":0,"msg":"shutdown: done"');
    const records = auditRecords<{ tool: string; outcome: string }>(auditFile);
    expect(records.map((record) => record.tool)).toEqual(['search_orders', 'search_orders', 'search_orders']);
    expect(await verifyAuditFile(auditFile)).toMatchObject({ intact: true, records: 3 });
  }, 120_000);
});
