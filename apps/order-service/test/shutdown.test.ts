import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, get, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const MAIN = join(resolve(dirname(fileURLToPath(import.meta.url)), '..'), 'dist', 'main.js');
// The carrier breaker lets 32 calls run at once, and one caller at most half of them (more are shed with
// rate_limited); without auth every HTTP caller is `anonymous`, one caller: 16 calls wait on the held
// carrier while 20 document searches run beside them: 36 calls in all.
const HELD_CALLS = 16;
const DOCS_CALLS = 20;
const CALLS = HELD_CALLS + DOCS_CALLS;

/**
 * GET on a connection of its own: fetch's pool would reuse a kept-alive connection that the draining
 * server has just closed (closeIdleConnections), and read "other side closed" instead of the answer.
 */
function probe(url: string): Promise<{ status: number; body: string }> {
  return new Promise((done, fail) => {
    get(url, { agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => done({ status: res.statusCode ?? 0, body }));
      res.on('error', fail);
    }).on('error', fail);
  });
}

/** A carrier that holds every tracking answer until the test releases it: calls stay in flight. */
async function startHeldCarrier(): Promise<{
  url: string;
  held: ServerResponse[];
  release(): void;
  server: Server;
}> {
  const held: ServerResponse[] = [];
  const server = createServer((req, res) => {
    const number = /^\/track\/([A-Za-z0-9]+)$/.exec(req.url ?? '')?.[1] ?? 'unknown';
    held.push(res);
    res.on('finish', () => undefined);
    Object.assign(res, { trackingNumber: number });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    held,
    server,
    release() {
      for (const res of held) {
        const trackingNumber = (res as ServerResponse & { trackingNumber: string }).trackingNumber;
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ trackingNumber, carrier: 'Held', status: 'in_transit', events: [] }));
      }
    },
  };
}

async function waitFor(what: string, check: () => boolean, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 25));
  }
}

/** One raw Streamable HTTP tools/call (stateless server: no session needed); returns the JSON-RPC answer. */
async function callTool(url: string, id: number, name: string, args: Record<string, unknown>) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }),
  });
  return { status: response.status, message: messageOf(await response.text()) };
}

/** callTool on a connection of its own (see `probe`): for a call sent while the server drains. */
function callToolAlone(url: string, id: number, name: string, args: Record<string, unknown>) {
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name, arguments: args },
  });
  return new Promise<{ status: number; message: Record<string, unknown> }>((done, fail) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => done({ status: res.statusCode ?? 0, message: messageOf(text) }));
        res.on('error', fail);
      },
    );
    req.on('error', fail).end(body);
  });
}

/** The JSON-RPC message of an answer, plain JSON or one SSE event. */
function messageOf(text: string): Record<string, unknown> {
  const data = text
    .split('\n')
    .find((line) => line.startsWith('data: '))
    ?.slice('data: '.length);
  return JSON.parse(data ?? text) as Record<string, unknown>;
}

let child: ChildProcessWithoutNullStreams | undefined;
let dir: string | undefined;
afterEach(() => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('shutdown over HTTP (SIGTERM)', () => {
  it('answers every in-flight call, refuses new ones with 503, records each call once and exits 0', async () => {
    const carrier = await startHeldCarrier();
    dir = mkdtempSync(join(tmpdir(), 'order-service-shutdown-'));
    const auditFile = join(dir, 'audit.jsonl');
    child = spawn(process.execPath, [MAIN, '--http', '--insecure-no-auth', '--port', '0'], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        CARRIER_URL: carrier.url,
        AUDIT_FILE: auditFile,
        TOOLGATE_SHUTDOWN_GRACE_MS: '30000',
      },
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const exited = new Promise<number | null>((done) => child!.once('exit', (code) => done(code)));
    await waitFor('the listening line', () => stderr.includes('"listening"'));
    const url = /"url":"([^"]+)"/.exec(stderr)![1]!;
    const base = url.replace(/\/mcp$/, '');
    expect((await probe(`${base}/ready`)).status).toBe(200);

    const calls = Array.from({ length: CALLS }, (_, i) =>
      i < HELD_CALLS
        ? callTool(url, i + 1, 'track_shipment', { tracking_number: `TRK${String(i).padStart(8, '0')}` })
        : callTool(url, i + 1, 'search_docs', { query: `refund ${i}` }),
    );
    // The carrier's calls time out after 3 s: from here on the test moves without waiting.
    await waitFor('the carrier calls to arrive', () => carrier.held.length === HELD_CALLS);
    // The document searches do not wait on the carrier: let them reach the server (and answer) before
    // SIGTERM, so none races the signal; the held carrier calls are the ones in flight through it.
    await Promise.all(calls.slice(HELD_CALLS));
    child.kill('SIGTERM');
    await waitFor('shutdown to start', () => stderr.includes('shutdown: stop accepting new calls'));

    // Draining: a load balancer sees not-ready, a late call is refused, the process is still alive.
    const ready = await probe(`${base}/ready`);
    expect(ready.status).toBe(503);
    expect(JSON.parse(ready.body)).toEqual({ status: 'shutting_down' });
    expect((await probe(`${base}/health`)).status).toBe(200);
    const late = await callToolAlone(url, 999, 'track_shipment', { tracking_number: 'TRK99999999' });
    expect(late.status).toBe(503);

    carrier.release();
    const answers = await Promise.all(calls);
    expect(await exited).toBe(0);
    carrier.server.close();

    expect(answers.map((answer) => answer.status)).toEqual(Array(CALLS).fill(200));
    for (const [i, answer] of answers.entries()) {
      const result = answer.message.result as { isError?: boolean; structuredContent?: { ok: boolean } };
      expect(answer.message.id).toBe(i + 1);
      if (result.isError) throw new Error(`call ${i + 1}: ${JSON.stringify(result).slice(0, 400)}`);
      expect(result.isError).toBeUndefined();
      expect(result.structuredContent?.ok).toBe(true);
    }
    const records = readFileSync(auditFile, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as { tool?: string });
    expect(records).toHaveLength(CALLS);
    expect(records.filter((record) => record.tool === 'track_shipment')).toHaveLength(HELD_CALLS);
    expect(records.filter((record) => record.tool === 'search_docs')).toHaveLength(DOCS_CALLS);
    expect(stderr).toContain('shutdown: in-flight calls drained, HTTP server closed');
    expect(stderr).toContain('shutdown: audit flushed, breakers and database closed');
    expect(stderr).toContain('shutdown: done');
  }, 120_000);
});
