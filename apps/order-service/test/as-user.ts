// The built server as a child process of an unprivileged user, driven by a real SDK client over its
// stdio. Root is never refused a permission (CAP_DAC_OVERRIDE), so as root (CI) the child runs as
// `nobody`; as anyone else it runs as that user, and a file of mode 000 is refused to its owner too.
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { MAIN } from './child-server.js';

/** Who the child runs as: `nobody` when the tests run as root, else the current user (no uid option). */
export const CHILD_USER: { uid: number; gid: number; name: string } | undefined =
  process.getuid?.() === 0 ? { uid: 65534, gid: 65534, name: 'nobody (uid 65534)' } : undefined;
export const CHILD_USER_NAME = CHILD_USER?.name ?? 'the current user';

const PROBE = `
const { accessSync, constants, readdirSync } = require('node:fs');
const { may, mayNot, mayNotList } = JSON.parse(process.argv[1]);
const problems = [];
for (const path of may) {
  try { accessSync(path, constants.R_OK); } catch (error) { problems.push(path + ' is not readable (' + error.code + ')'); }
}
for (const path of mayNot) {
  try { accessSync(path, constants.R_OK); problems.push(path + ' is readable'); } catch {}
}
for (const path of mayNotList) {
  try { readdirSync(path); problems.push(path + ' can be listed'); } catch {}
}
process.stdout.write(problems.join('; '));`;

/**
 * Why a child as CHILD_USER cannot prove what a test needs (undefined when it can): it must read
 * `may` (the node binary, the built server, the fixtures) and be refused `mayNot` and listing `mayNotList`.
 */
export function childCannotRun(paths: {
  may: string[];
  mayNot: string[];
  mayNotList: string[];
}): string | undefined {
  const probe = spawnSync(
    process.execPath,
    ['-e', PROBE, JSON.stringify({ ...paths, may: [MAIN, ...paths.may] })],
    {
      ...(CHILD_USER ? { uid: CHILD_USER.uid, gid: CHILD_USER.gid } : {}),
      encoding: 'utf8',
    },
  );
  if (probe.error) return `node cannot be started as ${CHILD_USER_NAME}: ${probe.error.message}`;
  if (probe.status !== 0) return `node as ${CHILD_USER_NAME} failed: ${probe.stderr.split('\n')[0]}`;
  return probe.stdout === '' ? undefined : `as ${CHILD_USER_NAME}: ${probe.stdout}`;
}

/**
 * Registers one test named for what could not run: it fails in CI (`CI=true`), elsewhere it is
 * reported as skipped with the reason, so it is counted, never a silent pass.
 */
export function reportCannotRun(
  it: (name: string, fn: (context: { skip: (note?: string) => void }) => void) => void,
  what: string,
  reason: string,
): void {
  const name = `${what} did not run: ${reason}`;
  it(name, (context) => {
    if (process.env.CI === 'true') throw new Error(`${name}; CI=true requires it`);
    context.skip(name);
  });
}

/** JSON-RPC lines over a child's stdin and stdout, what the SDK's stdio client does after its own spawn. */
class ChildStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly #buffer = new ReadBuffer();

  constructor(private readonly child: ChildProcessWithoutNullStreams) {}

  async start(): Promise<void> {
    this.child.stdout.on('data', (chunk: Buffer) => {
      this.#buffer.append(chunk);
      for (;;) {
        let message: JSONRPCMessage | null;
        try {
          message = this.#buffer.readMessage();
        } catch (error) {
          this.onerror?.(error as Error);
          continue;
        }
        if (message === null) break;
        this.onmessage?.(message);
      }
    });
    this.child.on('error', (error) => this.onerror?.(error));
    this.child.once('close', () => this.onclose?.());
  }

  async send(message: JSONRPCMessage): Promise<void> {
    this.child.stdin.write(serializeMessage(message));
  }

  async close(): Promise<void> {
    this.child.stdin.end();
  }
}

export interface ChildClient {
  readonly client: Client;
  stderr(): string;
  /** Ends the session (stdin closed) and waits for the server to exit; its exit code. */
  close(): Promise<number | null>;
}

/** `dist/main.js` over stdio as CHILD_USER with only `env` (plus PATH), and an SDK client connected to it. */
export async function connectAsChildUser(env: Record<string, string>): Promise<ChildClient> {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
    ...(CHILD_USER ? { uid: CHILD_USER.uid, gid: CHILD_USER.gid } : {}),
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  child.stdin.on('error', () => undefined);
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  const client = new Client({ name: 'as-user', version: '1.0.0' });
  try {
    // Seeding the embedded database takes a few seconds on a slow machine.
    await client.connect(new ChildStdioTransport(child), { timeout: 60_000 });
  } catch (error) {
    child.kill('SIGKILL');
    throw new Error(`the server as ${CHILD_USER_NAME} did not start: ${String(error)}; stderr:\n${stderr}`);
  }
  return {
    client,
    stderr: () => stderr,
    async close() {
      await client.close();
      return exited;
    },
  };
}
