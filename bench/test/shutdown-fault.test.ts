import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

// Issue 13, case 3: SIGTERM under load. Before the fix 0 of 20 spans reached the collector and 39-44
// in-flight calls got neither an answer nor a record. The built order-service runs over HTTP with
// traces sent to a loopback OTLP collector stub and audit to a file; 20 clients call without pause;
// the test sends SIGTERM mid-load and counts answers, spans and records. Figures to stderr.

const MAIN = fileURLToPath(new URL('../../apps/order-service/dist/main.js', import.meta.url));
const CLIENTS = 20;
const SPAN_NAME = Buffer.from('tools/call search_docs');

/** Occurrences of `needle` in `haystack` (the span name is a raw string in OTLP protobuf, once per span). */
function countOf(haystack: Buffer, needle: Buffer): number {
  let count = 0;
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + needle.length)) {
    count += 1;
  }
  return count;
}

/** A loopback OTLP/HTTP collector that counts the search_docs spans it receives. */
async function startCollector(): Promise<{ url: string; spans(): number; server: Server }> {
  let spans = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      spans += countOf(Buffer.concat(chunks), SPAN_NAME);
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans: () => spans,
    server,
  };
}

type Outcome = 'answered' | 'refused' | 'hung';

/** One raw Streamable HTTP tools/call; `refused` for a 503 or a closed port, `hung` past 15 s. */
async function callDocs(url: string, id: number): Promise<Outcome> {
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'search_docs', arguments: { query: `refund ${id}` } },
      }),
      signal: AbortSignal.timeout(15_000),
    });
    const text = await response.text();
    if (response.status === 503) return 'refused';
    if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${text.slice(0, 200)}`);
    const data = text.split('\n').find((line) => line.startsWith('data: '));
    const message = JSON.parse(data ? data.slice('data: '.length) : text) as { id: number; result?: unknown };
    if (message.id !== id || !message.result) throw new Error(`not a result: ${text.slice(0, 200)}`);
    return 'answered';
  } catch (error) {
    if ((error as Error).name === 'TimeoutError') return 'hung';
    const code = ((error as Error).cause as { code?: string } | undefined)?.code;
    if (code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return 'refused';
    throw error;
  }
}

let child: ChildProcessWithoutNullStreams | undefined;
let dir: string | undefined;
let collector: Awaited<ReturnType<typeof startCollector>> | undefined;
afterEach(async () => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  collector?.server.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('SIGTERM under load (built server over HTTP, traces to a loopback collector)', () => {
  it('exits 0; every call is answered or refused with 503 (none hung); one span and one record per answered call', async () => {
    collector = await startCollector();
    dir = await mkdtemp(join(tmpdir(), 'toolgate-bench-shutdown-'));
    const auditFile = join(dir, 'audit.jsonl');
    child = spawn(process.execPath, [MAIN, '--http', '--insecure-no-auth', '--port', '0'], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        AUDIT_FILE: auditFile,
        TOOLGATE_SHUTDOWN_GRACE_MS: '10000',
      },
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const exited = new Promise<number | null>((done) => child!.once('exit', (code) => done(code)));
    const until = Date.now() + 60_000;
    while (!stderr.includes('"listening"')) {
      if (Date.now() > until) throw new Error(`the server did not start: ${stderr.slice(-500)}`);
      await new Promise((done) => setTimeout(done, 25));
    }
    const url = /"url":"([^"]+)"/.exec(stderr)![1]!;

    let nextId = 1;
    let termAt = 0;
    const calls: { outcome: Outcome; startedAt: number; endedAt: number }[] = [];
    const client = async (): Promise<void> => {
      for (;;) {
        const startedAt = performance.now();
        const outcome = await callDocs(url, nextId++);
        calls.push({ outcome, startedAt, endedAt: performance.now() });
        if (outcome !== 'answered') return;
      }
    };
    const clients = Array.from({ length: CLIENTS }, client);
    while (calls.length < 300) await new Promise((done) => setTimeout(done, 10));
    termAt = performance.now();
    child.kill('SIGTERM');
    await Promise.all(clients);
    const code = await exited;
    // The server flushed its spans before it exited; allow the collector to finish reading them.
    await new Promise((done) => setTimeout(done, 200));

    const answered = calls.filter((call) => call.outcome === 'answered').length;
    const inFlightAtTerm = calls.filter((call) => call.startedAt < termAt && call.endedAt >= termAt);
    const records = (await readFile(auditFile, 'utf8')).split('\n').filter((line) => line !== '').length;
    process.stderr.write(
      `shutdown (SIGTERM at ${CLIENTS} clients): exit ${code}; ${answered} answered (${inFlightAtTerm.filter((call) => call.outcome === 'answered').length} of ${inFlightAtTerm.length} in flight at SIGTERM), ` +
        `${calls.filter((call) => call.outcome === 'refused').length} refused, ${calls.filter((call) => call.outcome === 'hung').length} hung; ` +
        `${collector.spans()} spans at the collector, ${records} audit records\n`,
    );
    expect(code).toBe(0);
    expect(calls.filter((call) => call.outcome === 'hung')).toEqual([]);
    expect(collector.spans()).toBe(answered);
    expect(records).toBe(answered);
    expect(stderr).toContain('shutdown: tracing flushed');
  }, 90_000);
});
