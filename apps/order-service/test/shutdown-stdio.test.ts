import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const MAIN = join(resolve(dirname(fileURLToPath(import.meta.url)), '..'), 'dist', 'main.js');

let child: ChildProcessWithoutNullStreams | undefined;
afterEach(() => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
});

function startStdio(): {
  child: ChildProcessWithoutNullStreams;
  output: { stdout: string; stderr: string };
  exited: Promise<number | null>;
  send(line: string): void;
} {
  child = spawn(process.execPath, [MAIN], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
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
