import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const MAIN = join(resolve(dirname(fileURLToPath(import.meta.url)), '..'), 'dist', 'main.js');

let child: ChildProcessWithoutNullStreams | undefined;
afterEach(() => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
});

function startStdio(env: Record<string, string> = {}): {
  child: ChildProcessWithoutNullStreams;
  output: { stdout: string; stderr: string };
  exited: Promise<number | null>;
  send(line: string): void;
} {
  child = spawn(process.execPath, [MAIN], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env } });
  const output = { stdout: '', stderr: '' };
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    output.stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    output.stderr += chunk;
  });
  const running = child;
  // The server stops reading mid-way through an oversized line: the rest of the write meets EPIPE.
  running.stdin.on('error', () => undefined);
  const exited = new Promise<number | null>((done) => running.once('exit', (code) => done(code)));
  return { child: running, output, exited, send: (line) => running.stdin.write(`${line}\n`) };
}

async function waitFor(what: string, check: () => boolean, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 25));
  }
}

/** A carrier that holds every answer until the test releases it: the tracking calls stay in flight. */
async function heldCarrier(): Promise<{ held: ServerResponse[]; carrierUrl: string; close(): void }> {
  const held: ServerResponse[] = [];
  const carrier = createServer((_req, res) => {
    held.push(res);
  });
  await new Promise<void>((done) => carrier.listen(0, '127.0.0.1', done));
  return {
    held,
    carrierUrl: `http://127.0.0.1:${(carrier.address() as AddressInfo).port}`,
    close() {
      carrier.closeAllConnections();
      carrier.close();
    },
  };
}

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

describe('stdio input errors', () => {
  it('logs a malformed line to stderr and keeps serving', async () => {
    const server = startStdio();
    server.send(INITIALIZE);
    server.send('this line is not JSON-RPC');
    server.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
    await waitFor('the tools/list answer', () => server.output.stdout.includes('"id":1'));
    expect(server.output.stderr).toContain('stdio: a message could not be read; skipped it, still serving');
    // stdout stays pure JSON-RPC.
    for (const line of server.output.stdout.split('\n').filter((l) => l !== '')) {
      expect(JSON.parse(line)).toHaveProperty('jsonrpc', '2.0');
    }
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    expect(server.output.stderr).toContain('shutdown: done');
  }, 60_000);

  it('logs why a line was refused without a word of it: keys and text are the client’s', async () => {
    const server = startStdio();
    server.send(INITIALIZE);
    server.send('{"jsonrpc":"2.0","method":"ping","ALERT: rotate the db password now":1,"id":"x","extra":{');
    server.send(
      '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1},"ALERT: page on-call":1,"id":[1]}',
    );
    server.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
    await waitFor('the tools/list answer', () => server.output.stdout.includes('"id":1'));
    const refused = server.output.stderr
      .split('\n')
      .filter((line) => line.includes('stdio: a message could not be read'));
    expect(refused).toHaveLength(2);
    expect(JSON.parse(refused[0]!)).toMatchObject({ level: 'warn', error: 'not JSON' });
    expect(JSON.parse(refused[1]!)).toMatchObject({ level: 'warn', error: 'not a JSON-RPC message' });
    expect(server.output.stderr).not.toContain('ALERT');
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  }, 60_000);

  it('a line over the SDK limit (10 MiB) is logged with the reason and ends the server with exit 1', async () => {
    const server = startStdio();
    server.send(INITIALIZE);
    await waitFor('the initialize answer', () => server.output.stdout.includes('"id":0'));
    const big = `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"pad":"${'x'.repeat(11 * 1024 * 1024)}"}}`;
    server.send(big);
    expect(await server.exited).toBe(1);
    expect(server.output.stderr).toContain('an input line exceeded the stdio transport limit of 10 MiB');
    expect(server.output.stderr).toContain('shutdown: done');
    expect(server.output.stderr).not.toContain('xxxxxxxxxx');
  }, 60_000);
});

