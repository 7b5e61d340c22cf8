import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
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

const CALLS = 3;

let server: ChildServer | undefined;
let carrier: Server | undefined;
let dir: string | undefined;
afterEach(() => {
  const child = server?.child;
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  carrier?.closeAllConnections();
  carrier?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/**
 * The stdio server with CALLS tracking calls held in flight by the carrier; `hangUp` closes the
 * client's ends of the pipes (as a client that exits does), then the carrier answers, so every
 * answer meets a closed stdout (EPIPE).
 */
async function clientGoesAway(hangUp: (running: ChildProcessWithoutNullStreams) => void): Promise<{
  code: number | null;
  signal: NodeJS.Signals | null;
  auditFile: string;
  stderr: string;
}> {
  const held: ServerResponse[] = [];
  carrier = createServer((_req, res) => {
    held.push(res);
  });
  await new Promise<void>((done) => carrier!.listen(0, '127.0.0.1', done));
  const carrierUrl = `http://127.0.0.1:${(carrier.address() as AddressInfo).port}`;
  dir = mkdtempSync(join(tmpdir(), 'order-service-stdio-gone-'));
  const auditFile = join(dir, 'audit.jsonl');
  const running = startChildServer([], {
    CARRIER_URL: carrierUrl,
    AUDIT_FILE: auditFile,
    TOOLGATE_SHUTDOWN_GRACE_MS: '20000',
  });
  server = running;
  await initializeStdio(running);
  for (let id = 1; id <= CALLS; id++) {
    running.send(toolCall(id, 'track_shipment', { tracking_number: `TRK0000000${id}` }));
  }
  await waitFor('the calls to reach the carrier', () => held.length === CALLS);
  hangUp(running.child);
  for (const res of held) {
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ trackingNumber: 'TRK', carrier: 'Held', status: 'in_transit', events: [] }));
  }
  const [code, signal] = await running.exited;
  return { code, signal, auditFile, stderr: running.stderr() };
}

function auditedCalls(auditFile: string): Array<[string, string]> {
  return auditRecords<{ tool: string; outcome: string }>(auditFile).map((record) => [
    record.tool,
    record.outcome,
  ]);
}

describe('stdio: the client goes away with calls in flight', () => {
  it('stdout closed under the answers (EPIPE): no crash, every call audited, the chain verifies, exit 0', async () => {
    const { code, signal, auditFile, stderr } = await clientGoesAway((running) => {
      running.stdout.destroy();
    });
    expect([code, signal]).toEqual([0, null]);
    expect(stderr).toContain('stdio: stdout is closed (the client went away); shutting down');
    expect(stderr).toContain('shutdown: done');
    expect(auditedCalls(auditFile)).toEqual(Array(CALLS).fill(['track_shipment', 'ok']));
    expect(await verifyAuditFile(auditFile)).toMatchObject({ intact: true, records: CALLS });
  }, 90_000);

  it('the client exits (stdin at EOF, stdout and stderr closed): no crash, every call audited, exit 0', async () => {
    const { code, signal, auditFile } = await clientGoesAway((running) => {
      running.stdout.destroy();
      running.stderr.destroy();
      running.stdin.end();
    });
    expect([code, signal]).toEqual([0, null]);
    expect(auditedCalls(auditFile)).toEqual(Array(CALLS).fill(['track_shipment', 'ok']));
    expect(await verifyAuditFile(auditFile)).toMatchObject({ intact: true, records: CALLS });
  }, 90_000);
});
