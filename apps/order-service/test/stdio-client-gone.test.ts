import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { verifyAuditFile } from '@toolgate/audit';
import { afterEach, describe, expect, it } from 'vitest';

const MAIN = join(resolve(dirname(fileURLToPath(import.meta.url)), '..'), 'dist', 'main.js');
const CALLS = 3;

let child: ChildProcessWithoutNullStreams | undefined;
let carrier: Server | undefined;
let dir: string | undefined;
afterEach(() => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  carrier?.closeAllConnections();
  carrier?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function waitFor(what: string, check: () => boolean, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 25));
  }
}

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
  const running = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      CARRIER_URL: carrierUrl,
      AUDIT_FILE: auditFile,
      TOOLGATE_SHUTDOWN_GRACE_MS: '20000',
    },
  });
  child = running;
  let stdout = '';
  let stderr = '';
  running.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  running.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  running.stdin.on('error', () => undefined);
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((done) =>
    running.once('exit', (code, signal) => done([code, signal])),
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
  for (let id = 1; id <= CALLS; id++) {
    send({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'track_shipment', arguments: { tracking_number: `TRK0000000${id}` } },
    });
  }
  await waitFor('the calls to reach the carrier', () => held.length === CALLS);
  hangUp(running);
  for (const res of held) {
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ trackingNumber: 'TRK', carrier: 'Held', status: 'in_transit', events: [] }));
  }
  const [code, signal] = await exited;
  return { code, signal, auditFile, stderr };
}

function auditedCalls(auditFile: string): Array<[string, string]> {
  return readFileSync(auditFile, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as { tool: string; outcome: string })
    .map((record) => [record.tool, record.outcome]);
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