describe('shutdown over stdio (SIGTERM)', () => {
  it('answers every call in flight before it flushes audit and exits 0', async () => {
    const { held, carrierUrl, close: closeCarrier } = await heldCarrier();
    try {
      const server = startStdio({ CARRIER_URL: carrierUrl, TOOLGATE_SHUTDOWN_GRACE_MS: '20000' });
      server.send(INITIALIZE);
      await waitFor('the initialize answer', () => server.output.stdout.includes('"id":0'));
      server.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      const CALLS = 5;
      for (let id = 1; id <= CALLS; id++) {
        const args = { tracking_number: `TRK0000000${id}` };
        server.send(
          JSON.stringify({
            jsonrpc: '2.0',
            id,
            method: 'tools/call',
            params: { name: 'track_shipment', arguments: args },
          }),
        );
      }
      await waitFor('the calls to reach the carrier', () => held.length === CALLS);
      server.child.kill('SIGTERM');
      await waitFor('the drain to start', () =>
        server.output.stderr.includes('shutdown: stop accepting new calls'),
      );
      await new Promise((done) => setTimeout(done, 300));
      expect(server.child.exitCode).toBeNull();
      for (const res of held) {
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ trackingNumber: 'TRK', carrier: 'Held', status: 'in_transit', events: [] }));
      }
      expect(await server.exited).toBe(0);
      const answers = server.output.stdout
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as { id?: number; result?: { isError?: boolean } })
        .filter((message) => typeof message.id === 'number' && message.id > 0);
      expect(answers.map((answer) => answer.id).sort()).toEqual([1, 2, 3, 4, 5]);
      expect(answers.every((answer) => answer.result !== undefined && answer.result.isError !== true)).toBe(
        true,
      );
      expect(server.output.stderr).toContain('shutdown: in-flight stdio calls drained');
    } finally {
      closeCarrier();
    }
  }, 90_000);

  it('refuses the calls that arrive while it drains, and audits each of them', async () => {
    // The red team's finding: the drain gate sat before audit, so its refusals left no record.
    const { held, carrierUrl, close: closeCarrier } = await heldCarrier();
    const dir = mkdtempSync(join(tmpdir(), 'order-service-drain-'));
    const auditFile = join(dir, 'audit.jsonl');
    try {
      const server = startStdio({
        CARRIER_URL: carrierUrl,
        AUDIT_FILE: auditFile,
        TOOLGATE_SHUTDOWN_GRACE_MS: '20000',
      });
      const call = (id: number, name: string, args: Record<string, unknown>): void =>
        server.send(
          JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }),
        );
      server.send(INITIALIZE);
      await waitFor('the initialize answer', () => server.output.stdout.includes('"id":0'));
      server.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      call(1, 'track_shipment', { tracking_number: 'TRK00000001' });
      await waitFor('the call to reach the carrier', () => held.length === 1);
      server.child.kill('SIGTERM');
      await waitFor('the drain to start', () =>
        server.output.stderr.includes('shutdown: stop accepting new calls'),
      );
      call(2, 'search_docs', { query: 'refund' });
      call(3, 'search_docs', { query: 'shipping' });
      call(4, 'no_such_tool', {});
      await waitFor('the answers during the drain', () =>
        [2, 3, 4].every((id) => server.output.stdout.includes(`"id":${id}`)),
      );
      for (const res of held) {
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ trackingNumber: 'TRK', carrier: 'Held', status: 'in_transit', events: [] }));
      }
      expect(await server.exited).toBe(0);
      const answers = new Map(
        server.output.stdout
          .split('\n')
          .filter((line) => line !== '')
          .map((line) => JSON.parse(line) as { id?: number; result?: { content: { text: string }[] } })
          .filter((message) => typeof message.id === 'number')
          .map((message) => [message.id, message] as const),
      );
      for (const id of [2, 3]) {
        expect(JSON.parse(answers.get(id)?.result?.content[0]?.text ?? '{}')).toMatchObject({
          ok: false,
          error: 'unavailable',
          message: 'The server is shutting down.',
        });
      }
      const records = readFileSync(auditFile, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as { requestId: unknown; tool: string; outcome: string });
      const byRequest = new Map(records.map((record) => [record.requestId, record]));
      // Every call has its record: the one drained to its end, and each one refused during the drain.
      expect(byRequest.get(1)).toMatchObject({ tool: 'track_shipment', outcome: 'ok' });
      expect(byRequest.get(2)).toMatchObject({ tool: 'search_docs', outcome: 'unavailable' });
      expect(byRequest.get(3)).toMatchObject({ tool: 'search_docs', outcome: 'unavailable' });
      expect(byRequest.get(4)?.tool).toBe('no_such_tool');
    } finally {
      closeCarrier();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
  it('aborts the calls still running past the grace, audits each of them, and exits 0', async () => {
    // Session 36's red team: past the grace, calls still running (a carrier that never answers, an
    // elicitation nobody answers) were cut off by audit's close: no answer and no record, exit 0.
    const { held, carrierUrl, close: closeCarrier } = await heldCarrier();
    const dir = mkdtempSync(join(tmpdir(), 'order-service-abort-'));
    const auditFile = join(dir, 'audit.jsonl');
    try {
      const server = startStdio({
        CARRIER_URL: carrierUrl,
        AUDIT_FILE: auditFile,
        TOOLGATE_SHUTDOWN_GRACE_MS: '300',
      });
      server.send(INITIALIZE);
      await waitFor('the initialize answer', () => server.output.stdout.includes('"id":0'));
      server.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      const CALLS = 4;
      for (let id = 1; id <= CALLS; id++) {
        server.send(
          JSON.stringify({
            jsonrpc: '2.0',
            id,
            method: 'tools/call',
            params: { name: 'track_shipment', arguments: { tracking_number: `TRK0000000${id}` } },
          }),
        );
      }
      await waitFor('the calls to reach the carrier', () => held.length === CALLS);
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      expect(server.output.stderr).toContain('shutdown: calls past the grace aborted and returned');
      expect(server.output.stderr).not.toContain('audit records dropped');
      const records = readFileSync(auditFile, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as { requestId: unknown; tool: string; outcome: string });
      const byRequest = new Map(records.map((record) => [record.requestId, record]));
      for (let id = 1; id <= CALLS; id++) {
        expect(byRequest.get(id)?.tool, `call ${id} has its record`).toBe('track_shipment');
        expect(byRequest.get(id)?.outcome).not.toBe('ok');
      }
    } finally {
      closeCarrier();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);

  it('withdraws a question to the person once stdin closes: the call is answered and audited at once, not after the grace', async () => {
    // Session 36 left it: over stdio, a refund waiting for the person's answer when the client closed
    // stdin waited out the whole grace, though nobody could answer any more.
    const dir = mkdtempSync(join(tmpdir(), 'order-service-withdraw-'));
    const auditFile = join(dir, 'audit.jsonl');
    try {
      const server = startStdio({ AUDIT_FILE: auditFile, TOOLGATE_SHUTDOWN_GRACE_MS: '120000' });
      server.send(
        JSON.stringify({
          jsonrpc: '2.0',
          id: 0,
          method: 'initialize',
          params: {
            protocolVersion: '2025-06-18',
            capabilities: { elicitation: {} },
            clientInfo: { name: 'raw', version: '1' },
          },
        }),
      );
      await waitFor('the initialize answer', () => server.output.stdout.includes('"id":0'));
      server.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      server.send(
        JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: {
            name: 'cancel_order',
            arguments: { order_id: '4000000000047514', reason: 'ordered twice' },
          },
        }),
      );
      await waitFor('the question to the person', () => server.output.stdout.includes('elicitation/create'));
      const closedAt = Date.now();
      server.child.stdin.end();
      expect(await server.exited).toBe(0);
      // Well inside the 120 s grace (the old code waited all of it).
      expect(Date.now() - closedAt).toBeLessThan(30_000);
      expect(server.output.stderr).toContain('shutdown: questions to the person withdrawn');
      const answers = server.output.stdout
        .split('\n')
        .filter((line) => line !== '')
        .map(
          (line) =>
            JSON.parse(line) as { id?: unknown; result?: { isError?: boolean; content: { text: string }[] } },
        );
      const answer = answers.find((line) => line.id === 1 && line.result !== undefined);
      expect(answer?.result?.isError).toBe(true);
      const records = readFileSync(auditFile, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as { requestId: unknown; tool: string; outcome: string });
      const record = records.find((entry) => entry.requestId === 1);
      expect(record?.tool).toBe('cancel_order');
      expect(record?.outcome).not.toBe('ok');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
