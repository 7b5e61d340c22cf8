// Red team T (session 38): the audit database's connection going silent (a NAT or firewall that lost the
// flow: no answer, no reset) held every audit write for the PostgreSQL sink's default 30 s while GET
// /ready kept answering 200; a SIGTERM in that window lost every record buffered (exit 1, "audit
// records lost"), although PostgreSQL itself was reachable all along. Now a statement left unanswered is
// retried on a new connection after 5 s, /ready answers 503 while audit's write is outstanding past
// TOOLGATE_READY_TIMEOUT_MS, and a shutdown meanwhile stores every record.
import { spawnSync } from 'node:child_process';
import { request } from 'node:http';
import { join } from 'node:path';
import { verifyAuditTable } from '@toolgate/audit';
import { type FaultProxy, reportMissingService, startFaultProxy } from '@toolgate/core/testing';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { APP, type ChildServer, startChildServer, waitFor } from './child-server.js';
import { createScratchDatabase, type ScratchDatabase, TEST_DATABASE_URL } from './fleet-harness.js';

function getReady(url: string): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path: '/ready', method: 'GET', agent: false }, (res) => {
      res.resume().on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

async function callTool(url: string, id: number): Promise<number> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'search_docs', arguments: { query: `refund ${id}` } },
    }),
  });
  await response.text();
  return response.status;
}

if (!TEST_DATABASE_URL) {
  reportMissingService(
    it,
    'the audit database going silent',
    'TEST_DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/test',
  );
}

describe.runIf(TEST_DATABASE_URL)('the audit database going silent under load', () => {
  let server: ChildServer | undefined;
  let proxy: FaultProxy | undefined;
  let orders: ScratchDatabase | undefined;
  let auditDb: ScratchDatabase | undefined;
  afterEach(async () => {
    const child = server?.child;
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await proxy?.close();
    await orders?.drop();
    await auditDb?.drop();
  });

  it('/ready answers 503 while a write hangs, records are stored on a new connection within seconds, and SIGTERM meanwhile loses none', async () => {
    orders = await createScratchDatabase(TEST_DATABASE_URL!);
    auditDb = await createScratchDatabase(TEST_DATABASE_URL!);
    const setup = spawnSync(process.execPath, [join(APP, 'dist', 'db-setup.js')], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DATABASE_URL: orders.url },
      encoding: 'utf8',
    });
    expect(setup.status, setup.stderr).toBe(0);
    const target = new URL(auditDb.url);
    proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const viaProxy = new URL(auditDb.url);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    const running = startChildServer(['--http', '--insecure-no-auth', '--port', '0'], {
      DATABASE_URL: orders.url,
      AUDIT_DATABASE_URL: viaProxy.href,
      CARRIER_URL: 'http://127.0.0.1:9',
      TOOLGATE_READY_TIMEOUT_MS: '1000',
    });
    server = running;
    const stderr = running.stderr;
    await waitFor('the listening line', () => stderr().includes('"listening"'));
    const url = /"url":"([^"]+)"/.exec(stderr())![1]!;
    const stored = async (): Promise<number> => {
      const [row] = await auditDb!.query<{ n: number }>('SELECT count(*)::int AS n FROM toolgate_audit');
      return row!.n;
    };

    let id = 0;
    for (let call = 0; call < 5; call += 1) expect(await callTool(url, ++id)).toBe(200);
    for (let poll = 0; poll < 100 && (await stored()) < id; poll += 1)
      await new Promise((d) => setTimeout(d, 50));
    expect(await stored()).toBe(id);
    expect(await getReady(url)).toBe(200);

    // The audit pool's connections go silent; a new connection is relayed as usual.
    proxy.silenceLive();
    const silencedAt = Date.now();
    let notReady = false;
    while (Date.now() - silencedAt < 3_000) {
      expect(await callTool(url, ++id)).toBe(200);
      if (!notReady && Date.now() - silencedAt > 1_200) notReady = (await getReady(url)) === 503;
      await new Promise((d) => setTimeout(d, 20));
    }
    expect(notReady).toBe(true);
    // Within the statement timeout (5 s) and a retry: every answered call stored, /ready 200 again.
    const answered = id;
    let count = await stored();
    while (count < answered && Date.now() - silencedAt < 15_000) {
      await new Promise((d) => setTimeout(d, 100));
      count = await stored();
    }
    expect(count).toBe(answered);
    expect(await getReady(url)).toBe(200);

    // Silent again, then SIGTERM while the write hangs: the shutdown stores every record and exits 0.
    proxy.silenceLive();
    for (let call = 0; call < 20; call += 1) expect(await callTool(url, ++id)).toBe(200);
    running.child.kill('SIGTERM');
    const [code] = await running.exited;
    expect(code, stderr()).toBe(0);
    expect(stderr()).not.toContain('audit records lost');
    expect(await stored()).toBe(id);
    const client = new pg.Client({ connectionString: auditDb.url });
    await client.connect();
    try {
      const report = await verifyAuditTable({ client });
      expect(report.chains.map((chain) => chain.intact)).toEqual([true]);
    } finally {
      await client.end();
    }
  }, 120_000);
});
