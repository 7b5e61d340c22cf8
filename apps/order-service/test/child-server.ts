// The built order-service as a child process, driven the way a host drives it: raw JSON-RPC lines on
// stdin (stdio mode) or its listening line on stderr (HTTP mode), signals, and its audit file.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const APP = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const MAIN = join(APP, 'dist', 'main.js');

/** Polls `check` until it holds; throws naming `what` after `timeoutMs` (a hang is the failure). */
export async function waitFor(what: string, check: () => boolean, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 10));
  }
}

export interface ChildServer {
  readonly child: ChildProcessWithoutNullStreams;
  /** Everything written to stdout / stderr so far. */
  stdout(): string;
  stderr(): string;
  /** The exit code and signal, once it has exited. */
  readonly exited: Promise<[number | null, NodeJS.Signals | null]>;
  /** One JSON-RPC message as a line on stdin. */
  send(message: unknown): void;
}

/** Starts `dist/main.js` with `args` and only the given environment (plus PATH). */
export function startChildServer(args: readonly string[], env: Record<string, string>): ChildServer {
  const child = spawn(process.execPath, [MAIN, ...args], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  // A test that closes the pipes on purpose must not fail on the write that follows.
  child.stdin.on('error', () => undefined);
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((done) =>
    child.once('exit', (code, signal) => done([code, signal])),
  );
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    send: (message) => {
      child.stdin.write(`${JSON.stringify(message)}\n`);
    },
  };
}

/** The MCP handshake over stdio, as a raw client does it. */
export async function initializeStdio(server: ChildServer): Promise<void> {
  server.send({
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });
  await waitFor('the initialize answer', () => server.stdout().includes('"id":0'));
  server.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
}

/** A tools/call request line. */
export function toolCall(id: number, name: string, args: Record<string, unknown>): unknown {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } };
}

/** The records of an audit file, parsed. */
export function auditRecords<T = Record<string, unknown>>(auditFile: string): T[] {
  return readFileSync(auditFile, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as T);
}
